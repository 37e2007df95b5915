//! Control 8: a webhook is acknowledged only after the inbox row and its work item are committed,
//! and processing is idempotent. A real inbox process is killed (abort, no cleanup) right before
//! and right after the commit and inside the processor's transaction; the sender's retry after a
//! restart is processed exactly once. Duplicates end in one effect; a custodian's status update
//! that arrives before its withdrawal is signed waits, then is only a hint for the watcher. A
//! deposit's effect is its credit proposal (the witness alone credits, issue 25), recorded in
//! the processor's transaction that finishes the work item.

use crate::hints::{assert_nothing_settled, hinted, sign};
use opledger_testkit::{ChildService, free_port, wait_for_tcp};
use opledger_tests::inbox::{
    ALL_TYPES, Endpoint, Sender, World, body_keys, deposit, endpoint, event_id, eventually,
    pending, proposals, rows, transfer_status,
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
/// sender retry, and checks the deposit's work was done exactly once: one credit proposal for
/// its deposit id (pending until a witness attests it, issue 25), nothing credited by the inbox.
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
        rows(&stack, "credit_proposals", "", acme.id).await?,
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
    assert_eq!(proposals(&stack, acme.id, &ep.source, "0xdep-77").await?, 1);
    assert_eq!(rows(&stack, "credit_proposals", "", acme.id).await?, 1);
    assert_eq!(pending(&stack, acme.id, "treasury", "ETH").await?, 700);
    assert_eq!(rows(&stack, "ledger_credits", "", acme.id).await?, 0);
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
    assert_eq!(world.proposals("0xdep-10").await?, 1);
    assert_eq!(world.pending().await?, 10);
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_requests_total{outcome=\"duplicate\"}")
            .await?,
        9.0
    );
    world.stop().await
}

/// The hash the signer gives the first withdrawal of 100 to ALICE from the test hot wallet at
/// nonce 0, found by a rehearsal on a database of its own: signing is deterministic (same
/// payload, nonce, fees and key: same bytes), so a provider can name it before we sign.
async fn rehearsed_tx_hash() -> anyhow::Result<String> {
    let stack = Stack::start().await?;
    let tenant = stack.tenant("rehearsal").await?;
    stack.fund(&tenant, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&tenant, "100", ALICE).await?;
    approve(&stack, &tenant, &w).await?;
    let signer = InProcessSigner::start(&stack.db, tenant.id).await?;
    let signed = client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(tenant.id, &w.withdrawal_id))
        .await?
        .into_inner();
    signed
        .attempt
        .map(|a| a.tx_hash)
        .ok_or_else(|| anyhow::anyhow!("no attempt"))
}

#[tokio::test]
async fn control_08_a_status_before_its_signature_is_parked_then_hinted_never_applied()
-> anyhow::Result<()> {
    let tx_hash = rehearsed_tx_hash().await?;
    let world = World::start("custodian", &["transfer.status"]).await?;
    let stack = &world.stack;
    stack.fund(&world.acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&world.acme, "100", ALICE).await?;
    approve(stack, &world.acme, &w).await?;
    let op = w.withdrawal_id.clone();

    // "confirmed" arrives while nothing is signed: stored and acknowledged, parked.
    let confirmed = transfer_status(&op, "confirmed", &tx_hash);
    assert_eq!(world.post(&confirmed).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'PARKED'", 1)
        .await?;
    assert_eq!(world.outcomes().await?, ["PARKED:AWAITING_SIGNATURE"]);
    assert_eq!(stack.state(&op).await?, "APPROVED");
    assert_eq!(hinted(&world).await?, Vec::<String>::new());

    // Signed: the operation moved, so the parked "confirmed" wakes and is a hint, nothing more.
    let signer = InProcessSigner::start(&stack.db, world.acme.id).await?;
    assert_eq!(
        sign(&world, &signer, &op).await?,
        tx_hash,
        "the rehearsal signed the same bytes"
    );
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    assert_eq!(world.outcomes().await?, ["DONE:HINTED"]);

    // "broadcast" after "confirmed": a hint too, and still one hint row.
    let broadcast = transfer_status(&op, "broadcast", &tx_hash);
    assert_eq!(world.post(&broadcast).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 2)
        .await?;
    assert_eq!(world.outcomes().await?, ["DONE:HINTED", "DONE:HINTED"]);
    assert_eq!(hinted(&world).await?, [op.as_str()]);
    assert_eq!(stack.state(&op).await?, "SIGNED");

    // A status naming a transaction that is not one of ours is a dead letter.
    let foreign = transfer_status(&op, "confirmed", &format!("0x{}", "ab".repeat(32)));
    assert_eq!(world.post(&foreign).await?, 200);
    world
        .wait_rows(
            "inbox_work",
            "AND status = 'DEAD' AND outcome = 'TX_HASH_MISMATCH'",
            1,
        )
        .await?;
    assert_eq!(hinted(&world).await?, [op.as_str()]);
    assert_eq!(stack.state(&op).await?, "SIGNED");
    assert_nothing_settled(&world).await?;
    world.stop().await
}
