//! `opledger-admin webhook`: the real binary creates an endpoint and rotates its secret; what it
//! prints once is what a provider signs with.

use opledger_tests::inbox::{World, body_keys, deposit, event_id};
use opledger_webhook::secret::SigningSecret;
use std::process::Command;
use std::time::Duration;

fn admin(world: &World, args: &[&str]) -> anyhow::Result<serde_json::Value> {
    let out = Command::new(opledger_testkit::binary_path("opledger-admin")?)
        .arg("--json")
        .args(args)
        .env("OPLEDGER_ADMIN_DATABASE_URL", &world.stack.db.url)
        .env("OPLEDGER_INBOX_BODY_KEYS", body_keys())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "opledger-admin {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn text(value: &serde_json::Value, key: &str) -> String {
    value[key].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn the_admin_cli_creates_endpoints_and_rotates_their_secrets() -> anyhow::Result<()> {
    let world = World::start("chainwatch", &["deposit.confirmed"]).await?;
    let created = admin(
        &world,
        &[
            "webhook",
            "create-endpoint",
            "--tenant",
            "acme",
            "--source",
            "custodian",
            "--types",
            "deposit.confirmed,kyt.result",
        ],
    )?;
    let mut ep = world.ep.clone();
    ep.id = text(&created, "endpoint_id");
    ep.source = "custodian".to_owned();
    ep.secret = SigningSecret::parse(&text(&created, "secret"))
        .map_err(|e| anyhow::anyhow!("printed secret: {e}"))?;
    assert_eq!(
        text(&created, "path"),
        format!("/webhooks/custodian/{}", ep.id)
    );
    let body = deposit("cli-1", "treasury", "ETH", "9");
    assert_eq!(world.sender.send(&ep, &event_id(), &body).await?.0, 200);

    // Rotate: add a secret, retire the first; after the cache TTL only the new one verifies.
    let added = admin(&world, &["webhook", "add-secret", &ep.id])?;
    let new_secret = SigningSecret::parse(&text(&added, "secret"))
        .map_err(|e| anyhow::anyhow!("printed secret: {e}"))?;
    let first_id = created["secret_id"]
        .as_i64()
        .unwrap_or_default()
        .to_string();
    admin(&world, &["webhook", "retire-secret", &ep.id, &first_id])?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let now = chrono::Utc::now().timestamp();
    let body = deposit("cli-2", "treasury", "ETH", "1");
    let old = world
        .sender
        .send_signed(&ep, &ep.secret, &event_id(), now, &body)
        .await?;
    let new = world
        .sender
        .send_signed(&ep, &new_secret, &event_id(), now, &body)
        .await?;
    assert_eq!((old.0, new.0), (401, 200));

    // Unknown event types are refused before anything is written.
    let refused = Command::new(opledger_testkit::binary_path("opledger-admin")?)
        .args([
            "webhook",
            "create-endpoint",
            "--tenant",
            "acme",
            "--source",
            "x",
            "--types",
            "payout.reversed",
        ])
        .env("OPLEDGER_ADMIN_DATABASE_URL", &world.stack.db.url)
        .env("OPLEDGER_INBOX_BODY_KEYS", body_keys())
        .output()?;
    assert!(!refused.status.success());
    assert_eq!(world.rows("webhook_endpoints", "").await?, 2);
    world.stop().await
}
