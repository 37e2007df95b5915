//! Control 7: an ambiguous timeout becomes UNKNOWN, the hold is retained, nothing is submitted
//! afresh before reconciliation, and the operation ends reconciled with a single transfer.

use opledger_domain::state::OperationState;
use opledger_reconciler::Finding;
use opledger_store::broadcast::Due;
use opledger_testkit::{FaultMode, FaultProxy};
use opledger_tests::BOB;
use opledger_tests::chain::Chain;
use opledger_tests::chain::{CONFIRMATIONS, broadcaster_config, reconciler_config};
use opledger_tests::signer::{HOT_WALLET, NETWORK, approve, attempts};

#[tokio::test]
async fn control_07_response_dropped_after_send_ends_confirmed_with_one_transfer()
-> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", node.port()).parse()?).await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &proxy.url("http")),
        stack.admin.broadcaster(),
    )?;
    let reconciler = opledger_reconciler::reconciler(
        &reconciler_config(&stack, &signer, &node.rpc_url()),
        stack.admin.reconciler(),
    )?;
    let before = node.balance(BOB).await?;
    let w = stack.withdraw(&acme, "6000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;

    // The node accepts the submission; the answer is lost on the way back.
    proxy.set_mode(FaultMode::ForwardThenDropResponse);
    let due = Due {
        tenant_id: acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::Approved,
        network: NETWORK.into(),
    };
    broadcaster.handle(&due).await?;
    assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        6_000_000_000_000_000,
        "hold retained"
    );
    // Nothing is submitted afresh: the broadcaster does not touch UNKNOWN operations.
    proxy.set_mode(FaultMode::Pass);
    assert_eq!(broadcaster.tick(64, 8).await, 0);

    // The reconciler asks the chain: the transfer is included but not final; it is left to the
    // watcher (BROADCAST, hold kept) until it is.
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::Included]);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    // At final depth the reconciler (examining a BROADCAST operation without news) confirms it.
    node.mine(CONFIRMATIONS - 1).await?;
    let findings = reconciler.tick(0, 64).await;
    assert_eq!(findings, vec![Finding::Confirmed]);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "CONFIRMED");
    assert_eq!(
        node.balance(BOB).await? - before,
        6_000_000_000_000_000,
        "one transfer"
    );
    assert_eq!(
        node.nonce(HOT_WALLET, "latest").await?,
        1,
        "one transaction from the hot wallet"
    );
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        1,
        "no fresh signature"
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (10_000_000_000_000_000_000 - 6_000_000_000_000_000, 0),
        "settled once"
    );
    assert!(
        reconciler.tick(0, 64).await.is_empty(),
        "nothing left unresolved"
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_node_that_does_not_answer_yields_no_verdict_and_keeps_the_hold() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", node.port()).parse()?).await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &proxy.url("http")),
        stack.admin.broadcaster(),
    )?;
    let reconciler = opledger_reconciler::reconciler(
        &reconciler_config(&stack, &signer, &proxy.url("http")),
        stack.admin.reconciler(),
    )?;
    let w = stack.withdraw(&acme, "6000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    proxy.set_mode(FaultMode::ForwardThenDropResponse);
    let due = Due {
        tenant_id: acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::Approved,
        network: NETWORK.into(),
    };
    broadcaster.handle(&due).await?;
    proxy.set_mode(FaultMode::ResetOnConnect);
    proxy.drop_connections();
    for _ in 0..3 {
        assert_eq!(reconciler.tick(0, 64).await, vec![Finding::NoVerdict]);
    }
    assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        6_000_000_000_000_000,
        "hold kept"
    );
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        1,
        "no cancel without evidence either"
    );
    stack.assert_invariants().await
}
