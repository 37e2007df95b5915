//! A reorganization under a custodian's settlement: the chain watcher, which re-checks every
//! CONFIRMED inclusion of its network, reopens the settlement (CONFIRMED -> BROADCAST, the hold
//! open again); the executor then judges the withdrawal from the chain again: settled anew in
//! its new block when the transfer was included again, held while it is gone. Never a second
//! payout, never a release.

use crate::classes::{AMOUNT, World};
use opledger_tests::custodian::{books, chain_watcher};
use serde_json::json;

#[tokio::test]
async fn a_reorganized_custodian_settlement_is_reopened_then_settled_again_or_held_never_paid_twice()
-> anyhow::Result<()> {
    let w = World::start(json!([]), 2).await?;
    let (one, one_to) = w.withdrawal().await?;
    let (two, two_to) = w.withdrawal().await?;
    w.until(&one, true, |b| b.state == "CONFIRMED").await?;
    w.until(&two, true, |b| b.state == "CONFIRMED").await?;
    let (_, one_transfer) = w.settled_once(&one, &one_to).await?;
    let (_, two_transfer) = w.settled_once(&two, &two_to).await?;
    // The double's wallet sent them in nonce order: the reorganization includes the first
    // again (its nonce stays valid alone) and drops the second.
    let mut sent = [
        (
            one_transfer["nonce"].as_u64(),
            one.as_str(),
            one_to.as_str(),
        ),
        (
            two_transfer["nonce"].as_u64(),
            two.as_str(),
            two_to.as_str(),
        ),
    ];
    sent.sort();
    let [(_, kept, kept_to), (_, gone, gone_to)] = sent;
    let hash_of = |op: &str| {
        let transfer = if op == one {
            &one_transfer
        } else {
            &two_transfer
        };
        transfer["hash"].as_str().unwrap_or_default().to_owned()
    };
    let (kept_hash, gone_hash) = (hash_of(kept), hash_of(gone));
    let kept_before = books(&w.stack, kept).await?.inclusions;

    let watcher = chain_watcher(&w.stack, &w.sim).await?;
    let pass = watcher.tick(64).await;
    assert_eq!((pass.new_heads, pass.reopened), (1, 0), "{pass:?}");

    // Replace every block from the lower of the two inclusions up to the head; the first
    // transfer goes into the first new block (at final depth again), the second is gone.
    let node = w.sim.anvil()?;
    let raw = node
        .rpc("eth_getRawTransactionByHash", json!([kept_hash]))
        .await?;
    let lowest = [kept, gone];
    let mut lowest_block = i64::MAX;
    for op in lowest {
        for inclusion in books(&w.stack, op).await?.inclusions {
            lowest_block = lowest_block.min(inclusion.block_number);
        }
    }
    let head = node.block_number().await?;
    let depth = head - u64::try_from(lowest_block)? + 1;
    node.rpc("anvil_reorg", json!([depth, [[raw, 0]]])).await?;
    let moved = node.receipt(&kept_hash).await?;
    let moved = moved.ok_or_else(|| anyhow::anyhow!("the first transfer was not re-included"))?;
    assert_ne!(
        moved["blockHash"].as_str(),
        Some(kept_before[0].block_hash.as_str())
    );
    assert_eq!(node.receipt(&gone_hash).await?, None, "the second is gone");
    assert_eq!(node.balance(gone_to).await?, 0);

    // The watcher reopens both settlements: back to BROADCAST, the holds open again.
    let pass = watcher.tick(64).await;
    assert_eq!(pass.reopened, 2, "{pass:?}");
    for op in [kept, gone] {
        let reopened = books(&w.stack, op).await?;
        assert_eq!(reopened.state, "BROADCAST");
        assert_eq!(reopened.hold, "OPEN");
        assert_eq!((reopened.settles, reopened.reopens), (1, 1));
        assert!(reopened.live_inclusions().is_empty());
    }

    // The executor judges them from the chain again, without mining: the first is settled in
    // its new block, the second held while the chain does not show it.
    w.until(kept, false, |b| b.state == "CONFIRMED").await?;
    let seen = books(&w.stack, gone).await?.records.len();
    w.until(gone, false, |b| b.records.len() >= seen + 3)
        .await?;
    let settled = books(&w.stack, kept).await?;
    assert_eq!(settled.hold, "SETTLED");
    assert_eq!(
        (settled.settles, settled.reopens, settled.releases),
        (2, 1, 0)
    );
    let live = settled.live_inclusions();
    assert_eq!((settled.inclusions.len(), live.len()), (2, 1));
    assert_eq!(live[0].tx_hash, kept_hash);
    assert_eq!(
        live[0].block_hash,
        moved["blockHash"].as_str().unwrap_or_default()
    );
    let held = books(&w.stack, gone).await?;
    assert_eq!(held.state, "BROADCAST");
    assert_eq!(held.hold, "OPEN");
    assert_eq!((held.settles, held.reopens, held.releases), (1, 1, 0));
    assert_eq!(held.proposals, 0, "a transaction was named: never released");
    assert!(held.live_inclusions().is_empty());
    for op in [kept, gone] {
        let each = books(&w.stack, op).await?;
        assert_eq!((each.requests, each.sends), (1, 1), "never sent again");
        assert_eq!(w.sim.transfers_of(op).await?.len(), 1, "one transfer");
    }
    assert_eq!(node.balance(kept_to).await?, AMOUNT.parse::<u128>()?);
    assert_eq!(node.balance(gone_to).await?, 0);

    // The new inclusion is canonical: the watcher reopens nothing more.
    node.mine(1).await?;
    let pass = watcher.tick(64).await;
    assert_eq!((pass.new_heads, pass.reopened), (1, 0), "{pass:?}");
    w.stack.assert_invariants().await
}
