//! Deposits need two principals (issue 25): a verified `deposit.confirmed` with chain evidence is
//! a proposal (pending, not spendable), and the witness credits it only once its own endpoints
//! show exactly that transfer at final depth, to an address registered to the account. Real
//! anvil node, real inbox, real witness pass.

use opledger_testkit::DEV_KEYS;
use opledger_tests::chain::{CONFIRMATIONS, credit_witness};
use opledger_tests::inbox::World;
use opledger_witness::Outcome;
use serde_json::json;

const RECIPIENT: &str = "0x00000000000000000000000000000000000d3905";
const AMOUNT: u128 = 2_500_000_000_000_000;

fn deposit_with_chain(
    deposit_id: &str,
    account: &str,
    amount: u128,
    tx_hash: &str,
    recipient: &str,
) -> String {
    json!({
        "type": "deposit.confirmed",
        "data": {
            "deposit_id": deposit_id, "account": account, "asset": "ETH",
            "amount": amount.to_string(), "network": "anvil", "tx_hash": tx_hash,
            "recipient": recipient,
        }
    })
    .to_string()
}

/// A world with an anvil node, `RECIPIENT` registered to acme's treasury on it, and a mined
/// transfer of `AMOUNT` to it (not yet final): its hash.
async fn world() -> anyhow::Result<(World, opledger_testkit::Anvil, String)> {
    let world = World::start("chainwatch", &["deposit.confirmed"]).await?;
    let node = opledger_testkit::Anvil::start().await?;
    let recipient: [u8; 20] = hex::decode(&RECIPIENT[2..])?
        .try_into()
        .map_err(|_| anyhow::anyhow!("recipient"))?;
    world
        .stack
        .admin
        .register_deposit_address(
            "anvil",
            &recipient,
            world.acme.id,
            &opledger_domain::payload::AccountName::parse("treasury")?,
        )
        .await?;
    let hash = node
        .send_transaction(json!({
            "from": DEV_KEYS[0].0, "to": RECIPIENT, "value": format!("{AMOUNT:#x}"),
        }))
        .await?;
    node.wait_receipt(&hash, std::time::Duration::from_secs(10))
        .await?;
    Ok((world, node, hash))
}

async fn pending(world: &World) -> anyhow::Result<String> {
    let (pending,): (Option<String>,) = sqlx::query_as(
        "SELECT sum(amount)::text FROM credit_proposals p WHERE tenant_id = $1 \
         AND NOT EXISTS (SELECT 1 FROM credit_attestations t WHERE t.credit_id = p.credit_id) \
         AND NOT EXISTS (SELECT 1 FROM credit_refusals r WHERE r.credit_id = p.credit_id)",
    )
    .bind(world.acme.id.as_uuid())
    .fetch_one(world.stack.admin.pool())
    .await?;
    Ok(pending.unwrap_or_default())
}

#[tokio::test]
async fn a_deposit_is_credited_once_only_after_the_witness_finds_it_final() -> anyhow::Result<()> {
    let (world, node, hash) = world().await?;
    // Two endpoints, quorum 2 (two proxies in front of the node: two answers to agree on).
    let proxies = [
        opledger_testkit::RpcProxy::start(&node.rpc_url()).await?,
        opledger_testkit::RpcProxy::start(&node.rpc_url()).await?,
    ];
    let urls = [proxies[0].url(), proxies[1].url()];
    let witness = credit_witness(&world.stack, &[&urls[0], &urls[1]], 2, &[world.acme.id]).await?;
    let body = deposit_with_chain("dep-1", "treasury", AMOUNT, &hash, RECIPIENT);
    assert_eq!(world.post(&body).await?, 200);
    // Re-sent under another event id: one proposal.
    assert_eq!(world.post(&body).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 2)
        .await?;
    let mut outcomes = world.outcomes().await?;
    outcomes.sort();
    assert_eq!(outcomes, ["DONE:ALREADY_PROPOSED", "DONE:CREDIT_PROPOSED"]);
    // Proposed, not spendable: the account does not exist yet, the credit is pending.
    assert_eq!(pending(&world).await?, AMOUNT.to_string());
    assert_eq!(world.rows("ledger_credits", "").await?, 0);

    // Mined but not final: the witness attests nothing.
    assert_eq!(witness.tick(16).await, [Outcome::NoVerdict]);
    assert_eq!(world.rows("ledger_credits", "").await?, 0);

    node.mine(CONFIRMATIONS + 1).await?;
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(world.treasury().await?, (AMOUNT, 0));
    assert_eq!(pending(&world).await?, "");
    // Nothing left to attest; a replayed event changes nothing.
    assert_eq!(witness.tick(16).await, []);
    assert_eq!(world.post(&body).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 3)
        .await?;
    assert_eq!(witness.tick(16).await, []);
    assert_eq!(world.rows("ledger_credits", "").await?, 1);
    assert_eq!(world.treasury().await?, (AMOUNT, 0));
    world.stack.assert_invariants().await?;
    world.stop().await
}

#[tokio::test]
async fn a_deposit_the_chain_contradicts_is_refused_and_one_it_does_not_show_stays_pending()
-> anyhow::Result<()> {
    let (world, node, hash) = world().await?;
    node.mine(CONFIRMATIONS + 1).await?;
    let url = node.rpc_url();
    let witness = credit_witness(&world.stack, &[&url], 1, &[world.acme.id]).await?;
    // The provider (or a compromised inbox) claims ten times the amount mined.
    let inflated = deposit_with_chain("dep-1", "treasury", AMOUNT * 10, &hash, RECIPIENT);
    // A transaction the chain does not have.
    let invented = deposit_with_chain(
        "dep-2",
        "treasury",
        AMOUNT,
        "0x1111111111111111111111111111111111111111111111111111111111111111",
        RECIPIENT,
    );
    // A real transfer claimed for an address nobody registered.
    let unregistered = deposit_with_chain(
        "dep-3",
        "treasury",
        AMOUNT,
        &hash,
        "0x00000000000000000000000000000000000dead1",
    );
    for body in [&inflated, &invented, &unregistered] {
        assert_eq!(world.post(body).await?, 200);
    }
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 3)
        .await?;
    let mut outcomes = witness.tick(16).await;
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(
        outcomes,
        [
            Outcome::NoVerdict,
            Outcome::NoVerdict,
            Outcome::Refused("DEPOSIT_AMOUNT_MISMATCH"),
        ]
    );
    // Nothing credited; the two it cannot decide stay pending, and stay so on the next pass.
    assert_eq!(world.rows("ledger_credits", "").await?, 0);
    assert_eq!(world.rows("credit_refusals", "").await?, 1);
    assert_eq!(pending(&world).await?, (2 * AMOUNT).to_string());
    node.mine(5).await?;
    assert_eq!(
        witness.tick(16).await,
        [Outcome::NoVerdict, Outcome::NoVerdict]
    );
    assert_eq!(world.rows("ledger_credits", "").await?, 0);
    world.stop().await
}
