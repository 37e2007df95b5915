//! Fireblocks webhooks v2 from the double: JWS (RS512) verified against its key set.

use super::{Custody, fireblocks, hinted};
use serde_json::json;

/// Decodes unpadded base64url (the JWS protected header).
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut bits = 0_u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push(u8::try_from((bits >> count) & 0xff).ok()?);
        }
    }
    Some(out)
}

/// The JWS header's key id of the double's signature header for event `event`.
fn kid(event: &serde_json::Value) -> Option<String> {
    let headers = event["headers"].as_array()?;
    let value = headers.iter().find_map(|h| {
        (h[0]
            .as_str()?
            .eq_ignore_ascii_case("fireblocks-webhook-signature"))
        .then(|| h[1].as_str())
        .flatten()
    })?;
    let protected = value.split('.').next()?;
    let json = base64url(protected)?;
    let header: serde_json::Value = serde_json::from_slice(&json).ok()?;
    header["kid"].as_str().map(str::to_owned)
}

/// How many times the inbox fetched the double's key set.
async fn key_set_fetches(c: &Custody) -> anyhow::Result<usize> {
    Ok(c.sim
        .requests()
        .await?
        .iter()
        .filter(|r| r["path"] == "/.well-known/jwks.json")
        .count())
}

#[tokio::test]
async fn verified_status_events_wake_the_lookup_which_alone_decides() -> anyhow::Result<()> {
    let c = fireblocks(json!({"seed": 11, "rules": []}), 200).await?;
    let op = c.sent_and_followed().await?;
    // The events so far (created, pending authorization) were verified, recorded once each and
    // woke the withdrawal; the lookup that followed served them.
    let events = c.sim.webhooks_of(&op).await?.len();
    assert!(events >= 2, "{events} events");
    assert_eq!(c.rows("inbox_events", "").await?, i64::try_from(events)?);
    assert!(c.outcomes().await?.iter().all(|o| o == "DONE:WOKEN"));
    assert_eq!(hinted(&c.stack, &c.acme).await?, [op.as_str()]);
    // Followed an hour ago as far as the executor is concerned: passes do not look it up.
    let followed = c.sim.lookups_of(&op).await?;
    c.passes(5).await;
    assert_eq!(c.sim.lookups_of(&op).await?, followed, "looked up unwoken");
    assert_eq!(c.stack.state(&op).await?, "BROADCAST");

    // The double authorizes, signs, broadcasts and completes the transfer, telling the inbox at
    // each step: each verified event wakes the executor, whose own lookup settles it.
    c.authorize().await?;
    c.drive(&op, "CONFIRMED").await?;
    assert!(c.sim.lookups_of(&op).await? > followed);
    c.quiet(&op).await?;
    let events = c.sim.webhooks_of(&op).await?;
    assert_eq!(
        c.rows("inbox_events", "").await?,
        i64::try_from(events.len())?
    );
    let (on_endpoint,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM inbox_events WHERE endpoint_id = $1 AND source = 'fireblocks' \
         AND event_type = 'custodian.status' AND kind = 'EVENT'",
    )
    .bind(&c.endpoint)
    .fetch_one(c.stack.admin.pool())
    .await?;
    assert_eq!(on_endpoint, i64::try_from(events.len())?);
    for outcome in c.outcomes().await? {
        assert!(
            ["DONE:WOKEN", "DONE:NOT_FOLLOWED"].contains(&outcome.as_str()),
            "{outcome}"
        );
    }
    assert_eq!(c.sim.transfers_of(&op).await?.len(), 1, "paid once");
    let (hold,): (String,) =
        sqlx::query_as("SELECT status FROM ledger_holds WHERE op_id = $1::uuid")
            .bind(&op)
            .fetch_one(c.stack.admin.pool())
            .await?;
    assert_eq!(hold, "SETTLED");
    c.moved_by_the_executor_only(&op).await?;
    c.inbox.stop().await
}

#[tokio::test]
async fn forged_status_events_are_refused_and_wake_nothing() -> anyhow::Result<()> {
    // One refresh of the key set a minute at most: a forger's made-up key ids cannot make the
    // inbox hammer the provider's key server.
    let forged =
        |variant| json!({"seed": 12, "rules": [{"kind": "webhook_forged", "variant": variant}]});
    let c = fireblocks(forged("wrong_key"), 60_000).await?;
    let mut ops = Vec::new();
    for (variant, reason) in [
        ("wrong_key", "no_valid_signature"),
        ("unknown_kid", "unknown_key"),
    ] {
        c.sim.set_faults(&forged(variant)).await?;
        let op = c.sent_and_followed().await?;
        let followed = c.sim.lookups_of(&op).await?;
        c.authorize().await?;
        // The transfer completes at the double; every event about it is forged.
        c.quiet(&op).await?;
        let events = c.sim.webhooks_of(&op).await?;
        assert!(events.len() >= 4, "{} events", events.len());
        for event in &events {
            assert_eq!(event["forged"], true);
            for delivery in event["deliveries"].as_array().into_iter().flatten() {
                assert_eq!(delivery["status"], 401, "{variant}");
            }
        }
        assert!(c.rejections(reason).await? >= i64::try_from(events.len())?);
        // Nothing recorded, nothing woken: the executor still waits for its hour.
        c.passes(5).await;
        assert_eq!(
            c.sim.lookups_of(&op).await?,
            followed,
            "{variant} woke a lookup"
        );
        assert_eq!(c.stack.state(&op).await?, "BROADCAST");
        ops.push(op);
    }
    assert_eq!(c.rows("inbox_events", "").await?, 0);
    assert_eq!(c.rows("inbox_work", "").await?, 0);
    assert!(hinted(&c.stack, &c.acme).await?.is_empty());
    // The first forged signature fetched the key set; the unknown key ids asked for a refresh
    // within the minute and got none.
    assert_eq!(key_set_fetches(&c).await?, 1);
    for op in &ops {
        c.moved_by_the_executor_only(op).await?;
    }
    c.inbox.stop().await
}

#[tokio::test]
async fn replayed_duplicated_and_reordered_events_are_recorded_once_and_move_nothing()
-> anyhow::Result<()> {
    let faults = json!({"seed": 13, "rules": [
        {"kind": "webhook_duplicate"},
        {"kind": "webhook_reorder"},
        {"kind": "webhook_replay", "after_secs": 5}
    ]});
    let c = fireblocks(faults, 200).await?;
    let op = c.sent_and_followed().await?;
    c.authorize().await?;
    c.drive(&op, "CONFIRMED").await?;
    // The replay of the first event comes 5 s (double's clock) after the last one was made: the
    // executor may confirm from the chain before the double completes, so the terminal event is
    // awaited first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !c.sim.webhooks_of(&op).await?.iter().any(|e| {
        e["body"]
            .as_str()
            .is_some_and(|b| b.contains("\"COMPLETED\""))
    }) {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the double never completed the transfer"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    c.sim.post("clock", &json!({"advance_secs": 10})).await?;
    c.quiet(&op).await?;
    // And one more replay, of the last event, on demand.
    let events = c.sim.webhooks_of(&op).await?;
    let last = events
        .last()
        .and_then(|e| e["event_id"].as_str())
        .ok_or_else(|| anyhow::anyhow!("no event"))?
        .to_owned();
    c.sim
        .post("webhooks/replay", &json!({"event_id": last}))
        .await?;
    c.quiet(&op).await?;

    let events = c.sim.webhooks_of(&op).await?;
    let deliveries: Vec<&serde_json::Value> = events
        .iter()
        .flat_map(|e| e["deliveries"].as_array().into_iter().flatten())
        .collect();
    let replays = deliveries.iter().filter(|d| d["replay"] == true).count();
    assert_eq!(replays, 2, "the scheduled replay and the one asked for");
    assert!(deliveries.len() >= 2 * events.len() + replays);
    assert!(
        deliveries.iter().all(|d| d["status"] == 200),
        "{deliveries:?}"
    );
    // One row per event id, whatever the number of deliveries; nothing quarantined.
    assert_eq!(
        c.rows("inbox_events", "").await?,
        i64::try_from(events.len())?
    );
    assert_eq!(c.rows("inbox_quarantine", "").await?, 0);
    let duplicates = c
        .inbox
        .metric("opledger_inbox_requests_total{outcome=\"duplicate\"}")
        .await?;
    assert!(duplicates >= f64::from(u32::try_from(events.len() + replays)?));
    // Late and replayed events found the withdrawal settled: nothing to wake, nothing moved.
    assert_eq!(c.stack.state(&op).await?, "CONFIRMED");
    for outcome in c.outcomes().await? {
        assert!(
            ["DONE:WOKEN", "DONE:NOT_FOLLOWED"].contains(&outcome.as_str()),
            "{outcome}"
        );
    }
    assert_eq!(c.sim.transfers_of(&op).await?.len(), 1, "paid once");
    c.moved_by_the_executor_only(&op).await?;
    c.inbox.stop().await
}

#[tokio::test]
async fn a_rotated_webhook_key_is_fetched_on_its_first_signature() -> anyhow::Result<()> {
    let c = fireblocks(json!({"seed": 14, "rules": []}), 200).await?;
    let op = c.sent_and_followed().await?;
    let before = c.sim.webhooks_of(&op).await?;
    let first_kid = before.first().and_then(kid);
    assert_eq!(key_set_fetches(&c).await?, 1);

    let rotated = c.sim.post("webhook-keys/rotate", &json!({})).await?;
    let new_kid = rotated["kid"].as_str().map(str::to_owned);
    assert!(new_kid.is_some() && new_kid != first_kid);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    c.authorize().await?;
    c.drive(&op, "CONFIRMED").await?;
    c.quiet(&op).await?;

    // Every later event is signed under the new key id, unknown to the cached set: the first
    // one fetched the set again and verified; none was refused.
    let events = c.sim.webhooks_of(&op).await?;
    let later: Vec<_> = events.iter().skip(before.len()).collect();
    assert!(!later.is_empty());
    assert!(later.iter().all(|e| kid(e) == new_kid));
    assert!(
        events
            .iter()
            .flat_map(|e| e["deliveries"].as_array().into_iter().flatten())
            .all(|d| d["status"] == 200)
    );
    assert_eq!(
        c.rows("inbox_events", "").await?,
        i64::try_from(events.len())?
    );
    assert_eq!(c.rejections("unknown_key").await?, 0);
    assert_eq!(key_set_fetches(&c).await?, 2);
    c.moved_by_the_executor_only(&op).await?;
    c.inbox.stop().await
}
