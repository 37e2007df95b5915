//! Control 8: a webhook is acknowledged only after the inbox row and its work item are committed,
//! and processing is idempotent. A real inbox process is killed (abort, no cleanup) right before
//! and right after the commit and inside the processor's transaction; the sender's retry after a
//! restart is processed exactly once. Duplicates and reordered deliveries end in the right state.

use opledger_testkit::{ChildService, free_port, wait_for_tcp};
use opledger_tests::inbox::{
    ALL_TYPES, Endpoint, Inbox, Sender, World, body_keys, deposit, endpoint, event_id, eventually,
    rows, transfer_status,
};
use opledger_tests::signer::{InProcessSigner, approve, client, sign_request};
use opledger_tests::{ALICE, Stack};
use std::net::SocketAddr;
use std::time::Duration;

struct Ports {
    http: u16,
    grpc: u16,
    metrics: u16,
}

async fn start_inbox(
    stack: &Stack,
    ports: &Ports,
    failpoints: &str,
) -> anyhow::Result<ChildService> {
    let child = ChildService::spawn(
        "opledger-inbox",
        &[
            (
                "OPLEDGER_INBOX_DATABASE_URL",
                stack.url(opledger_testkit::ServiceRole::Inbox),
            ),
            ("OPLEDGER_INBOX_LISTEN", format!("127.0.0.1:{}", ports.grpc)),
            (
                "OPLEDGER_INBOX_HTTP_LISTEN",
                format!("127.0.0.1:{}", ports.http),
            ),
            (
                "OPLEDGER_INBOX_METRICS_LISTEN",
                format!("127.0.0.1:{}", ports.metrics),
            ),
            ("OPLEDGER_INBOX_BODY_KEYS", body_keys()),
            ("OPLEDGER_INBOX_POLL_INTERVAL_MS", "20".to_owned()),
            ("OPLEDGER_FAILPOINTS", failpoints.to_owned()),
            ("RUST_LOG", "info".to_owned()),
        ],
    )?;
    wait_for_tcp(
        SocketAddr::from(([127, 0, 0, 1], ports.http)),
        Duration::from_secs(20),
    )
    .await?;
    Ok(child)
}

/// Sends one deposit to a real inbox process that dies at `failpoint`, restarts it, lets the
/// sender retry, and checks the deposit was credited exactly once.
async fn killed_at(failpoint: &str, ingress_dies: bool, committed: bool) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let ep: Endpoint = endpoint(&stack, &acme, "chainwatch", &ALL_TYPES).await?;
    let ports = Ports {
        http: free_port(),
        grpc: free_port(),
        metrics: free_port(),
    };
    let mut child = start_inbox(&stack, &ports, &format!("{failpoint}=abort")).await?;
    let sender = Sender::new(SocketAddr::from(([127, 0, 0, 1], ports.http)));
    let id = event_id();
    let body = deposit("0xdep-77", "treasury", "ETH", "700");
    let first = sender.send(&ep, &id, &body).await;
    if ingress_dies {
        assert!(
            first.is_err(),
            "the sender got an answer although the process died at {failpoint} (binary built \
             without the `failpoints` feature? build with `cargo build --workspace --bins`)"
        );
    } else {
        assert_eq!(
            first?.0, 200,
            "acknowledged after commit, before the processor ran"
        );
    }
    let status = child.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| !s.success()),
        "killed at {failpoint}"
    );
    let expected = i64::from(committed);
    assert_eq!(
        rows(&stack, "inbox_events", "", acme.id).await?,
        expected,
        "{failpoint}"
    );
    assert_eq!(
        rows(&stack, "inbox_work", "", acme.id).await?,
        expected,
        "row and work together"
    );
    assert_eq!(
        rows(&stack, "ledger_credits", "", acme.id).await?,
        0,
        "nothing applied yet"
    );

    // Restart; the sender retries (it never saw a 2xx, or retries anyway: at least once).
    let mut child = start_inbox(&stack, &ports, "").await?;
    let (status, text) = sender.send(&ep, &id, &body).await?;
    assert_eq!(status, 200);
    let expected_answer = if committed {
        "\"duplicate\""
    } else {
        "\"accepted\""
    };
    assert!(text.contains(expected_answer), "{failpoint}: {text}");
    eventually(Duration::from_secs(15), || async {
        Ok(rows(&stack, "inbox_work", "AND status = 'DONE'", acme.id).await? == 1)
    })
    .await?;
    assert_eq!(rows(&stack, "inbox_events", "", acme.id).await?, 1);
    assert_eq!(rows(&stack, "ledger_credits", "", acme.id).await?, 1);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 0));
    stack.assert_invariants().await?;
    let log = std::fs::read_to_string(child.log_path())?;
    assert!(
        !log.contains("0xdep-77") && !log.contains(&ep.id),
        "no identifiers in the log"
    );
    child.terminate()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_08_killed_before_commit_no_2xx_and_the_retry_is_processed_once()
-> anyhow::Result<()> {
    killed_at("webhook.before_commit", true, false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_08_killed_after_commit_before_2xx_the_retry_is_deduplicated_and_processed_once()
-> anyhow::Result<()> {
    killed_at("webhook.after_commit", true, true).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_08_processor_killed_before_its_commit_applies_the_event_once() -> anyhow::Result<()>
{
    killed_at("inbox.apply_before_commit", false, true).await
}

#[tokio::test]
async fn control_08_ten_deliveries_of_one_event_are_processed_once() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (ep, sender) = (&world.ep, &world.sender);
    let id = event_id();
    let body = deposit("0xdep-10", "treasury", "ETH", "10");
    let answers = futures::future::join_all((0..10).map(|_| sender.send(ep, &id, &body))).await;
    let mut accepted = 0;
    let mut duplicates = 0;
    for answer in answers {
        let (status, text) = answer?;
        assert_eq!(status, 200, "{text}");
        accepted += usize::from(text.contains("\"accepted\""));
        duplicates += usize::from(text.contains("\"duplicate\""));
    }
    assert_eq!((accepted, duplicates), (1, 9));
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    assert_eq!(world.rows("inbox_events", "").await?, 1);
    assert_eq!(world.rows("inbox_work", "").await?, 1);
    assert_eq!(world.treasury().await?, (10, 0));
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_requests_total{outcome=\"duplicate\"}")
            .await?,
        9.0
    );
    world.stop().await
}

#[tokio::test]
async fn control_08_confirmed_before_broadcast_is_parked_then_both_apply_in_order()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let signed = client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?
        .into_inner();
    let tx_hash = signed.attempt.map(|a| a.tx_hash).unwrap_or_default();
    assert_eq!(stack.state(&w.withdrawal_id).await?, "SIGNED");

    let inbox = Inbox::start(&stack).await?;
    let custodian = endpoint(&stack, &acme, "custodian", &["transfer.status"]).await?;
    let sender = Sender::new(inbox.http);
    // "confirmed" arrives first: stored and acknowledged, but SIGNED -> CONFIRMED is not a move
    // the state machine allows, so it is parked.
    let confirmed = transfer_status(&w.withdrawal_id, "confirmed", &tx_hash);
    assert_eq!(
        sender.send(&custodian, &event_id(), &confirmed).await?.0,
        200
    );
    eventually(Duration::from_secs(10), || async {
        Ok(rows(&stack, "inbox_work", "AND status = 'PARKED'", acme.id).await? == 1)
    })
    .await?;
    assert_eq!(stack.state(&w.withdrawal_id).await?, "SIGNED");
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));

    // "broadcast" arrives: applied; the operation moved, so the parked "confirmed" wakes and
    // applies too, settling the hold once.
    let broadcast = transfer_status(&w.withdrawal_id, "broadcast", &tx_hash);
    assert_eq!(
        sender.send(&custodian, &event_id(), &broadcast).await?.0,
        200
    );
    eventually(Duration::from_secs(10), || async {
        Ok(stack.state(&w.withdrawal_id).await? == "CONFIRMED"
            && rows(&stack, "inbox_work", "AND status = 'DONE'", acme.id).await? == 2)
    })
    .await?;
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 0));
    let (settled,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM ledger_holds WHERE tenant_id = $1 AND status = 'SETTLED'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(settled, 1);
    let moves: Vec<(String, String)> = sqlx::query_as(
        "SELECT to_state, actor FROM operation_transitions WHERE tenant_id = $1 ORDER BY version",
    )
    .bind(acme.id.as_uuid())
    .fetch_all(stack.admin.pool())
    .await?;
    let tail: Vec<(&str, &str)> = moves[moves.len() - 2..]
        .iter()
        .map(|(s, a)| (s.as_str(), a.as_str()))
        .collect();
    assert_eq!(
        tail,
        vec![
            ("BROADCAST", "webhook_processor"),
            ("CONFIRMED", "webhook_processor")
        ]
    );

    // A status naming a transaction that is not one of ours is never applied.
    let foreign = transfer_status(
        &w.withdrawal_id,
        "confirmed",
        &format!("0x{}", "ab".repeat(32)),
    );
    assert_eq!(sender.send(&custodian, &event_id(), &foreign).await?.0, 200);
    eventually(Duration::from_secs(10), || async {
        Ok(rows(
            &stack,
            "inbox_work",
            "AND status = 'DEAD' AND outcome = 'TX_HASH_MISMATCH'",
            acme.id,
        )
        .await?
            == 1)
    })
    .await?;
    stack.assert_invariants().await?;
    inbox.stop().await
}
