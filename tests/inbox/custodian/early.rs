//! What a verified event about a withdrawal the executor does not follow (yet) does: parked
//! before the request exists and decided again once the withdrawal moves; nothing for another
//! tenant's withdrawal, a local signer's one, or no reference at all.

use super::{
    AMOUNT, Custody, FOLLOW_EVERY, HELD_SECS, admin, endpoint_url, fireblocks, hinted, inbox_config,
};
use opledger_tests::ALICE;
use opledger_tests::custodian::{
    Sim, SimWebhooks, approved_withdrawal, drive_until, executor_following_every,
};
use opledger_tests::inbox::{Inbox, Sender, eventually};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// HMAC-SHA256 (RFC 2104) of `message` under `key` (at most 64 bytes).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0_u8; 64];
    block[..key.len()].copy_from_slice(key);
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

const SECRET: &str = "bitgo-secret-the-test-signs-with-0001";

/// Posts a BitGo event `body` under idempotency key `id`, signed with [`SECRET`].
async fn post(
    sender: &Sender,
    url: &str,
    id: &str,
    body: &serde_json::Value,
) -> anyhow::Result<String> {
    let body = serde_json::to_vec(body)?;
    let tag = hex::encode(hmac_sha256(SECRET.as_bytes(), &body));
    let headers = [
        ("x-signature-sha256", tag),
        ("idempotency-key", id.to_owned()),
    ];
    let (status, text) = sender.send_raw(url, &headers, body).await?;
    anyhow::ensure!(status == 200, "{status} {text}");
    Ok(text)
}

fn transfer(reference: Option<&str>, state: &str) -> serde_json::Value {
    json!({"type": "transfer", "wallet": "w", "coin": "hteth", "transfer": "t", "hash": "",
           "state": state, "sequenceId": reference})
}

#[tokio::test]
async fn an_early_event_is_parked_until_the_request_is_sent_then_wakes_the_lookup()
-> anyhow::Result<()> {
    let (stack, acme) = super::funded().await?;
    let inbox = Inbox::start_with(&stack, inbox_config(&stack, 200)).await?;
    // The test plays BitGo: it holds the endpoint's secret, imported by the admin.
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
            "--secret-env",
            "TEST_BITGO_SECRET",
        ],
        &[("TEST_BITGO_SECRET", SECRET)],
    )?;
    let endpoint = created["endpoint_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let url = endpoint_url(&inbox, "bitgo", &endpoint);
    let sim = Sim::start_webhooks(SimWebhooks {
        faults: json!({"seed": 31, "rules": []}),
        authorization_delay_secs: HELD_SECS,
        fireblocks_webhook_url: None,
        bitgo: Some((None, SECRET.to_owned())),
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
    let sender = Sender::new(c.inbox.http);

    // Named before its request exists (APPROVED): parked, nothing to wake yet.
    let (w, _) = approved_withdrawal(&c.stack, &c.acme, AMOUNT).await?;
    let op = w.withdrawal_id;
    let early = transfer(Some(&op), "signed");
    assert!(
        post(&sender, &url, "evt-early", &early)
            .await?
            .contains("accepted")
    );
    wait(&c, &["PARKED:AWAITING_REQUEST"]).await?;
    assert!(hinted(&c.stack, &c.acme).await?.is_empty());
    // Sent: the withdrawal moved, so the parked event is decided again and wakes it.
    c.drive(&op, "BROADCAST").await?;
    wait(&c, &["DONE:WOKEN"]).await?;
    assert_eq!(hinted(&c.stack, &c.acme).await?, [op.as_str()]);
    c.passes(1).await;
    let followed = c.sim.lookups_of(&op).await?;
    assert!(followed >= 1);

    // The same event again: a duplicate; the same id with another body: quarantined. Neither
    // wakes anything.
    assert!(
        post(&sender, &url, "evt-early", &early)
            .await?
            .contains("duplicate")
    );
    let other = transfer(Some(&op), "confirmed");
    assert!(
        post(&sender, &url, "evt-early", &other)
            .await?
            .contains("quarantined")
    );
    c.passes(3).await;
    assert_eq!(c.sim.lookups_of(&op).await?, followed);

    // A withdrawal our signer executes: a dead letter for a person. No reference, or another
    // event type: recorded, nothing woken. A reference of nothing: retried, then a dead letter.
    let local = c.stack.withdraw(&c.acme, "100", ALICE).await?.withdrawal_id;
    post(
        &sender,
        &url,
        "evt-local",
        &transfer(Some(&local), "confirmed"),
    )
    .await?;
    post(&sender, &url, "evt-none", &transfer(None, "confirmed")).await?;
    let wallet = json!({"type": "wallet_confirmation", "sequenceId": op});
    assert!(
        post(&sender, &url, "evt-wallet", &wallet)
            .await?
            .contains("unhandled")
    );
    let nobody = uuid::Uuid::now_v7().to_string();
    post(
        &sender,
        &url,
        "evt-nobody",
        &transfer(Some(&nobody), "confirmed"),
    )
    .await?;
    wait(
        &c,
        &[
            "DONE:WOKEN",
            "DEAD:NOT_A_CUSTODIAN_WITHDRAWAL",
            "DONE:NO_REFERENCE",
            "DEAD:ATTEMPTS_EXHAUSTED",
        ],
    )
    .await?;
    assert_eq!(c.rows("inbox_events", "AND kind = 'UNHANDLED'").await?, 1);
    assert_eq!(c.rows("inbox_quarantine", "").await?, 1);
    assert_eq!(hinted(&c.stack, &c.acme).await?, [op.as_str()]);
    assert_eq!(c.stack.state(&local).await?, "REQUESTED");
    c.moved_by_the_executor_only(&op).await?;
    c.inbox.stop().await
}

/// Waits until the tenant's work items end as `want`, in order.
async fn wait(c: &Custody, want: &[&str]) -> anyhow::Result<()> {
    eventually(Duration::from_secs(15), || async {
        Ok(c.outcomes().await? == want)
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}: {:?}", want))
}

#[tokio::test]
async fn an_event_naming_another_tenants_withdrawal_wakes_nothing() -> anyhow::Result<()> {
    // One Fireblocks account serves both tenants, and all its webhooks go to acme's endpoint:
    // globex's events arrive verified on acme's endpoint, where no such withdrawal exists.
    let c = fireblocks(json!({"seed": 32, "rules": []}), 200).await?;
    let globex = c.stack.tenant("globex").await?;
    c.stack
        .fund(&globex, "treasury", "ETH", "100000000000000000")
        .await?;
    let theirs = executor_following_every(
        &c.stack,
        "executor-2",
        vec![c.sim.account(&globex, 5)?],
        FOLLOW_EVERY,
    )
    .await?;
    let (w, _) = approved_withdrawal(&c.stack, &globex, AMOUNT).await?;
    let op = w.withdrawal_id;
    let within = Duration::from_secs(20);
    drive_until(&c.stack, &[&theirs], &op, &["BROADCAST"], within).await?;
    c.quiet(&op).await?;
    theirs.pass(16, 4).await;
    let followed = c.sim.lookups_of(&op).await?;
    c.authorize().await?;
    c.quiet(&op).await?;
    for _ in 0..5 {
        theirs.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Verified and recorded under acme (the endpoint's tenant), found nowhere there: dead
    // letters for a person; globex's withdrawal was not woken.
    let events = c.sim.webhooks_of(&op).await?.len();
    assert_eq!(c.rows("inbox_events", "").await?, i64::try_from(events)?);
    let outcomes = c.outcomes().await?;
    assert_eq!(outcomes.len(), events);
    assert!(
        outcomes.iter().all(|o| o == "DEAD:ATTEMPTS_EXHAUSTED"),
        "{outcomes:?}"
    );
    let (errors,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM inbox_work WHERE tenant_id = $1 AND last_error = 'OPERATION_NOT_FOUND'",
    )
    .bind(c.acme.id.as_uuid())
    .fetch_one(c.stack.admin.pool())
    .await?;
    assert_eq!(errors, i64::try_from(events)?);
    assert!(hinted(&c.stack, &globex).await?.is_empty());
    assert!(hinted(&c.stack, &c.acme).await?.is_empty());
    assert!(super::outcomes(&c.stack, &globex).await?.is_empty());
    assert_eq!(c.sim.lookups_of(&op).await?, followed);
    assert_eq!(c.stack.state(&op).await?, "BROADCAST");
    super::moved_by_the_executor_only(&c.stack, &op).await?;
    c.inbox.stop().await
}
