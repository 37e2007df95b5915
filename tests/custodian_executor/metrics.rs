//! `/metrics` of a running executor: its withdrawals in flight and the age of the oldest rise
//! when one is sent to the provider and fall when the chain settles it; an escalation of a
//! custodian withdrawal is served, by owner and reason, while the withdrawal is unresolved.

use opledger_config::{DatabaseUrl, ServiceBase};
use opledger_custodian_executor::Config;
use opledger_testkit::ServiceRole;
use opledger_tests::custodian::{Sim, approved_withdrawal, state};
use opledger_tests::inbox::scrape;
use opledger_tests::signer::{NETWORK, trust_root};
use opledger_tests::{Stack, chain};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const AMOUNT: &str = "1000000000000000";
const OLDEST: &str = "opledger_custodian_oldest_in_flight_seconds";
const REFUSED: &str =
    "opledger_custodian_open_escalations{owner=\"security\",reason=\"APPROVALS_NOT_VERIFIED\"}";

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], opledger_testkit::free_port()))
}

fn in_flight(state: &str) -> String {
    format!("opledger_custodian_in_flight{{state=\"{state}\"}}")
}

/// Every in-flight state's count, in the order SIGNING, SIGNED, BROADCAST, UNKNOWN.
async fn in_flight_counts(metrics: SocketAddr) -> anyhow::Result<Vec<f64>> {
    let mut counts = Vec::new();
    for state in ["SIGNING", "SIGNED", "BROADCAST", "UNKNOWN"] {
        counts.push(scrape(metrics, &in_flight(state)).await?);
    }
    Ok(counts)
}

/// Scrapes `sample` until `want` holds of it (or fails after `within`); the last value.
async fn until(
    metrics: SocketAddr,
    sample: &str,
    want: impl Fn(f64) -> bool,
    within: Duration,
) -> anyhow::Result<f64> {
    let deadline = Instant::now() + within;
    loop {
        let seen = scrape(metrics, sample).await;
        if let Ok(value) = seen
            && want(value)
        {
            return Ok(value);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{sample}: {seen:?} after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the withdrawal `op` is in `want`.
async fn until_state(stack: &Stack, op: &str, want: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = state(stack, op).await?;
        if now == want {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "{op} is {now}, not {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Mines `blocks` blocks on the node at `rpc_url`.
async fn mine(rpc_url: &str, blocks: u64) -> anyhow::Result<()> {
    let answer = reqwest::Client::new()
        .post(rpc_url)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "anvil_mine",
                      "params": [format!("0x{blocks:x}")]}))
        .send()
        .await?;
    anyhow::ensure!(
        answer.status().is_success(),
        "anvil_mine: {}",
        answer.status()
    );
    Ok(())
}

#[tokio::test]
async fn the_gauges_follow_a_withdrawal_in_flight_and_an_escalation_while_it_is_open()
-> anyhow::Result<()> {
    let sim = Sim::start(json!({"seed": 7, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    // `paid`'s approvals verify against its pinned key; `unpinned` has an account but no trust
    // root here, so the executor refuses its withdrawals and escalates them to security.
    let paid = stack.tenant("paid").await?;
    let unpinned = stack.tenant("unpinned").await?;
    for tenant in [&paid, &unpinned] {
        stack
            .fund(tenant, "treasury", "ETH", "100000000000000000")
            .await?;
    }
    let mut second = sim.account(&unpinned, 5)?;
    second.name = "fireblocks-unpinned".to_owned();
    let metrics = loopback();
    let config = Config {
        base: ServiceBase {
            listen: loopback(),
            metrics_listen: metrics,
            database_url: DatabaseUrl(stack.url(ServiceRole::Custodian)),
            ..Config::default().base
        },
        executor_id: "metrics-test".to_owned(),
        accounts: vec![sim.account(&paid, 5)?, second],
        trust_roots: vec![trust_root(paid.id)],
        // The double's node, settled at its confirmations: an automining node mines no block
        // after the transfer's until this test does, so the withdrawal stays in flight.
        evidence: BTreeMap::from([(
            NETWORK.to_owned(),
            chain::evidence(&[sim.rpc_url.as_str()], 1),
        )]),
        payout_assets: opledger_tests::custodian::payout_assets(),
        poll_interval_ms: 100,
        follow_every_secs: 1,
        ..Config::default()
    };
    let executor = tokio::spawn(opledger_custodian_executor::run(config));

    // Nothing in flight: every state reads 0, the age 0, no escalation served.
    until(metrics, OLDEST, |v| v == 0.0, Duration::from_secs(20)).await?;
    assert_eq!(in_flight_counts(metrics).await?, [0.0; 4]);
    assert!(scrape(metrics, REFUSED).await.is_err(), "no escalation yet");

    // Sent to the provider and mined, not yet final: in flight, its age growing.
    let (w, _) = approved_withdrawal(&stack, &paid, AMOUNT).await?;
    until(
        metrics,
        &in_flight("BROADCAST"),
        |v| v == 1.0,
        Duration::from_secs(30),
    )
    .await?;
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "BROADCAST");
    let first = scrape(metrics, OLDEST).await?;
    assert!((0.0..60.0).contains(&first), "in flight for {first} s");
    let later = until(metrics, OLDEST, |v| v > first, Duration::from_secs(10)).await?;
    assert!(later < 60.0, "in flight for {later} s");

    // Refused before anything is sent: escalated to security, never in flight.
    let (refused, _) = approved_withdrawal(&stack, &unpinned, AMOUNT).await?;
    until(metrics, REFUSED, |v| v == 1.0, Duration::from_secs(30)).await?;
    assert_eq!(
        state(&stack, &refused.withdrawal_id).await?,
        "FAILED_TERMINAL"
    );
    assert_eq!(in_flight_counts(metrics).await?, [0.0, 0.0, 1.0, 0.0]);

    // Final depth: settled from the chain, nothing in flight; the escalation stays open while
    // its withdrawal is unresolved (funds held until an operator decides).
    mine(&sim.rpc_url, 5).await?;
    until_state(&stack, &w.withdrawal_id, "CONFIRMED").await?;
    until(metrics, OLDEST, |v| v == 0.0, Duration::from_secs(10)).await?;
    assert_eq!(in_flight_counts(metrics).await?, [0.0; 4]);
    assert_eq!(scrape(metrics, REFUSED).await?, 1.0);
    assert_eq!(sim.transfers_of(&refused.withdrawal_id).await?.len(), 0);

    executor.abort();
    stack.assert_invariants().await
}
