//! Control 6 (broadcaster part): the broadcaster process is killed after the signer persisted the
//! attempt but before submission, and after submission before recording it. A restarted
//! broadcaster resumes with the stored bytes: one transfer on chain, one signature.
//!
//! Multi-threaded runtimes: the signer runs in this process and must keep serving while the test
//! thread blocks waiting for the broadcaster process to die.

use opledger_testkit::{ChildService, free_port, wait_for_tcp};
use opledger_tests::chain::Chain;
use opledger_tests::chain::broadcaster_config;
use opledger_tests::signer::{HOT_WALLET, approve, attempts};
use opledger_tests::{BOB, Stack};
use std::net::SocketAddr;
use std::time::Duration;

async fn start(
    config_path: &std::path::Path,
    port: u16,
    failpoints: &str,
) -> anyhow::Result<ChildService> {
    let child = ChildService::spawn(
        "opledger-broadcaster",
        &[
            (
                "OPLEDGER_BROADCASTER_CONFIG",
                config_path.display().to_string(),
            ),
            ("OPLEDGER_FAILPOINTS", failpoints.to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )?;
    wait_for_tcp(
        SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(20),
    )
    .await?;
    Ok(child)
}

async fn wait_state(stack: &Stack, id: &str, states: &[&str]) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (state,): (String,) =
            sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
                .bind(id.parse::<uuid::Uuid>()?)
                .fetch_one(stack.admin.pool())
                .await?;
        if states.contains(&state.as_str()) || tokio::time::Instant::now() > deadline {
            return Ok(state);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn crash_and_resume(failpoint: &str) -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let before = node.balance(BOB).await?;
    let w = stack.withdraw(&acme, "3000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;

    let port = free_port();
    let mut cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    cfg.base.listen = SocketAddr::from(([127, 0, 0, 1], port));
    cfg.poll_interval_ms = 50;
    let dir = std::env::temp_dir().join(format!("opledger-bc-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir)?;
    let config_path = dir.join("broadcaster.toml");
    std::fs::write(&config_path, toml::to_string(&cfg)?)?;

    let mut child = start(&config_path, port, &format!("{failpoint}=abort")).await?;
    let status = child.wait_exit(Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| !s.success()),
        "the broadcaster did not die at {failpoint}: build it with `cargo build --workspace --bins`"
    );
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        1,
        "the signer persisted before the crash"
    );
    assert_eq!(
        wait_state(&stack, &w.withdrawal_id, &["SIGNED"]).await?,
        "SIGNED",
        "nothing recorded yet"
    );

    let mut child = start(&config_path, port, "").await?;
    let state = wait_state(
        &stack,
        &w.withdrawal_id,
        &["BROADCAST", "UNKNOWN", "CONFIRMED"],
    )
    .await?;
    // Resubmitting bytes a node already mined reads "nonce too low": ambiguous, so UNKNOWN for the
    // reconciler, never a new signature. Before submission the restart simply broadcasts, and the
    // broadcaster's chain watcher may already have confirmed it (anvil mines at once).
    let expected: &[&str] = if failpoint == "broadcast.before_submit" {
        &["BROADCAST", "CONFIRMED"]
    } else {
        &["BROADCAST", "UNKNOWN", "CONFIRMED"]
    };
    assert!(
        expected.contains(&state.as_str()),
        "state after restart: {state}"
    );
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        1,
        "never signed again"
    );
    node.mine(1).await?;
    assert_eq!(
        node.nonce(HOT_WALLET, "latest").await?,
        1,
        "exactly one transaction on chain"
    );
    assert_eq!(
        node.balance(BOB).await? - before,
        3_000_000_000_000_000,
        "paid once"
    );
    let log = child.log_tail(10_000);
    assert!(
        !log.contains(BOB) && !log.to_lowercase().contains(&BOB.to_lowercase()),
        "no address in the log"
    );
    child.kill();
    let _ = std::fs::remove_dir_all(&dir);
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_06_broadcaster_killed_before_submission_resumes_with_the_stored_bytes()
-> anyhow::Result<()> {
    crash_and_resume("broadcast.before_submit").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_06_broadcaster_killed_after_submission_never_pays_twice() -> anyhow::Result<()> {
    crash_and_resume("broadcast.after_submit").await
}
