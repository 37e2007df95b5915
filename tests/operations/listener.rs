//! Listener timeouts and limits on a gRPC port: silent, half-sent and surplus connections are
//! closed, and a normal call is answered promptly throughout.

use opledger_config::ListenerConfig;
use opledger_proto::v1::GetBalanceRequest;
use opledger_tests::conn::{self, End};
use opledger_tests::{Stack, authed, operations_config};
use std::time::{Duration, Instant};

fn limits(max_connections: usize) -> ListenerConfig {
    ListenerConfig {
        idle_timeout_ms: 1_500,
        request_timeout_ms: 1_000,
        http2_keepalive_interval_ms: 500,
        http2_keepalive_timeout_ms: 500,
        max_connections,
        ..ListenerConfig::default()
    }
}

async fn stack(max_connections: usize) -> anyhow::Result<Stack> {
    let mut config = operations_config();
    config.base.listener = limits(max_connections);
    Stack::start_with(config).await
}

/// A normal call, and how long it took.
async fn balance(stack: &Stack, token: &str) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut client = stack.client().await?;
    let answer = client
        .get_balance(authed(
            token,
            GetBalanceRequest {
                account: "treasury".into(),
                asset: "ETH".into(),
            },
        ))
        .await?
        .into_inner();
    anyhow::ensure!(answer.available == "1000", "{answer:?}");
    Ok(started.elapsed())
}

/// Opens 20 silent connections and counts those the server closes within `window` of their
/// opening. A batch whose opening took so long that less than half the window is left is opened
/// again (at most five times), so that the count always covers most of the window.
async fn opened_then_closed_within(
    stack: &Stack,
    window: Duration,
) -> anyhow::Result<(Vec<tokio::net::TcpStream>, usize)> {
    for _ in 0..5 {
        let opened = Instant::now();
        let mut batch = conn::open(stack.addr, 20, b"").await?;
        let left = window.saturating_sub(opened.elapsed());
        if left >= window / 2 {
            let closed = conn::closed_within(&mut batch, left).await;
            return Ok((batch, closed));
        }
    }
    anyhow::bail!("20 connections took more than half of {window:?} to open, five times")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_half_sent_connections_are_closed_and_calls_stay_prompt() -> anyhow::Result<()> {
    let stack = stack(1024).await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut silent = conn::open(stack.addr, 200, b"").await?;
    let mut half_preface = conn::open(stack.addr, 100, &conn::H2_PREFACE[..10]).await?;
    let mut half_headers = conn::open(stack.addr, 100, &conn::h2_half_headers()).await?;
    // While 400 misbehaving connections are open, a normal call is answered at once.
    let during = balance(&stack, &acme.client).await?;
    assert!(during < Duration::from_secs(1), "{during:?}");

    // None is closed before the idle timeout (1.5 s): silent connections opened now are all still
    // open 1.1 s after they were opened. Timed from their own opening, not from the 400 above
    // (on a loaded machine, opening those and the call can take longer than the timeout).
    let (mut fresh, early) =
        opened_then_closed_within(&stack, Duration::from_millis(1_100)).await?;
    assert_eq!(early, 0, "closed before the idle timeout");
    // All of them are closed after it.
    let within = Duration::from_secs(4);
    let closed = conn::closed_within(&mut silent, within).await
        + conn::closed_within(&mut half_preface, within).await
        + conn::closed_within(&mut half_headers, within).await
        + conn::closed_within(&mut fresh, within).await;
    assert_eq!(closed, 420);
    let after = balance(&stack, &acme.client).await?;
    assert!(after < Duration::from_secs(1), "{after:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_beyond_max_connections_is_closed_at_once_and_the_slots_come_back()
-> anyhow::Result<()> {
    let stack = stack(20).await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut held = conn::open(stack.addr, 20, b"").await?;
    let mut surplus = conn::open(stack.addr, 5, b"").await?;
    for stream in &mut surplus {
        assert!(
            matches!(
                conn::end(stream, Duration::from_millis(500)).await,
                End::Closed(_)
            ),
            "a 21st connection stayed open"
        );
    }
    // Once the silent ones are closed by the idle timeout, calls get through again.
    assert_eq!(
        conn::closed_within(&mut held, Duration::from_secs(4)).await,
        20
    );
    balance(&stack, &acme.client).await?;
    Ok(())
}
