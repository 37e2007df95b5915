//! Group commit of deliveries: deliveries that arrive together are committed together, and each
//! is still classified and acknowledged exactly as on its own (new, duplicate, quarantined,
//! unhandled), with one work item per new event and one credit proposal per deposit.

use chrono::Utc;
use opledger_store::inbox::{Delivery, DeliveryClass, Recorded, SealedBody};
use opledger_tests::inbox::{ALL_TYPES, World, deposit, event_id};
use std::collections::BTreeMap;

#[tokio::test]
async fn a_burst_of_mixed_deliveries_is_committed_together_and_each_answered_as_on_its_own()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let mut burst: Vec<(String, String)> = Vec::new();
    // 48 new deposits of 1..=48 wei.
    for i in 1..=48 {
        let body = deposit(&format!("dep-{i}"), "treasury", "ETH", &i.to_string());
        burst.push((event_id(), body));
    }
    // One event delivered eight times.
    let repeated = (event_id(), deposit("dep-x", "treasury", "ETH", "1000"));
    burst.extend(std::iter::repeat_n(repeated, 8));
    // One event id with two different bodies (same deposit and amount, different timestamp).
    let twice = event_id();
    let second = deposit("dep-y", "treasury", "ETH", "2000").replace("2026-12-01", "2026-12-02");
    burst.push((twice.clone(), deposit("dep-y", "treasury", "ETH", "2000")));
    burst.push((twice, second));
    // Four events of a type nobody knows.
    for i in 0..4 {
        let body = serde_json::json!({"type": "payout.unknown", "data": {"n": i}}).to_string();
        burst.push((event_id(), body));
    }

    let sends = burst.iter().map(|(id, body)| world.post_as(id, body));
    let mut outcomes = BTreeMap::new();
    for answer in futures::future::join_all(sends).await {
        let (status, text) = answer?;
        assert_eq!(status, 200, "{text}");
        let outcome = ["accepted", "duplicate", "quarantined", "unhandled"]
            .into_iter()
            .find(|o| text.contains(&format!("\"status\":\"{o}\"")))
            .unwrap_or("other");
        *outcomes.entry(outcome).or_insert(0) += 1;
    }
    let expected = BTreeMap::from([
        ("accepted", 50),
        ("duplicate", 7),
        ("quarantined", 1),
        ("unhandled", 4),
    ]);
    assert_eq!(outcomes, expected);
    assert_eq!(world.rows("inbox_events", "").await?, 54);
    assert_eq!(world.rows("inbox_work", "").await?, 50);
    assert_eq!(world.rows("inbox_quarantine", "").await?, 1);
    // now() is the statement's transaction start: rows sharing it were committed together.
    let (commits,): (i64,) =
        sqlx::query_as("SELECT count(DISTINCT received_at) FROM inbox_events WHERE tenant_id = $1")
            .bind(world.acme.id.as_uuid())
            .fetch_one(world.stack.admin.pool())
            .await?;
    assert!(
        commits < 54,
        "54 deliveries in {commits} commits: none shared"
    );

    // Every new deposit is proposed once (pending until a witness attests it): 1 + ... + 48,
    // plus 1000 and 2000; the repeated and the quarantined deliveries proposed nothing more.
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 50)
        .await?;
    assert_eq!(world.rows("credit_proposals", "").await?, 50);
    for id in ["dep-1", "dep-48", "dep-x", "dep-y"] {
        assert_eq!(world.proposals(id).await?, 1, "{id}");
    }
    let proposed: u128 = (1..=48).sum::<u128>() + 3000;
    assert_eq!(world.pending().await?, proposed);
    assert_eq!(world.treasury().await?, (0, 0));
    assert_eq!(world.rows("ledger_credits", "").await?, 0);
    world.stack.assert_invariants().await?;
    world.stop().await
}

#[tokio::test]
async fn one_call_classifies_new_repeated_and_conflicting_deliveries_like_single_ones()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let store = &world.stack.admin;
    let endpoint = store
        .webhook_endpoint(&world.ep.id)
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?
        .expect("endpoint");
    let sealed = SealedBody {
        key_id: 1,
        nonce: vec![7; 24],
        ciphertext: vec![1, 2, 3],
    };
    let delivery = |event_id: &'static str, hash: u8, class| Delivery {
        endpoint: &endpoint,
        event_id,
        body_hash: [hash; 32],
        sent_at: Utc::now(),
        body: &sealed,
        class,
        signature: None,
    };
    let event = DeliveryClass::Event {
        event_type: "deposit.confirmed",
        op_id: None,
    };
    let unknown = DeliveryClass::Unhandled {
        event_type: Some("payout.unknown"),
        reason: "unknown_type",
    };
    // C was recorded before, on its own.
    let earlier = store.record_delivery(&delivery("evt-c", 3, event)).await?;
    assert!(matches!(earlier, Recorded::Accepted { .. }));
    let recorded = store
        .record_deliveries(&[
            delivery("evt-a", 1, event),
            delivery("evt-b", 2, unknown),
            delivery("evt-a", 1, event),
            delivery("evt-a", 9, event),
            delivery("evt-c", 3, event),
            delivery("evt-c", 8, event),
        ])
        .await?;
    let kinds: Vec<&str> = recorded
        .iter()
        .map(|r| match r {
            Recorded::Accepted { .. } => "accepted",
            Recorded::Unhandled { .. } => "unhandled",
            Recorded::Duplicate { .. } => "duplicate",
            Recorded::Quarantined {
                first_time: true, ..
            } => "quarantined",
            Recorded::Quarantined { .. } => "quarantined again",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "accepted",
            "unhandled",
            "duplicate",
            "quarantined",
            "duplicate",
            "quarantined"
        ]
    );
    // The repeats name the row of their first delivery.
    let id = |r: &Recorded| match *r {
        Recorded::Accepted { inbox_id }
        | Recorded::Unhandled { inbox_id }
        | Recorded::Duplicate { inbox_id }
        | Recorded::Quarantined { inbox_id, .. } => inbox_id,
    };
    assert_eq!(id(&recorded[0]), id(&recorded[2]));
    assert_eq!(id(&recorded[0]), id(&recorded[3]));
    assert_eq!(id(&earlier), id(&recorded[4]));
    assert_eq!(id(&earlier), id(&recorded[5]));
    assert_eq!(world.rows("inbox_events", "").await?, 3);
    assert_eq!(world.rows("inbox_work", "").await?, 2, "A and C, not B");
    assert_eq!(world.rows("inbox_quarantine", "").await?, 2);

    // The same call again changes nothing: every delivery is now a repeat.
    let again = store
        .record_deliveries(&[
            delivery("evt-a", 1, event),
            delivery("evt-b", 2, unknown),
            delivery("evt-a", 9, event),
        ])
        .await?;
    assert!(matches!(again[0], Recorded::Duplicate { .. }));
    assert!(matches!(again[1], Recorded::Duplicate { .. }));
    assert!(matches!(
        again[2],
        Recorded::Quarantined {
            first_time: false,
            ..
        }
    ));
    assert_eq!(world.rows("inbox_events", "").await?, 3);
    assert_eq!(world.rows("inbox_work", "").await?, 2);
    assert_eq!(world.rows("inbox_quarantine", "").await?, 2);
    world.stop().await
}
