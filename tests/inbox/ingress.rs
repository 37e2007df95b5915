//! The ingress: what is verified, what is refused, and what is stored for each refusal.

use opledger_store::inbox::NewSecret;
use opledger_tests::inbox::{ALL_TYPES, World, deposit, endpoint, event_id, ring, rows};
use opledger_webhook::secret::SigningSecret;
use std::time::Duration;

#[tokio::test]
async fn a_verified_new_event_is_recorded_with_its_work_item_then_answered_200()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (ep, sender) = (&world.ep, &world.sender);
    let (status, body) = sender
        .send(ep, &event_id(), &deposit("dep-1", "treasury", "ETH", "250"))
        .await?;
    assert_eq!(
        (status, body.contains("\"accepted\"")),
        (200, true),
        "{body}"
    );
    assert_eq!(world.rows("inbox_events", "AND kind = 'EVENT'").await?, 1);
    assert_eq!(world.rows("inbox_work", "").await?, 1);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    // Its work: the deposit proposed once, pending until a witness attests it.
    assert_eq!(world.outcomes().await?, ["DONE:CREDIT_PROPOSED"]);
    assert_eq!(world.proposals("dep-1").await?, 1);
    assert_eq!(world.pending().await?, 250);
    assert_eq!(world.treasury().await?, (0, 0));
    world.stack.assert_invariants().await?;
    world.stop().await
}

#[tokio::test]
async fn a_bad_signature_is_401_and_keeps_only_minimal_metadata() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, acme, ep, sender) = (&world.stack, &world.acme, &world.ep, &world.sender);
    let now = chrono::Utc::now().timestamp();
    let wrong = SigningSecret::generate();
    let body = deposit("dep-1", "treasury", "ETH", "250");
    let (status, text) = sender
        .send_signed(ep, &wrong, &event_id(), now, &body)
        .await?;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("no_valid_signature"), "{text}");
    assert_eq!(world.rows("inbox_events", "").await?, 0);
    let (reasons, prefixes): (Vec<String>, Vec<String>) = sqlx::query_as::<_, (String, String)>(
        "SELECT reason, endpoint_id_prefix FROM webhook_rejection_counts WHERE tenant_id = $1",
    )
    .bind(acme.id.as_uuid())
    .fetch_all(stack.admin.pool())
    .await?
    .into_iter()
    .unzip();
    assert_eq!(reasons, vec!["no_valid_signature".to_owned()]);
    assert_eq!(
        prefixes,
        vec![ep.id[..12].to_owned()],
        "only the public prefix is kept"
    );

    // One changed byte of a correctly signed body fails the same way.
    let id = event_id();
    let signature = opledger_webhook::verify::sign_v1(&ep.secret, &id, now, body.as_bytes());
    let tampered = body.replace("250", "950");
    let (status, _) = sender
        .send_raw(
            &sender.url(ep),
            &[
                ("webhook-id", id),
                ("webhook-timestamp", now.to_string()),
                ("webhook-signature", signature),
            ],
            tampered.into_bytes(),
        )
        .await?;
    assert_eq!(status, 401);
    assert_eq!(world.rows("inbox_events", "").await?, 0);
    world.stop().await
}

#[tokio::test]
async fn stale_and_future_timestamps_are_refused_within_300_seconds_accepted() -> anyhow::Result<()>
{
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (ep, sender) = (&world.ep, &world.sender);
    let now = chrono::Utc::now().timestamp();
    let body = deposit("dep-1", "treasury", "ETH", "5");
    let (stale, text) = sender
        .send_signed(ep, &ep.secret, &event_id(), now - 330, &body)
        .await?;
    assert_eq!(stale, 401);
    assert!(text.contains("timestamp_too_old"), "{text}");
    let (future, text) = sender
        .send_signed(ep, &ep.secret, &event_id(), now + 330, &body)
        .await?;
    assert_eq!(future, 401);
    assert!(text.contains("timestamp_too_new"), "{text}");
    assert_eq!(world.rows("inbox_events", "").await?, 0);
    let (late, _) = sender
        .send_signed(ep, &ep.secret, &event_id(), now - 270, &body)
        .await?;
    let (early, _) = sender
        .send_signed(
            ep,
            &ep.secret,
            &event_id(),
            now + 270,
            &deposit("dep-2", "treasury", "ETH", "5"),
        )
        .await?;
    assert_eq!((late, early), (200, 200));
    world.stop().await
}

#[tokio::test]
async fn a_secret_added_while_the_endpoint_is_cached_verifies_at_once() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, ep, sender) = (&world.stack, &world.ep, &world.sender);
    let body = |n: u32| deposit(&format!("dep-{n}"), "treasury", "ETH", "1");
    // The first request caches the endpoint with its one key (cache TTL in tests: 1 s).
    let now = chrono::Utc::now().timestamp();
    let (first, _) = sender
        .send_signed(ep, &ep.secret, &event_id(), now, &body(1))
        .await?;
    let new_secret = SigningSecret::generate();
    let sealed = ring()?.seal_secret(&ep.id, &new_secret).expect("sealed");
    stack
        .admin
        .add_webhook_secret(&ep.id, &NewSecret::Hmac(sealed))
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    // Well inside the cache TTL: the cached keys refuse the new signature, the ingress re-reads
    // the endpoint and the new secret verifies.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (new, _) = sender
        .send_signed(ep, &new_secret, &event_id(), now, &body(2))
        .await?;
    // A signature no key makes is still refused, and a burst of them is refused too.
    let mut forged = Vec::new();
    for n in 0..20 {
        let (status, _) = sender
            .send_signed(
                ep,
                &SigningSecret::generate(),
                &event_id(),
                now,
                &body(10 + n),
            )
            .await?;
        forged.push(status);
    }
    assert_eq!((first, new), (200, 200));
    assert!(forged.iter().all(|s| *s == 401), "{forged:?}");
    world.stop().await
}

#[tokio::test]
async fn rotated_secrets_both_verify_until_the_old_one_is_retired() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, ep, sender) = (&world.stack, &world.ep, &world.sender);
    let new_secret = SigningSecret::generate();
    let sealed = ring()?.seal_secret(&ep.id, &new_secret).expect("sealed");
    let new_id = stack
        .admin
        .add_webhook_secret(&ep.id, &NewSecret::Hmac(sealed))
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    assert!(new_id > 0);
    tokio::time::sleep(Duration::from_millis(1100)).await; // endpoint cache TTL in tests: 1 s
    let now = chrono::Utc::now().timestamp();
    let body = |n: u32| deposit(&format!("dep-{n}"), "treasury", "ETH", "1");
    let (old, _) = sender
        .send_signed(ep, &ep.secret, &event_id(), now, &body(1))
        .await?;
    let (new, _) = sender
        .send_signed(ep, &new_secret, &event_id(), now, &body(2))
        .await?;
    assert_eq!((old, new), (200, 200));

    // A header carrying both signatures (a sender mid-rotation) verifies too.
    let id = event_id();
    let both = format!(
        "{} {}",
        opledger_webhook::verify::sign_v1(&SigningSecret::generate(), &id, now, body(3).as_bytes()),
        opledger_webhook::verify::sign_v1(&new_secret, &id, now, body(3).as_bytes())
    );
    let (status, _) = sender
        .send_raw(
            &sender.url(ep),
            &[
                ("webhook-id", id),
                ("webhook-timestamp", now.to_string()),
                ("webhook-signature", both),
            ],
            body(3).into_bytes(),
        )
        .await?;
    assert_eq!(status, 200);

    let (first_id,): (i64,) =
        sqlx::query_as("SELECT min(secret_id) FROM webhook_secrets WHERE endpoint_id = $1")
            .bind(&ep.id)
            .fetch_one(stack.admin.pool())
            .await?;
    assert!(
        stack
            .admin
            .retire_webhook_secret(&ep.id, first_id)
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let now = chrono::Utc::now().timestamp();
    let (old, _) = sender
        .send_signed(ep, &ep.secret, &event_id(), now, &body(4))
        .await?;
    let (new, _) = sender
        .send_signed(ep, &new_secret, &event_id(), now, &body(5))
        .await?;
    assert_eq!(
        (old, new),
        (401, 200),
        "the retired secret no longer verifies"
    );
    assert_eq!(world.rows("inbox_events", "").await?, 4);
    world.stop().await
}

#[tokio::test]
async fn a_tenants_credential_on_another_tenants_endpoint_is_refused() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, acme_ep, sender) = (&world.stack, &world.ep, &world.sender);
    let globex = stack.tenant("globex").await?;
    let globex_ep = endpoint(stack, &globex, "chainwatch", &ALL_TYPES).await?;
    let now = chrono::Utc::now().timestamp();
    // Acme's secret, Globex's URL: the URL names the tenant, and its secrets do not match.
    let (status, _) = sender
        .send_signed(
            &globex_ep,
            &acme_ep.secret,
            &event_id(),
            now,
            &deposit("d", "treasury", "ETH", "7"),
        )
        .await?;
    assert_eq!(status, 401);
    assert_eq!(rows(stack, "inbox_events", "", globex.id).await?, 0);
    assert_eq!(world.rows("inbox_events", "").await?, 0);
    assert_eq!(
        rows(stack, "webhook_rejection_counts", "", globex.id).await?,
        1
    );
    world.stop().await
}

#[tokio::test]
async fn unknown_endpoints_missing_headers_bad_bodies_and_oversize_change_nothing()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (ep, sender) = (&world.ep, &world.sender);
    let now = chrono::Utc::now().timestamp();
    let body = deposit("dep-1", "treasury", "ETH", "1");

    // Unknown endpoint id, or a known id under another source.
    let mut ghost = ep.clone();
    ghost.id = format!("whe_{}", uuid::Uuid::new_v4().simple());
    let (status, _) = sender.send(&ghost, &event_id(), &body).await?;
    assert_eq!(status, 404);
    let mut other_source = ep.clone();
    other_source.source = "custodian".to_owned();
    let (status, _) = sender.send(&other_source, &event_id(), &body).await?;
    assert_eq!(status, 404);
    let (status, _) = sender
        .send_raw(
            &format!("http://{}/webhooks/..%2F/x", world.inbox.http),
            &[],
            body.clone().into_bytes(),
        )
        .await?;
    assert_eq!(status, 404);

    // Each signature header missing.
    let id = event_id();
    let signature = opledger_webhook::verify::sign_v1(&ep.secret, &id, now, body.as_bytes());
    let all = [
        ("webhook-id", id.clone()),
        ("webhook-timestamp", now.to_string()),
        ("webhook-signature", signature),
    ];
    for skip in 0..3 {
        let headers: Vec<(&str, String)> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != skip)
            .map(|(_, h)| h.clone())
            .collect();
        let (status, text) = sender
            .send_raw(&sender.url(ep), &headers, body.clone().into_bytes())
            .await?;
        assert_eq!(status, 400, "without {}: {text}", all[skip].0);
        assert!(text.contains("missing_header"), "{text}");
    }

    // A verified body that is not a JSON object.
    let (status, text) = sender.send(ep, &event_id(), "[1,2,3]").await?;
    assert_eq!(status, 400, "{text}");

    // Over the 256 KiB default limit.
    let huge = format!("{{\"type\":\"x\",\"pad\":\"{}\"}}", "a".repeat(300 * 1024));
    let (status, _) = sender.send(ep, &event_id(), &huge).await?;
    assert_eq!(status, 413);

    assert_eq!(world.rows("inbox_events", "").await?, 0);
    assert_eq!(world.rows("inbox_work", "").await?, 0);
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_requests_total{outcome=\"unknown_endpoint\"}")
            .await?,
        3.0
    );
    assert_eq!(
        world
            .inbox
            .metric("opledger_inbox_requests_total{outcome=\"bad_request\"}")
            .await?,
        4.0
    );
    world.stop().await
}

#[tokio::test]
async fn a_type_the_endpoint_may_not_send_is_stored_unhandled_and_never_applied()
-> anyhow::Result<()> {
    // A KYT vendor cannot credit deposits, nor even propose one.
    let world = World::start("screening", &["kyt.result"]).await?;
    let (stack, acme) = (&world.stack, &world.acme);
    let (status, text) = world
        .post_as(&event_id(), &deposit("dep-1", "treasury", "ETH", "1000"))
        .await?;
    assert_eq!(status, 200);
    assert!(text.contains("\"unhandled\""), "{text}");
    let (reason,): (String,) =
        sqlx::query_as("SELECT unhandled_reason FROM inbox_events WHERE tenant_id = $1")
            .bind(acme.id.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(reason, "type_not_allowed");
    assert_eq!(world.rows("inbox_work", "").await?, 0);
    assert_eq!(world.rows("credit_proposals", "").await?, 0);
    assert_eq!(world.rows("ledger_credits", "").await?, 0);
    world.stop().await
}

#[tokio::test]
async fn raw_bodies_are_encrypted_at_rest_and_bound_to_their_row() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, acme, ep, sender) = (&world.stack, &world.acme, &world.ep, &world.sender);
    let id = event_id();
    let body = deposit("dep-secret-4711", "treasury", "ETH", "31337");
    assert_eq!(sender.send(ep, &id, &body).await?.0, 200);
    let (key_id, nonce, ciphertext, hash): (i16, Vec<u8>, Vec<u8>, Vec<u8>) = sqlx::query_as(
        "SELECT body_key_id, body_nonce, body_ciphertext, body_hash FROM inbox_events \
         WHERE tenant_id = $1",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    let sealed = opledger_store::inbox::SealedBody {
        key_id,
        nonce,
        ciphertext,
    };
    assert!(
        !sealed
            .ciphertext
            .windows(15)
            .any(|w| w == b"dep-secret-4711"),
        "the body is not stored in clear"
    );
    use sha2::Digest;
    assert_eq!(hash, sha2::Sha256::digest(body.as_bytes()).to_vec());
    let ring = ring()?;
    let opened = ring
        .open_body(acme.id, "chainwatch", &id, &sealed)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    assert_eq!(opened.as_slice(), body.as_bytes());
    // The same ciphertext under another event id (a copied row) does not open.
    assert!(
        ring.open_body(acme.id, "chainwatch", "msg_other", &sealed)
            .is_err()
    );
    world.stop().await
}

#[tokio::test]
async fn a_failed_commit_is_503_and_the_retry_is_processed_once() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (stack, ep, sender) = (&world.stack, &world.ep, &world.sender);
    // The database refuses the inbox write (as a failing disk or a lost primary would).
    sqlx::query("REVOKE INSERT ON inbox_events FROM opledger_inbox")
        .execute(stack.admin.pool())
        .await?;
    let id = event_id();
    let body = deposit("dep-1", "treasury", "ETH", "40");
    let (status, text) = sender.send(ep, &id, &body).await?;
    assert_eq!(status, 503, "{text}");
    assert_eq!(world.rows("inbox_events", "").await?, 0);
    sqlx::query("GRANT INSERT ON inbox_events TO opledger_inbox")
        .execute(stack.admin.pool())
        .await?;
    let (status, _) = sender.send(ep, &id, &body).await?;
    assert_eq!(status, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    assert_eq!(world.proposals("dep-1").await?, 1);
    assert_eq!(world.pending().await?, 40);
    world.stop().await
}

#[tokio::test]
async fn a_flood_of_refused_requests_leaves_a_bounded_number_of_rows_and_full_counters()
-> anyhow::Result<()> {
    use futures::StreamExt as _;
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let (ep, sender) = (&world.ep, &world.sender);
    let now = chrono::Utc::now().timestamp();
    let body = deposit("dep-flood", "treasury", "ETH", "1");
    const EACH: usize = 1_000;
    // Bad signatures on the tenant's real endpoint, and requests to endpoints that do not exist
    // under sources the sender makes up (every one a new label and prefix).
    let answers: Vec<anyhow::Result<u16>> = futures::stream::iter(0..2 * EACH)
        .map(|n| {
            let body = body.clone();
            async move {
                if n % 2 == 0 {
                    let forged = SigningSecret::generate();
                    Ok(sender
                        .send_signed(ep, &forged, &event_id(), now, &body)
                        .await?
                        .0)
                } else {
                    let mut ghost = ep.clone();
                    ghost.id = format!("whe_{}", uuid::Uuid::new_v4().simple());
                    ghost.source = format!("probe-{n}");
                    Ok(sender.send(&ghost, &event_id(), &body).await?.0)
                }
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for answer in answers {
        *statuses.entry(answer?).or_default() += 1;
    }
    assert_eq!(statuses, [(401, EACH), (404, EACH)].into_iter().collect());

    // Every refusal is counted; the rows are bounded: per minute, one for the real endpoint and
    // at most 32 made-up (source, prefix) pairs plus `other` for the unknown ones.
    let (rows, total, minutes): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), COALESCE(sum(count), 0)::bigint, count(DISTINCT minute) \
         FROM webhook_rejection_counts",
    )
    .fetch_one(world.stack.admin.pool())
    .await?;
    assert_eq!(total, 2 * EACH as i64);
    assert!(
        rows <= minutes * (1 + 32 + 1),
        "rows={rows} minutes={minutes}"
    );
    let other: (i64,) = sqlx::query_as(
        "SELECT COALESCE(sum(count), 0)::bigint FROM webhook_rejection_counts \
         WHERE tenant_id = '00000000-0000-0000-0000-000000000000' \
           AND source = 'other' AND endpoint_id_prefix = 'other'",
    )
    .fetch_one(world.stack.admin.pool())
    .await?;
    assert!(other.0 >= EACH as i64 - 33 * minutes, "other={}", other.0);
    let inbox = &world.inbox;
    let bad = "opledger_inbox_requests_total{outcome=\"bad_signature\"}";
    let unknown = "opledger_inbox_requests_total{outcome=\"unknown_endpoint\"}";
    assert_eq!(inbox.metric(bad).await?, EACH as f64);
    assert_eq!(inbox.metric(unknown).await?, EACH as f64);

    // A genuine delivery is still accepted after the flood.
    assert_eq!(world.post(&body).await?, 200);
    world.stop().await
}
