//! A transaction dropped from the pool: the reconciler cancels at the same nonce, the cancel
//! mines, the operation is VERIFIED_NOT_SENT with the hold released once, and the original can
//! no longer be mined.

use opledger_reconciler::Finding;
use opledger_tests::BOB;
use opledger_tests::chain::Chain;
use opledger_tests::chain::{CONFIRMATIONS, broadcaster_config, reconciler_config, witness};
use opledger_tests::signer::{HOT_WALLET, approve, attempts};

#[tokio::test]
async fn dropped_from_the_pool_is_cancelled_and_verified_not_sent() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    node.set_automine(false).await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &node.rpc_url()),
        stack.admin.broadcaster(),
    )?;
    let reconciler = opledger_reconciler::reconciler(
        &reconciler_config(&stack, &signer, &node.rpc_url()),
        stack.admin.reconciler(),
    )?;
    let before = node.balance(BOB).await?;
    let w = stack.withdraw(&acme, "7000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    let (original_hash, original_raw): (String, Vec<u8>) =
        sqlx::query_as("SELECT tx_hash, raw_tx FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert!(
        node.drop_transaction(&original_hash).await?,
        "dropped from the pool"
    );
    node.mine(1).await?;

    // Not found, nonce unconsumed: UNKNOWN and a cancel at the same nonce, persisted first.
    let findings = reconciler.tick(0, 64).await;
    assert!(
        matches!(findings.as_slice(), [Finding::CancelSubmitted(_)]),
        "{findings:?}"
    );
    assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 2);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        7_000_000_000_000_000,
        "still held"
    );
    node.mine(1).await?;

    // The cancel is included but not final: it is no payout and no release yet. (The old
    // decision moved the operation back to BROADCAST here, where a watcher confirmed the cancel
    // as the payout: the customer debited, the recipient never paid.)
    for _ in 1..CONFIRMATIONS {
        assert_eq!(reconciler.tick(0, 64).await, vec![Finding::Waiting]);
        assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");
        assert_eq!(
            stack.balance(acme.id, "treasury", "ETH").await?.1,
            7_000_000_000_000_000,
            "still held while the cancel is not final"
        );
        node.mine(1).await?;
    }

    // The cancel is final: the transfer can never happen. The reconciler proposes the release
    // with that evidence, and the hold stays until the witness, reading the chain itself,
    // attests the same evidence; then the hold is released once.
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::AwaitingWitness]);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        7_000_000_000_000_000,
        "still held until witnessed"
    );
    let witness = witness(&stack, &[&node.rpc_url()], 1).await?;
    assert_eq!(
        witness.tick(64).await,
        vec![opledger_witness::Outcome::Attested]
    );
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::VerifiedNotSent]);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "VERIFIED_NOT_SENT");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (10_000_000_000_000_000_000, 0)
    );
    assert_eq!(node.balance(BOB).await?, before, "BOB was never paid");
    // The original's nonce is taken: the stored bytes can no longer be mined.
    let resent = node.send_raw_transaction(&original_raw).await;
    assert!(
        resent.is_err(),
        "the original was accepted again: {resent:?}"
    );
    node.mine(1).await?;
    assert_eq!(node.balance(BOB).await?, before);
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 1);
    let (releases,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM ledger_entries WHERE tenant_id = $1 AND kind = 'RELEASE'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(releases, 1);
    stack.assert_invariants().await
}
