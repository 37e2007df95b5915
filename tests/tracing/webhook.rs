//! Every webhook is traced: the ingress's request span continues the sender's `traceparent`, and
//! the processor's step on the stored item is a span of its own, linked to the withdrawal's trace
//! when the item is about one; neither carries the signing secret, the signature or the body's
//! values.

use crate::collector::harness;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opledger_tests::inbox::{ALL_TYPES, World, deposit, event_id, kyt};
use opledger_webhook::verify::sign_v1;

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_traced_from_ingress_to_processor() -> anyhow::Result<()> {
    let harness = harness()?;
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    // Inbox ids start at 1 in every test's database, and the span collector is shared by the
    // tests of one process (`cargo test`): a random first id keeps this item's spans apart from
    // another test's item 1.
    let first = 1_000_000 + i64::from_str_radix(&random_hex(6), 16)?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE inbox_events ALTER COLUMN inbox_id RESTART WITH {first}"
    )))
    .execute(world.stack.admin.pool())
    .await?;
    let (trace_id, sender_span) = (random_hex(16), random_hex(8));
    let deposit_id = format!("0xdep{}", random_hex(12));
    let body = deposit(&deposit_id, "treasury", "ETH", "777");
    let (id, now) = (event_id(), chrono::Utc::now().timestamp());
    let signature = sign_v1(&world.ep.secret, &id, now, body.as_bytes());
    let (status, _) = world
        .sender
        .send_raw(
            &world.sender.url(&world.ep),
            &[
                ("webhook-id", id.clone()),
                ("webhook-timestamp", now.to_string()),
                ("webhook-signature", signature.clone()),
                ("traceparent", format!("00-{trace_id}-{sender_span}-01")),
            ],
            body.into_bytes(),
        )
        .await?;
    assert_eq!(status, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    // The processor's step is the deposit's proposal (the witness credits, issue 25).
    assert_eq!(world.outcomes().await?, ["DONE:CREDIT_PROPOSED"]);
    let (inbox_id,): (i64,) =
        sqlx::query_as("SELECT inbox_id FROM inbox_work WHERE tenant_id = $1")
            .bind(world.acme.id.as_uuid())
            .fetch_one(world.stack.admin.pool())
            .await?;

    harness.flush().await;
    let spans = harness.received.spans();
    let received: Vec<_> = spans
        .iter()
        .filter(|s| s.trace_id == trace_id && s.name == "POST /webhooks/{source}/{endpoint_id}")
        .collect();
    assert_eq!(received.len(), 1, "one ingress span in the sender's trace");
    let ingress = received[0];
    assert_eq!(ingress.parent, sender_span);
    assert_eq!(ingress.kind, SpanKind::Server);
    assert_eq!(ingress.attr("opledger.service"), "inbox");
    assert_eq!(ingress.attr("http.response.status_code"), "200");
    let processed: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "inbox.process" && s.attr("inbox_id") == inbox_id.to_string())
        .collect();
    assert_eq!(processed.len(), 1, "one processor step for the item");
    assert_eq!(processed[0].attr("opledger.service"), "inbox");

    let exported = harness.received.everything().to_lowercase();
    let secret = world.ep.secret.to_whsec_string();
    for value in [
        secret.as_str(),
        secret.trim_start_matches("whsec_"),
        signature.as_str(),
        signature.trim_start_matches("v1,"),
        deposit_id.as_str(),
        world.ep.id.as_str(),
    ] {
        assert!(
            !exported.contains(&value.to_lowercase()),
            "exported: {value}"
        );
    }
    world.stop().await
}

/// A webhook about a withdrawal is processed in a span of its own that links to the withdrawal's
/// trace (the context stored at its creation); the span records the operation id only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_about_a_withdrawal_links_its_processing_to_the_withdrawals_trace()
-> anyhow::Result<()> {
    let harness = harness()?;
    let world = World::start("screening", &["kyt.result"]).await?;
    world
        .stack
        .fund(&world.acme, "treasury", "ETH", "1000")
        .await?;
    let w = world
        .stack
        .withdraw(&world.acme, "100", opledger_tests::ALICE)
        .await?;
    let (stored,): (Option<String>,) =
        sqlx::query_as("SELECT trace_context FROM withdrawal_ops WHERE op_id = $1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(world.stack.admin.pool())
            .await?;
    let stored = stored.ok_or_else(|| anyhow::anyhow!("no trace context stored"))?;
    let parts: Vec<&str> = stored.split('-').collect();
    anyhow::ensure!(parts.len() == 4, "stored {stored}");
    let (withdrawal_trace, create_span) = (parts[1], parts[2]);
    let provider_ref = format!("case-{}", random_hex(6));
    assert_eq!(
        world
            .post(&kyt(&w.withdrawal_id, "pass", &provider_ref))
            .await?,
        200
    );
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    assert_eq!(world.outcomes().await?, ["DONE:RECORDED"]);

    harness.flush().await;
    let spans = harness.received.spans();
    let processed: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "inbox.process" && s.attr("op_id") == w.withdrawal_id)
        .collect();
    assert_eq!(processed.len(), 1, "one processor step for the item");
    let step = processed[0];
    assert_eq!(step.parent, "", "the processing keeps its own trace");
    assert_ne!(step.trace_id, withdrawal_trace);
    assert_eq!(
        step.links,
        [(withdrawal_trace.to_owned(), create_span.to_owned())],
        "linked to the withdrawal's trace"
    );
    let exported = harness.received.everything().to_lowercase();
    assert!(
        !exported.contains(&provider_ref.to_lowercase()),
        "provider_ref exported"
    );
    world.stop().await
}
