//! The operator API: list what automation could not resolve; resolve only to what the chain
//! evidence shows, recorded as an operator transition with its reason.

use opledger_domain::state::OperationState;
use opledger_proto::v1::operator_service_client::OperatorServiceClient;
use opledger_proto::v1::{ListUnresolvedRequest, ResolveWithdrawalRequest, WithdrawalState};
use opledger_reconciler::Finding;
use opledger_store::broadcast::Due;
use opledger_testkit::{FaultMode, FaultProxy};
use opledger_tests::chain::Chain;
use opledger_tests::chain::{CONFIRMATIONS, broadcaster_config, reconciler_config};
use opledger_tests::signer::{NETWORK, approve};
use opledger_tests::{BOB, authed, reason};

#[tokio::test]
async fn an_escalated_withdrawal_is_resolved_only_to_what_the_evidence_shows() -> anyhow::Result<()>
{
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
    let mut cfg = reconciler_config(&stack, &signer, &proxy.url("http"));
    cfg.escalate_after_secs = 0;
    cfg.owner = "treasury-ops".into();
    let reconciler = opledger_reconciler::reconciler(&cfg, stack.admin.reconciler())?;
    let w = stack.withdraw(&acme, "9000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    // Sent and mined, but the answer is lost and the node then becomes unreachable: escalated.
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
    assert_eq!(
        reconciler.tick(0, 64).await,
        vec![Finding::Escalated("NO_VERDICT_WITHIN_WINDOW")]
    );
    assert_eq!(stack.state(&w.withdrawal_id).await?, "FAILED_TERMINAL");
    proxy.set_mode(FaultMode::Pass);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let routes = opledger_reconciler::routes(
        stack.admin.reconciler(),
        reconciler.clone(),
        std::time::Duration::from_secs(30),
    );
    let server = tokio::spawn(opledger_server::serve::serve(
        listener,
        opledger_reconciler::SERVICE_NAME,
        routes,
        std::future::pending(),
    ));
    let mut ops = OperatorServiceClient::connect(format!("http://{addr}")).await?;

    let listed = ops
        .list_unresolved(authed(&acme.operator, ListUnresolvedRequest::default()))
        .await?
        .into_inner();
    assert_eq!(listed.withdrawals.len(), 1);
    let item = &listed.withdrawals[0];
    assert_eq!(
        (item.withdrawal_id.as_str(), item.state),
        (
            w.withdrawal_id.as_str(),
            WithdrawalState::FailedTerminal as i32
        )
    );
    assert_eq!(
        (item.owner.as_str(), item.reason_code.as_str()),
        ("treasury-ops", "NO_VERDICT_WITHIN_WINDOW")
    );
    let err = ops
        .list_unresolved(authed(&acme.client, ListUnresolvedRequest::default()))
        .await
        .expect_err("client role");
    assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");

    let resolve = |outcome: WithdrawalState| {
        authed(
            &acme.operator,
            ResolveWithdrawalRequest {
                withdrawal_id: w.withdrawal_id.clone(),
                outcome: outcome as i32,
                reason: "checked the receipt on our own node".into(),
            },
        )
    };
    // The transfer is on chain: releasing the funds would contradict the evidence.
    let err = ops
        .resolve_withdrawal(resolve(WithdrawalState::VerifiedNotSent))
        .await
        .expect_err("contradicts evidence");
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (tonic::Code::FailedPrecondition, "EVIDENCE_MISMATCH")
    );
    assert_eq!(stack.state(&w.withdrawal_id).await?, "FAILED_TERMINAL");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        9_000_000_000_000_000,
        "still held"
    );
    // Included, but not at final depth: confirming it now would contradict the evidence too.
    let err = ops
        .resolve_withdrawal(resolve(WithdrawalState::Confirmed))
        .await
        .expect_err("not final yet");
    assert_eq!(reason(&err), "EVIDENCE_MISMATCH");
    assert!(
        err.message().contains("a transfer not yet final"),
        "{}",
        err.message()
    );
    node.mine(CONFIRMATIONS - 1).await?;
    let done = ops
        .resolve_withdrawal(resolve(WithdrawalState::Confirmed))
        .await?
        .into_inner();
    assert_eq!(done.state, WithdrawalState::Confirmed as i32);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (10_000_000_000_000_000_000 - 9_000_000_000_000_000, 0)
    );
    let (actor, why): (String, String) = sqlx::query_as(
        "SELECT actor, reason FROM operation_transitions WHERE op_id = $1 ORDER BY transition_id DESC LIMIT 1",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(
        (actor.as_str(), why.as_str()),
        ("operator", "checked the receipt on our own node")
    );
    let err = ops
        .resolve_withdrawal(resolve(WithdrawalState::Confirmed))
        .await
        .expect_err("already resolved");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    server.abort();
    stack.assert_invariants().await
}
