//! Webhooks of the three profiles, checked by an independent implementation (the `rsa` crate
//! against the JWKS, `hmac`), and fault 6: late, duplicated, reordered, forged, replayed, key
//! rotation with overlap, retries.

mod common;

use common::webhook::{Inbox, Received, bitgo_signed, prime_signed, verify_fireblocks};
use common::*;
use serde_json::{Value, json};

const FB_FLOW: [&str; 7] = [
    "SUBMITTED",
    "PENDING_AUTHORIZATION",
    "QUEUED",
    "PENDING_SIGNATURE",
    "BROADCASTING",
    "CONFIRMING",
    "COMPLETED",
];

async fn fireblocks_sim(rules: Value) -> anyhow::Result<(Sim, Inbox)> {
    let inbox = Inbox::start().await?;
    let url = inbox.url.clone();
    let sim = Sim::start(move |c| {
        c["fireblocks"]["webhook_url"] = json!(url);
        c["faults"]["rules"] = rules;
    })
    .await?;
    Ok((sim, inbox))
}

fn statuses(received: &[Received]) -> Vec<String> {
    received
        .iter()
        .map(|r| {
            r.json()["data"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn has_completed(received: &[Received]) -> bool {
    statuses(received).iter().any(|s| s == "COMPLETED")
}

#[tokio::test]
async fn fireblocks_events_are_signed_under_the_jwks() -> anyhow::Result<()> {
    let (sim, inbox) = fireblocks_sim(json!([])).await?;
    let (reference, to) = (reference(), fresh_address());
    let (_, created) = sim
        .fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    let created: Value = serde_json::from_str(&created)?;
    let received = inbox.wait(has_completed).await?;
    assert_eq!(statuses(&received), FB_FLOW);
    let jwks = sim.get("/.well-known/jwks.json").await?;
    assert_eq!(jwks["keys"].as_array().map(Vec::len), Some(1));
    assert_eq!(jwks["keys"][0]["alg"], "RS512");
    let mut ids = std::collections::HashSet::new();
    for (index, event) in received.iter().enumerate() {
        verify_fireblocks(
            &jwks,
            event.header("Fireblocks-Webhook-Signature"),
            &event.body,
        )?;
        let body = event.json();
        let kind = if index == 0 {
            "transaction.created"
        } else {
            "transaction.status.updated"
        };
        assert_eq!(body["eventType"], kind);
        assert_eq!(body["eventVersion"], 1);
        assert_eq!(body["workspaceId"], "ws-1");
        assert_eq!(body["resourceId"], created["id"]);
        assert_eq!(body["data"]["externalTxId"], reference.as_str());
        assert!(ids.insert(body["id"].as_str().unwrap_or_default().to_owned()));
    }
    let mut tampered = received[6].body.clone();
    tampered = tampered.replace("COMPLETED", "FAILED");
    assert!(
        verify_fireblocks(
            &jwks,
            received[6].header("Fireblocks-Webhook-Signature"),
            &tampered
        )
        .is_err()
    );
    Ok(())
}

/// Fault 6, key rotation: the old key stays listed for the overlap, then is dropped.
#[tokio::test]
async fn fireblocks_key_rotation_with_overlap() -> anyhow::Result<()> {
    let (sim, inbox) = fireblocks_sim(json!([])).await?;
    let (first, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&first, &to, AMOUNT_WHOLE), None)
        .await?;
    let before = inbox.wait(has_completed).await?;
    let old_jwks = sim.get("/.well-known/jwks.json").await?;
    let old_kid = verify_fireblocks(
        &old_jwks,
        before[0].header("Fireblocks-Webhook-Signature"),
        &before[0].body,
    )?;
    let (status, rotated) = sim
        .post_sim("/sim/webhook-keys/rotate", json!({"overlap_secs": 60}))
        .await?;
    assert_eq!(status, 200);
    assert_eq!(rotated["previous_kid"], old_kid.as_str());
    let second = reference();
    sim.fb_create(&fb_body(&second, &fresh_address(), AMOUNT_WHOLE), None)
        .await?;
    let all = inbox.wait(|r| r.len() == 14).await?;
    let jwks = sim.get("/.well-known/jwks.json").await?;
    assert_eq!(jwks["keys"].as_array().map(Vec::len), Some(2));
    let new_kid = verify_fireblocks(
        &jwks,
        all[13].header("Fireblocks-Webhook-Signature"),
        &all[13].body,
    )?;
    assert_eq!(new_kid, rotated["kid"].as_str().unwrap_or_default());
    assert_ne!(new_kid, old_kid);
    verify_fireblocks(
        &jwks,
        before[0].header("Fireblocks-Webhook-Signature"),
        &before[0].body,
    )?;
    sim.advance(61.0).await?;
    let jwks = sim.get("/.well-known/jwks.json").await?;
    assert_eq!(jwks["keys"].as_array().map(Vec::len), Some(1));
    assert_eq!(jwks["keys"][0]["kid"], new_kid.as_str());
    assert!(
        verify_fireblocks(
            &jwks,
            before[0].header("Fireblocks-Webhook-Signature"),
            &before[0].body
        )
        .is_err()
    );
    Ok(())
}

/// Fault 6, late: nothing arrives until the double's clock passes the delay.
#[tokio::test]
async fn webhooks_late() -> anyhow::Result<()> {
    let (sim, inbox) = fireblocks_sim(json!([{"kind": "webhook_delay", "secs": 300}])).await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    sim.wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(inbox.received().is_empty());
    sim.advance(301.0).await?;
    let received = inbox.wait(has_completed).await?;
    assert_eq!(statuses(&received), FB_FLOW);
    Ok(())
}

/// Fault 6, duplicated: each event twice, identical bytes and signature.
#[tokio::test]
async fn webhooks_duplicated() -> anyhow::Result<()> {
    let (sim, inbox) = fireblocks_sim(json!([{"kind": "webhook_duplicate"}])).await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    let received = inbox.wait(|r| r.len() == 14).await?;
    for pair in received.chunks(2) {
        assert_eq!(pair[0].body, pair[1].body);
        assert_eq!(
            pair[0].headers.get("fireblocks-webhook-signature"),
            pair[1].headers.get("fireblocks-webhook-signature")
        );
    }
    Ok(())
}

/// Fault 6, reordered: each later status is delivered before the one it follows.
#[tokio::test]
async fn webhooks_reordered() -> anyhow::Result<()> {
    let (sim, inbox) = fireblocks_sim(json!([{"kind": "webhook_reorder"}])).await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    let received = inbox.wait(|r| r.len() == 7).await?;
    assert_eq!(
        statuses(&received),
        [
            "PENDING_AUTHORIZATION",
            "SUBMITTED",
            "PENDING_SIGNATURE",
            "QUEUED",
            "CONFIRMING",
            "BROADCASTING",
            "COMPLETED"
        ]
    );
    Ok(())
}

/// Fault 6, forged: signed by a key the JWKS does not hold, under a listed kid or an unknown one.
#[tokio::test]
async fn webhooks_forged() -> anyhow::Result<()> {
    let (sim, inbox) = fireblocks_sim(json!([{"kind": "webhook_forged", "nth": 1}])).await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    let received = inbox.wait(has_completed).await?;
    let jwks = sim.get("/.well-known/jwks.json").await?;
    for event in &received {
        let verdict = verify_fireblocks(
            &jwks,
            event.header("Fireblocks-Webhook-Signature"),
            &event.body,
        );
        let error = verdict.expect_err("a forged signature verified");
        assert!(!error.to_string().contains("not in the JWKS"), "{error}");
    }
    sim.set_faults(
        1,
        json!([{"kind": "webhook_forged", "variant": "unknown_kid"}]),
    )
    .await?;
    let second = common::reference();
    sim.fb_create(&fb_body(&second, &fresh_address(), AMOUNT_WHOLE), None)
        .await?;
    let all = inbox.wait(|r| r.len() == 14).await?;
    let error = verify_fireblocks(
        &jwks,
        all[13].header("Fireblocks-Webhook-Signature"),
        &all[13].body,
    )
    .expect_err("forged");
    assert!(error.to_string().contains("not in the JWKS"), "{error}");
    let events = sim.get("/sim/webhooks").await?;
    assert!(
        events
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| e["forged"] == true)
    );
    Ok(())
}

/// Fault 6, replayed: the first event again, unchanged, after the terminal one; and
/// `POST /sim/webhooks/replay`.
#[tokio::test]
async fn webhooks_replayed() -> anyhow::Result<()> {
    let (sim, inbox) =
        fireblocks_sim(json!([{"kind": "webhook_replay", "after_secs": 120}])).await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    inbox.wait(|r| r.len() == 7).await?;
    sim.advance(121.0).await?;
    let received = inbox.wait(|r| r.len() == 8).await?;
    assert_eq!(received[7].body, received[0].body);
    assert_eq!(
        received[7].headers.get("fireblocks-webhook-signature"),
        received[0].headers.get("fireblocks-webhook-signature")
    );
    let event_id = received[3].json()["id"].clone();
    let (status, _) = sim
        .post_sim("/sim/webhooks/replay", json!({"event_id": event_id}))
        .await?;
    assert_eq!(status, 200);
    let received = inbox.wait(|r| r.len() == 9).await?;
    assert_eq!(received[8].body, received[3].body);
    let (status, _) = sim
        .post_sim("/sim/webhooks/replay", json!({"event_id": "nope"}))
        .await?;
    assert_eq!(status, 404);
    Ok(())
}

/// Deliveries answered non-2xx are retried with backoff.
#[tokio::test]
async fn webhooks_retried_on_errors() -> anyhow::Result<()> {
    let (sim, inbox) = fireblocks_sim(json!([])).await?;
    inbox.answer_next(&[500, 503]);
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    let received = inbox.wait(|r| r.len() == 9).await?;
    assert_eq!(received[0].body, received[1].body);
    assert_eq!(received[0].body, received[2].body);
    let events = sim.get("/sim/webhooks").await?;
    let statuses: Vec<Value> = events[0]["deliveries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| d["status"].clone())
        .collect();
    assert_eq!(statuses, [json!(500), json!(503), json!(200)]);
    Ok(())
}

#[tokio::test]
async fn bitgo_and_prime_webhooks_carry_their_hmacs() -> anyhow::Result<()> {
    let bitgo_inbox = Inbox::start().await?;
    let prime_inbox = Inbox::start().await?;
    let (bitgo_url, prime_url) = (bitgo_inbox.url.clone(), prime_inbox.url.clone());
    let sim = Sim::start(move |c| {
        c["bitgo"]["webhook_url"] = json!(bitgo_url);
        c["prime"]["webhook_url"] = json!(prime_url);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    let (_, answer) = sim
        .bitgo_send(&bitgo_body(&reference, &to, AMOUNT_WEI))
        .await?;
    let received = bitgo_inbox
        .wait(|r| r.iter().any(|e| e.json()["state"] == "confirmed"))
        .await?;
    let states: Vec<Value> = received.iter().map(|r| r.json()["state"].clone()).collect();
    assert_eq!(
        states,
        [
            "initialized",
            "pendingApproval",
            "initialized",
            "signed",
            "unconfirmed",
            "confirmed"
        ]
    );
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    for event in &received {
        assert!(bitgo_signed(event, BITGO_WEBHOOK_SECRET), "{event:?}");
        assert!(!bitgo_signed(event, "another secret"));
        assert!(!event.header("idempotency-key").is_empty());
        let body = event.json();
        assert_eq!(body["type"], "transfer");
        assert_eq!(body["sequenceId"], reference.as_str());
        assert_eq!(body["transfer"], answer["transfer"]["id"]);
        assert_eq!(
            (body["coin"].as_str(), body["wallet"].as_str()),
            (Some(BITGO_COIN), Some(BITGO_WALLET))
        );
    }
    assert_eq!(received[5].json()["hash"], hash.as_str());
    let prime_ref = common::reference();
    sim.prime_withdraw(&prime_body(&prime_ref, &fresh_address(), AMOUNT_WHOLE))
        .await?;
    let received = prime_inbox
        .wait(|r| {
            r.iter()
                .any(|e| e.json()["transaction"]["status"] == "TRANSACTION_DONE")
        })
        .await?;
    for event in &received {
        assert!(prime_signed(event, PRIME_SECRET), "{event:?}");
        assert!(!prime_signed(event, "another secret"));
    }
    sim.set_faults(1, json!([{"kind": "webhook_forged"}]))
        .await?;
    let forged = common::reference();
    sim.bitgo_send(&bitgo_body(&forged, &fresh_address(), AMOUNT_WEI))
        .await?;
    let all = bitgo_inbox.wait(|r| r.len() == 12).await?;
    assert!(
        all[6..]
            .iter()
            .all(|e| !bitgo_signed(e, BITGO_WEBHOOK_SECRET))
    );
    Ok(())
}
