//! A window without a verdict ends in FAILED_TERMINAL with an owner and a reason code; the hold
//! stays until a person resolves it.

use opledger_domain::state::OperationState;
use opledger_reconciler::Finding;
use opledger_store::broadcast::Due;
use opledger_testkit::{FaultMode, FaultProxy};
use opledger_tests::BOB;
use opledger_tests::chain::Chain;
use opledger_tests::chain::{broadcaster_config, reconciler_config};
use opledger_tests::signer::{NETWORK, approve};
use std::future::IntoFuture;

#[tokio::test]
async fn control_09_no_verdict_within_the_window_ends_failed_terminal_with_owner_hold_and_alert_metric()
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
    let mut cfg = reconciler_config(&stack, &signer, &proxy.url("http"));
    cfg.escalate_after_secs = 2;
    cfg.owner = "treasury-ops".into();
    let reconciler = opledger_reconciler::reconciler(&cfg, stack.admin.reconciler())?;
    let w = stack.withdraw(&acme, "9000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    proxy.set_mode(FaultMode::ForwardThenDropResponse);
    let due = Due {
        tenant_id: acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::Approved,
        network: NETWORK.into(),
    };
    broadcaster.handle(&due).await?;
    assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");
    // The node is unreachable: no verdict, within the window nothing changes.
    proxy.set_mode(FaultMode::ResetOnConnect);
    proxy.drop_connections();
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::NoVerdict]);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    assert_eq!(
        reconciler.tick(0, 64).await,
        vec![Finding::Escalated("NO_VERDICT_WITHIN_WINDOW")]
    );
    let (state, owner, reason) = stack.ending(&w.withdrawal_id).await?;
    assert_eq!(
        (state.as_str(), owner.as_str(), reason.as_str()),
        (
            "FAILED_TERMINAL",
            "treasury-ops",
            "NO_VERDICT_WITHIN_WINDOW"
        )
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        9_000_000_000_000_000,
        "hold kept"
    );
    assert!(
        reconciler.tick(0, 64).await.is_empty(),
        "FAILED_TERMINAL waits for a person"
    );

    // The metric the paging alert reads moves: served by the reconciler's real /metrics endpoint.
    let body = served_metrics(&stack).await?;
    assert!(
        body.contains("opledger_operations{state=\"FAILED_TERMINAL\"} 1"),
        "{body}"
    );
    assert!(body.contains("opledger_escalations 1"), "{body}");
    assert!(
        body.contains(
            "opledger_open_escalations{owner=\"treasury-ops\",reason=\"NO_VERDICT_WITHIN_WINDOW\"} 1"
        ),
        "{body}"
    );
    let age = sample(
        &body,
        "opledger_oldest_unresolved_seconds{state=\"FAILED_TERMINAL\"}",
    )?;
    assert!(
        age > 0.0 && age < 60.0,
        "the alert expression (> 0) holds: age {age}"
    );
    stack.assert_invariants().await
}

/// The metric the stalled-payout alert reads: an approved withdrawal nobody signs (no
/// broadcaster runs) ages in APPROVED; nothing waits in SIGNING or SIGNED.
#[tokio::test]
async fn an_approved_withdrawal_that_is_not_signed_ages_in_the_stalled_payout_metric()
-> anyhow::Result<()> {
    let stack = opledger_tests::Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", BOB).await?;
    approve(&stack, &acme, &w).await?;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let body = served_metrics(&stack).await?;
    let age = |state: &str| {
        sample(
            &body,
            &format!("opledger_oldest_waiting_seconds{{state=\"{state}\"}}"),
        )
    };
    let approved = age("APPROVED")?;
    assert!((0.2..60.0).contains(&approved), "APPROVED for {approved} s");
    assert_eq!((age("SIGNING")?, age("SIGNED")?), (0.0, 0.0));
    Ok(())
}

/// What the reconciler's real /metrics endpoint serves over the stack's database.
async fn served_metrics(stack: &opledger_tests::Stack) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let router = opledger_reconciler::metrics::router(stack.admin.reconciler());
    let server = tokio::spawn(axum::serve(listener, router).into_future());
    let body = scrape(addr).await;
    server.abort();
    body
}

/// The value of the sample `name` (metric and labels) in a Prometheus text body.
fn sample(body: &str, name: &str) -> anyhow::Result<f64> {
    let prefix = format!("{name} ");
    Ok(body
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .ok_or_else(|| anyhow::anyhow!("no {name} in {body}"))?
        .parse()?)
}

async fn scrape(addr: std::net::SocketAddr) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    anyhow::ensure!(response.starts_with("HTTP/1.1 200"), "{response}");
    Ok(response)
}
