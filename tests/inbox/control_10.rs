//! Control 10: uncertain input is stored and quarantined, never guessed. An unknown event type and
//! an unexpected schema are stored UNHANDLED; the same event id with a different body is
//! quarantined; neither is ever applied, and the alert metrics move.

use opledger_tests::inbox::{ALL_TYPES, World, deposit, event_id, rows};
use std::time::Duration;

#[tokio::test]
async fn control_10_unknown_type_and_bad_schema_are_stored_unhandled_never_applied_and_alert()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, acme, ep, sender) = (&world.stack, &world.acme, &world.ep, &world.sender);
    let unknown = r#"{"type":"deposit.reversed","data":{"deposit_id":"d1","amount":"500"}}"#;
    let (status, text) = sender.send(ep, &event_id(), unknown).await?;
    assert_eq!(status, 200);
    assert!(text.contains("\"unhandled\""), "{text}");
    // A known type whose amount is not a positive integer: never mapped to something "close".
    let bad_schema = deposit("d2", "treasury", "ETH", "-500");
    let (status, text) = sender.send(ep, &event_id(), &bad_schema).await?;
    assert_eq!(status, 200);
    assert!(text.contains("\"unhandled\""), "{text}");

    let reasons: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT unhandled_reason, event_type FROM inbox_events WHERE tenant_id = $1 \
         AND kind = 'UNHANDLED' ORDER BY inbox_id",
    )
    .bind(acme.id.as_uuid())
    .fetch_all(stack.admin.pool())
    .await?;
    assert_eq!(
        reasons,
        vec![
            (
                "unknown_type".to_owned(),
                Some("deposit.reversed".to_owned())
            ),
            ("schema".to_owned(), Some("deposit.confirmed".to_owned())),
        ]
    );
    assert_eq!(
        rows(
            stack,
            "inbox_events",
            "AND body_ciphertext IS NOT NULL",
            acme.id
        )
        .await?,
        2,
        "raw bodies stored"
    );
    assert_eq!(
        world.rows("inbox_work", "").await?,
        0,
        "no work: never applied"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Not even proposed: nothing a witness could ever credit.
    assert_eq!(world.rows("credit_proposals", "").await?, 0);
    assert_eq!(world.rows("ledger_credits", "").await?, 0);
    assert_eq!(
        world.inbox.metric("opledger_inbox_open_unhandled").await?,
        2.0
    );
    assert_eq!(
        world.inbox.metric("opledger_inbox_unhandled_total").await?,
        2.0
    );
    assert!(
        world
            .inbox
            .metric("opledger_inbox_oldest_unresolved_seconds")
            .await?
            >= 0.0
    );
    world.stop().await
}

#[tokio::test]
async fn control_10_same_event_id_with_a_different_body_is_quarantined_never_applied_and_alerts()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (ep, sender) = (&world.ep, &world.sender);
    let id = event_id();
    let original = deposit("0xdep-1", "treasury", "ETH", "100");
    let altered = deposit("0xdep-1", "treasury", "ETH", "100000");
    assert_eq!(sender.send(ep, &id, &original).await?.0, 200);
    let (status, text) = sender.send(ep, &id, &altered).await?;
    assert_eq!(
        status, 200,
        "acknowledged once the quarantine record is committed"
    );
    assert!(text.contains("\"quarantined\""), "{text}");
    // The same altered body again adds no second quarantine row.
    let (status, text) = sender.send(ep, &id, &altered).await?;
    assert_eq!(status, 200);
    assert!(text.contains("\"quarantined\""), "{text}");

    opledger_tests::inbox::eventually(Duration::from_secs(10), || async {
        Ok(world.rows("inbox_work", "AND status = 'DONE'").await? == 1)
    })
    .await?;
    assert_eq!(world.rows("inbox_quarantine", "").await?, 1);
    assert_eq!(world.rows("inbox_events", "").await?, 1);
    assert_eq!(
        world.rows("inbox_work", "").await?,
        1,
        "only the original has work"
    );
    // The original is proposed once (pending until a witness attests it); the altered amount
    // is never proposed.
    assert_eq!(world.proposals("0xdep-1").await?, 1);
    let (amount,): (String,) = sqlx::query_as(
        "SELECT amount::text FROM credit_proposals WHERE tenant_id = $1 AND credit_id = $2",
    )
    .bind(world.acme.id.as_uuid())
    .bind(world.deposit_credit_id("0xdep-1").as_slice())
    .fetch_one(world.stack.admin.pool())
    .await?;
    assert_eq!(amount, "100", "the altered amount is never applied");
    assert_eq!(world.pending().await?, 100);
    assert_eq!(world.rows("ledger_credits", "").await?, 0);
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_open_quarantines")
            .await?,
        1.0
    );
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_quarantined_total")
            .await?,
        2.0
    );
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_requests_total{outcome=\"quarantined\"}")
            .await?,
        2.0
    );
    world.stop().await
}
