//! Submitting: only stored bytes, classified; acceptance is BROADCAST, ambiguity is UNKNOWN.

use opledger_broadcaster::worker::Outcome;
use opledger_chain::SubmitClass;
use opledger_domain::state::OperationState;
use opledger_store::broadcast::Due;
use opledger_testkit::Anvil;
use opledger_tests::chain::Chain;
use opledger_tests::chain::broadcaster_config;
use opledger_tests::signer::{HOT_WALLET, InProcessSigner, NETWORK, approve, attempts};
use opledger_tests::{ALICE, BOB, Stack};
use std::time::Duration;

#[tokio::test]
async fn an_approved_withdrawal_is_signed_submitted_and_mined_once() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &node.rpc_url()),
        stack.admin.broadcaster(),
    )?;
    let before = node.balance(BOB).await?;
    let w = stack.withdraw(&acme, "2500000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    assert_eq!(broadcaster.tick(64, 8).await, 0, "nothing left to do");
    let (hash,): (String,) = sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1")
        .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(stack.admin.pool())
        .await?;
    let receipt = node.wait_receipt(&hash, Duration::from_secs(10)).await?;
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(node.balance(BOB).await? - before, 2_500_000_000_000_000);
    assert_eq!(
        node.nonce(HOT_WALLET, "latest").await?,
        1,
        "one transaction from the hot wallet"
    );
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 1);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        2_500_000_000_000_000,
        "hold kept until confirmed"
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn already_known_is_broadcast_and_a_consumed_nonce_is_unknown() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    let node = Anvil::start_with(opledger_testkit::AnvilOptions {
        block_time: None,
        ..Default::default()
    })
    .await?;
    node.set_automine(false).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &node.rpc_url()),
        stack.admin.broadcaster(),
    )?;
    let mut signer_client = opledger_tests::signer::client(signer.addr).await?;

    // 1. The bytes reached the node earlier (say, by a worker that died before recording it).
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signed = signer_client
        .sign_withdrawal(opledger_tests::signer::sign_request(
            acme.id,
            &w.withdrawal_id,
        ))
        .await?
        .into_inner();
    node.send_raw_transaction(&signed.attempt.expect("attempt").raw_transaction)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let due = Due {
        tenant_id: acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::Signed,
        network: NETWORK.into(),
    };
    let outcome = broadcaster.handle(&due).await?;
    assert_eq!(
        outcome,
        Outcome::Submitted(SubmitClass::AlreadyKnown, OperationState::Broadcast)
    );

    // 2. Another transaction took the next nonce of the hot wallet first: ambiguous, so UNKNOWN,
    //    the hold stays and nothing is signed again.
    node.mine(1).await?;
    let other = stack.withdraw(&acme, "1000", BOB).await?;
    approve(&stack, &acme, &other).await?;
    signer_client
        .sign_withdrawal(opledger_tests::signer::sign_request(
            acme.id,
            &other.withdrawal_id,
        ))
        .await?;
    node.send_transaction(
        serde_json::json!({ "from": HOT_WALLET, "to": HOT_WALLET, "value": "0x0" }),
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    node.mine(1).await?;
    let due = Due {
        tenant_id: acme.id,
        op_id: other.withdrawal_id.parse()?,
        state: OperationState::Signed,
        network: NETWORK.into(),
    };
    let outcome = broadcaster.handle(&due).await?;
    assert_eq!(
        outcome,
        Outcome::Submitted(SubmitClass::NonceTooLow, OperationState::Unknown)
    );
    assert_eq!(
        attempts(&stack, &other.withdrawal_id).await?,
        1,
        "no second signature"
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        2000,
        "both holds kept"
    );
    stack.assert_invariants().await
}

/// An approved withdrawal of `amount` wei to BOB, handled once by a broadcaster that reaches the
/// node through a fault proxy in `mode`.
struct Faulted {
    chain: Chain,
    proxy: opledger_testkit::FaultProxy,
    broadcaster: opledger_broadcaster::worker::Broadcaster,
    withdrawal_id: String,
    outcome: Outcome,
    /// BOB's balance on the node before the withdrawal was handled.
    bob_before: u128,
}

async fn handled_through(
    mode: opledger_testkit::FaultMode,
    amount: &str,
) -> anyhow::Result<Faulted> {
    let chain = Chain::start().await?;
    let upstream: std::net::SocketAddr = format!("127.0.0.1:{}", chain.node.port()).parse()?;
    let proxy = opledger_testkit::FaultProxy::start(upstream).await?;
    proxy.set_mode(mode);
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&chain.stack, &chain.signer, &proxy.url("http")),
        chain.stack.admin.broadcaster(),
    )?;
    let w = chain.stack.withdraw(&chain.acme, amount, BOB).await?;
    approve(&chain.stack, &chain.acme, &w).await?;
    let due = Due {
        tenant_id: chain.acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::Approved,
        network: NETWORK.into(),
    };
    let bob_before = chain.node.balance(BOB).await?;
    let outcome = broadcaster.handle(&due).await?;
    Ok(Faulted {
        chain,
        proxy,
        broadcaster,
        withdrawal_id: w.withdrawal_id,
        outcome,
        bob_before,
    })
}

#[tokio::test]
async fn a_response_lost_after_the_node_accepted_becomes_unknown_with_the_hold_kept()
-> anyhow::Result<()> {
    // The node receives and accepts the transaction; the broadcaster never sees the answer.
    let Faulted {
        chain: Chain {
            stack, acme, node, ..
        },
        proxy,
        broadcaster,
        withdrawal_id,
        outcome,
        bob_before,
    } = handled_through(
        opledger_testkit::FaultMode::ForwardThenDropResponse,
        "4000000000000000",
    )
    .await?;
    assert!(
        matches!(
            outcome,
            Outcome::Submitted(
                SubmitClass::ConnectionFailed | SubmitClass::Timeout,
                OperationState::Unknown
            )
        ),
        "{outcome:?}"
    );
    assert_eq!(stack.state(&withdrawal_id).await?, "UNKNOWN");
    assert_eq!(proxy.stats().connections, 1, "one request, not retried");
    // The transfer happened exactly once; nothing was signed again; the funds stay held.
    node.mine(1).await?;
    assert_eq!(node.balance(BOB).await? - bob_before, 4_000_000_000_000_000);
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 1);
    assert_eq!(attempts(&stack, &withdrawal_id).await?, 1);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        4_000_000_000_000_000
    );
    assert!(
        broadcaster
            .metrics()
            .contains("opledger_submissions_total{class=\"connection_failed\"} 1"),
        "{}",
        broadcaster.metrics()
    );
    // UNKNOWN is not due for broadcasting: no blind retry.
    proxy.set_mode(opledger_testkit::FaultMode::Pass);
    assert_eq!(broadcaster.tick(64, 8).await, 0);
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_node_that_never_answers_is_a_timeout_unknown_with_the_hold_kept() -> anyhow::Result<()> {
    // The request is read and never answered: the broadcaster gives up after its timeout.
    let Faulted {
        chain: Chain {
            stack, acme, node, ..
        },
        proxy,
        broadcaster,
        withdrawal_id,
        outcome,
        ..
    } = handled_through(opledger_testkit::FaultMode::Blackhole, "5000000000000000").await?;
    assert!(
        matches!(
            outcome,
            Outcome::Submitted(SubmitClass::Timeout, OperationState::Unknown)
        ),
        "{outcome:?}"
    );
    assert_eq!(stack.state(&withdrawal_id).await?, "UNKNOWN");
    assert_eq!(attempts(&stack, &withdrawal_id).await?, 1);
    assert_eq!(
        proxy.stats().connections,
        1,
        "one request, not retried behind the broadcaster's back"
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        5_000_000_000_000_000,
        "the hold is kept"
    );
    assert!(
        broadcaster
            .metrics()
            .contains("opledger_submissions_total{class=\"timeout\"} 1"),
        "{}",
        broadcaster.metrics()
    );
    // The node never heard of it, and UNKNOWN is not re-sent when the node answers again: the
    // reconciler decides.
    proxy.set_mode(opledger_testkit::FaultMode::Pass);
    assert_eq!(broadcaster.tick(64, 8).await, 0);
    node.mine(1).await?;
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 0);
    stack.assert_invariants().await
}
