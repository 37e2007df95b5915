//! BitGo's and Coinbase Prime's HMAC-signed webhooks from the double, on endpoints the real
//! `opledger-admin` registers.

use super::{Custody, FOLLOW_EVERY, HELD_SECS, admin, endpoint_url, funded, hinted, inbox_config};
use opledger_tests::custodian::{
    Sim, SimWebhooks, approved_withdrawal, drive_until, executor_following_every,
};
use opledger_tests::inbox::Inbox;
use serde_json::json;
use std::time::Duration;

/// Every delivery of every event the double made about `op`, with its status.
async fn statuses(c: &Custody, op: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(c.sim
        .webhooks_of(op)
        .await?
        .iter()
        .flat_map(|e| e["deliveries"].as_array().cloned().unwrap_or_default())
        .map(|d| d["status"].clone())
        .collect())
}

#[tokio::test]
async fn bitgo_events_signed_with_the_endpoint_secret_wake_the_lookup() -> anyhow::Result<()> {
    let (stack, acme) = funded().await?;
    let inbox = Inbox::start_with(&stack, inbox_config(&stack, 200)).await?;
    // The admin mints the secret and shows it once, for the provider's side.
    let created = admin(
        &stack,
        &[
            "webhook",
            "create-endpoint",
            "--tenant",
            "acme",
            "--source",
            "bitgo",
            "--types",
            "custodian.status",
            "--scheme",
            "bitgo_hmac",
        ],
        &[],
    )?;
    assert_eq!(created["scheme"], "bitgo_hmac");
    let endpoint = created["endpoint_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let secret = created["secret"].as_str().unwrap_or_default().to_owned();
    assert_eq!(secret.len(), 64);
    let sim = Sim::start_webhooks(SimWebhooks {
        faults: json!({"seed": 21, "rules": [{"kind": "webhook_duplicate"}]}),
        authorization_delay_secs: HELD_SECS,
        fireblocks_webhook_url: None,
        bitgo: Some((Some(endpoint_url(&inbox, "bitgo", &endpoint)), secret)),
        prime: None,
    })
    .await?;
    let executor = executor_following_every(
        &stack,
        "executor-1",
        vec![sim.bitgo_account(&acme)?],
        FOLLOW_EVERY,
    )
    .await?;
    let c = Custody {
        stack,
        acme,
        inbox,
        sim,
        endpoint,
        executor,
    };

    let op = c.sent_and_followed().await?;
    let followed = c.sim.lookups_of(&op).await?;
    c.passes(3).await;
    assert_eq!(c.sim.lookups_of(&op).await?, followed, "looked up unwoken");
    c.authorize().await?;
    c.drive(&op, "CONFIRMED").await?;
    assert!(c.sim.lookups_of(&op).await? > followed);
    c.quiet(&op).await?;
    // Each event delivered twice under its idempotency key: recorded once.
    let events = c.sim.webhooks_of(&op).await?.len();
    assert!(statuses(&c, &op).await?.iter().all(|s| s == 200));
    assert_eq!(c.rows("inbox_events", "").await?, i64::try_from(events)?);
    for outcome in c.outcomes().await? {
        assert!(
            ["DONE:WOKEN", "DONE:NOT_FOLLOWED"].contains(&outcome.as_str()),
            "{outcome}"
        );
    }
    c.moved_by_the_executor_only(&op).await?;

    // Signed under another secret (the double's forgery): refused, recorded nowhere, waking
    // nothing.
    c.sim
        .set_faults(&json!({"seed": 22, "rules": [
            {"kind": "webhook_forged", "variant": "wrong_key"}]}))
        .await?;
    let recorded = c.rows("inbox_events", "").await?;
    let forged = c.sent_and_followed().await?;
    let followed = c.sim.lookups_of(&forged).await?;
    c.authorize().await?;
    c.quiet(&forged).await?;
    assert!(statuses(&c, &forged).await?.iter().all(|s| s == 401));
    assert!(c.rejections("no_valid_signature").await? > 0);
    c.passes(5).await;
    assert_eq!(c.sim.lookups_of(&forged).await?, followed);
    assert_eq!(c.stack.state(&forged).await?, "BROADCAST");
    assert_eq!(c.rows("inbox_events", "").await?, recorded);
    assert_eq!(hinted(&c.stack, &c.acme).await?, [op.as_str()]);
    c.moved_by_the_executor_only(&forged).await?;
    c.inbox.stop().await
}

#[tokio::test]
async fn prime_events_are_verified_and_recorded_but_name_nothing_to_wake() -> anyhow::Result<()> {
    const SECRET: &str = "prime-signing-secret-of-the-tests-0001";
    let (stack, acme) = funded().await?;
    let inbox = Inbox::start_with(&stack, inbox_config(&stack, 200)).await?;
    // The provider's secret is imported from the environment, never shown.
    let created = admin(
        &stack,
        &[
            "webhook",
            "create-endpoint",
            "--tenant",
            "acme",
            "--source",
            "prime",
            "--types",
            "custodian.status",
            "--scheme",
            "prime_hmac",
            "--secret-env",
            "OPLEDGER_TEST_PRIME_SECRET",
        ],
        &[("OPLEDGER_TEST_PRIME_SECRET", SECRET)],
    )?;
    assert!(created["secret"].is_null());
    let endpoint = created["endpoint_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let sim = Sim::start_webhooks(SimWebhooks {
        faults: json!({"seed": 23, "rules": []}),
        authorization_delay_secs: 0,
        fireblocks_webhook_url: None,
        bitgo: None,
        prime: Some((
            Some(endpoint_url(&inbox, "prime", &endpoint)),
            SECRET.to_owned(),
        )),
    })
    .await?;
    let executor = executor_following_every(
        &stack,
        "executor-1",
        vec![sim.prime_account(&acme)?],
        FOLLOW_EVERY,
    )
    .await?;
    let c = Custody {
        stack,
        acme,
        inbox,
        sim,
        endpoint,
        executor,
    };
    let (w, _) = approved_withdrawal(&c.stack, &c.acme, super::AMOUNT).await?;
    let op = w.withdrawal_id;
    let within = Duration::from_secs(20);
    let sent = ["BROADCAST", "UNKNOWN"];
    drive_until(&c.stack, &[&c.executor], &op, &sent, within).await?;
    // The transfer runs its course at the double, which posts an event at each step.
    c.quiet(&op).await?;
    let events = c.sim.webhooks_of(&op).await?;
    assert!(events.len() >= 2, "{} events", events.len());
    assert!(statuses(&c, &op).await?.iter().all(|s| s == 200));
    assert_eq!(
        c.rows("inbox_events", "").await?,
        i64::try_from(events.len())?
    );
    // Verified and recorded, but Prime names no reference of ours: nothing is woken.
    assert!(c.outcomes().await?.iter().all(|o| o == "DONE:NO_REFERENCE"));
    assert!(hinted(&c.stack, &c.acme).await?.is_empty());
    // A replay of the first event: a duplicate (the dedup key is Prime's `event_id`).
    let first = events[0]["event_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    c.sim
        .post("webhooks/replay", &json!({"event_id": first}))
        .await?;
    c.quiet(&op).await?;
    assert_eq!(
        c.rows("inbox_events", "").await?,
        i64::try_from(events.len())?
    );

    // Under another secret: refused.
    c.sim
        .set_faults(&json!({"seed": 24, "rules": [
            {"kind": "webhook_forged", "variant": "wrong_key"}]}))
        .await?;
    let (w, _) = approved_withdrawal(&c.stack, &c.acme, super::AMOUNT).await?;
    let forged = w.withdrawal_id;
    drive_until(&c.stack, &[&c.executor], &forged, &sent, within).await?;
    c.quiet(&forged).await?;
    assert!(statuses(&c, &forged).await?.iter().all(|s| s == 401));
    assert!(c.rejections("no_valid_signature").await? > 0);
    assert_eq!(
        c.rows("inbox_events", "").await?,
        i64::try_from(events.len())?
    );

    // Events stamped an hour ahead of us (the double's clock moved): outside the window.
    c.sim.set_faults(&json!({"seed": 25, "rules": []})).await?;
    c.sim.post("clock", &json!({"advance_secs": 3600})).await?;
    let (w, _) = approved_withdrawal(&c.stack, &c.acme, super::AMOUNT).await?;
    let late = w.withdrawal_id;
    drive_until(&c.stack, &[&c.executor], &late, &sent, within).await?;
    c.quiet(&late).await?;
    assert!(statuses(&c, &late).await?.iter().all(|s| s == 401));
    assert!(c.rejections("timestamp_too_new").await? > 0);
    for op in [&op, &forged, &late] {
        c.moved_by_the_executor_only(op).await?;
    }
    c.inbox.stop().await
}
