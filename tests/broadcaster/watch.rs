//! The chain watcher: confirmation after N blocks settles the hold once; no receipt concludes
//! nothing; receipts are looked up only when the head moves.

use crate::submit::config;
use opledger_testkit::Anvil;
use opledger_tests::signer::{InProcessSigner, NETWORK, approve};
use opledger_tests::{BOB, Stack};

async fn state(stack: &Stack, id: &str) -> anyhow::Result<String> {
    let (state,): (String,) = sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
        .bind(id.parse::<uuid::Uuid>()?)
        .fetch_one(stack.admin.pool())
        .await?;
    Ok(state)
}

#[tokio::test]
async fn confirmation_after_three_blocks_settles_the_hold_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    let node = Anvil::start().await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut cfg = config(&stack, &signer, &node.rpc_url());
    cfg.confirmations.insert(NETWORK.to_owned(), 3);
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.clone())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.clone())?;
    let w = stack.withdraw(&acme, "5000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    node.mine(1).await?; // automine already included it; one more block: 2 of 3
    let pass = watcher.tick(64).await;
    assert_eq!((pass.new_heads, pass.confirmed), (1, 0));
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "BROADCAST");
    assert_eq!(
        watcher.tick(64).await.new_heads,
        0,
        "no new block, no receipt lookups"
    );
    node.mine(1).await?;
    let pass = watcher.tick(64).await;
    assert_eq!(pass.confirmed, 1);
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "CONFIRMED");
    // The hold left the platform exactly once: held 0, available reduced by the amount.
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (10_000_000_000_000_000_000 - 5_000_000_000_000_000, 0)
    );
    node.mine(1).await?;
    assert_eq!(watcher.tick(64).await.confirmed, 0, "confirmed once");
    let (settles,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM ledger_entries WHERE tenant_id = $1 AND kind = 'SETTLE'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(settles, 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn without_a_receipt_or_an_answer_nothing_is_concluded() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    let node = Anvil::start().await?;
    node.set_automine(false).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let cfg = config(&stack, &signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.clone())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.clone())?;
    let w = stack.withdraw(&acme, "5000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    // Pending in the pool, not mined: no receipt.
    assert_eq!(watcher.tick(64).await.confirmed, 0);
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "BROADCAST");
    // The node goes away: no verdict either.
    drop(node);
    assert_eq!(
        watcher.tick(64).await,
        opledger_broadcaster::watcher::Pass::default()
    );
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "BROADCAST");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        5_000_000_000_000_000,
        "hold kept"
    );
    stack.assert_invariants().await
}
