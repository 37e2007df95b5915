//! Control 5: the ledger hold and the operation are created in one transaction. The real service
//! process is killed (abort, no cleanup) at each step boundary of the create transaction, then
//! restarted; the retry with the same key must converge to exactly one operation with one hold.

use opledger_proto::v1::CreateWithdrawalRequest;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_testkit::{ChildService, free_port, wait_for_tcp};
use opledger_tests::{ALICE, Stack, authed, new_key, payload};
use std::net::SocketAddr;
use std::time::Duration;

async fn start_service(stack: &Stack, port: u16, failpoints: &str) -> anyhow::Result<ChildService> {
    let child = ChildService::spawn(
        "opledger-operations",
        &[
            (
                "OPLEDGER_OPERATIONS_DATABASE_URL",
                stack.url(opledger_testkit::ServiceRole::Operations),
            ),
            ("OPLEDGER_OPERATIONS_LISTEN", format!("127.0.0.1:{port}")),
            (
                "OPLEDGER_OPERATIONS_METRICS_LISTEN",
                "127.0.0.1:0".to_owned(),
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

async fn kill_at(failpoint: &str, committed: bool) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let port = free_port();
    let mut child = start_service(&stack, port, &format!("{failpoint}=abort")).await?;
    let key = new_key();
    let request = CreateWithdrawalRequest {
        idempotency_key: key.clone(),
        payload: Some(payload("100", ALICE)),
    };
    let mut client = OperationsServiceClient::connect(format!("http://127.0.0.1:{port}")).await?;
    let outcome = client
        .create_withdrawal(authed(&acme.client, request.clone()))
        .await;
    assert!(
        outcome.is_err(),
        "the service replied instead of dying at {failpoint}: its binary was built without the \
         `failpoints` feature (build it with `cargo build --workspace --bins`, as scripts/test.sh does)"
    );
    let status = child.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| !s.success()),
        "the process was killed at {failpoint}"
    );

    // After the crash: either nothing (rolled back) or the operation with its hold; never one
    // without the other.
    let (ops, holds) = (
        stack.count("withdrawal_ops", acme.id).await?,
        stack.count("ledger_holds", acme.id).await?,
    );
    let expected = if committed { 1 } else { 0 };
    assert_eq!((ops, holds), (expected, expected), "killed at {failpoint}");
    assert_eq!(
        stack.count("operation_transitions", acme.id).await?,
        expected
    );
    stack.assert_invariants().await?;

    // Restart without the failpoint; the client retries with the same key.
    let mut child = start_service(&stack, port, "").await?;
    let mut client = OperationsServiceClient::connect(format!("http://127.0.0.1:{port}")).await?;
    let retried = client
        .create_withdrawal(authed(&acme.client, request))
        .await?
        .into_inner();
    assert_eq!(retried.replayed, committed);
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 1);
    assert_eq!(stack.count("ledger_holds", acme.id).await?, 1);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    stack.assert_invariants().await?;

    // The service's own log never carried the key or the destination in clear.
    let log = child.log_tail(10_000);
    assert!(
        !log.contains(&key) && !log.contains(ALICE),
        "sensitive identifiers in the log"
    );
    child.kill();
    Ok(())
}

#[tokio::test]
async fn control_05_kill_between_operation_insert_and_hold_leaves_no_orphans() -> anyhow::Result<()>
{
    kill_at("create.after_operation_insert", false).await
}

#[tokio::test]
async fn control_05_kill_after_hold_before_commit_leaves_no_orphans() -> anyhow::Result<()> {
    kill_at("create.after_hold", false).await
}

#[tokio::test]
async fn control_05_kill_after_commit_before_reply_is_a_replay() -> anyhow::Result<()> {
    kill_at("create.after_commit", true).await
}
