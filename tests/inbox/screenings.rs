//! KYT results reach the signer as signed facts: the inbox keeps a `v1a` delivery whole with the
//! screening (event id, timestamp, raw body, the signature that verified), so the approvals
//! service and the signer can verify it again with a KYT key of the tenant's trust statement; a
//! `v1` (shared secret) delivery is recorded and acted on as before but proves nothing to them.

use opledger_domain::payload::AssetCode;
use opledger_store::inbox::NewSecret;
use opledger_testkit::trust::{approver_key, default_parts, publish};
use opledger_tests::inbox::{Endpoint, World, event_id, kyt as kyt_body};
use opledger_tests::{ALICE, approval_under, authed, kyt, reason};
use opledger_webhook::sign_v1a;

#[tokio::test]
async fn a_v1a_kyt_pass_is_kept_whole_and_counts_a_v1_pass_does_not() -> anyhow::Result<()> {
    let world = World::start("screening", &["kyt.result"]).await?;
    let (stack, acme) = (&world.stack, &world.acme);
    stack.fund(acme, "treasury", "ETH", "1000").await?;
    let mut parts = default_parts(acme.id);
    parts.keys.push(kyt::registered(acme.id, 0)?);
    parts.kyt_required = vec![AssetCode::parse("ETH")?];
    publish(&stack.admin, acme.id, 2, parts).await?;
    // The provider's endpoint verifies its Ed25519 key.
    let provider = kyt::provider_key(acme.id, 0);
    let signed_ep = Endpoint {
        id: opledger_store::inbox::new_endpoint_id(),
        source: "screener".into(),
        secret: world.ep.secret.clone(),
    };
    stack
        .admin
        .create_webhook_endpoint_with_id(
            &signed_ep.id,
            acme.id,
            &signed_ep.source,
            &["kyt.result".to_owned()],
            &NewSecret::Ed25519(provider.public_key().to_bytes().to_vec()),
        )
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;

    // First a pass over the shared-secret endpoint: recorded, not a signed fact.
    let w = stack.withdraw(acme, "100", ALICE).await?;
    assert_eq!(
        world
            .post(&kyt_body(&w.withdrawal_id, "pass", "v1-ref"))
            .await?,
        200
    );
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    assert_eq!(
        world
            .rows("kyt_screenings", "AND signature IS NULL")
            .await?,
        1
    );
    let key = approver_key(acme.id, 0);
    let err = stack
        .approvals()
        .await?
        .approve_withdrawal(authed(&acme.approver, approval_under(acme.id, &w, &key, 2)))
        .await
        .expect_err("a v1 pass proves nothing");
    assert_eq!(reason(&err), "KYT_PASS_REQUIRED");

    // Then the provider's v1a pass: kept whole, and it verifies again as stored.
    let body = kyt_body(&w.withdrawal_id, "pass", "v1a-ref");
    let id = event_id();
    let now = chrono::Utc::now().timestamp();
    let entry = sign_v1a(&provider, &id, now, body.as_bytes());
    let (status, _) = world
        .sender
        .send_raw(
            &world.sender.url(&signed_ep),
            &[
                ("webhook-id", id.clone()),
                ("webhook-timestamp", now.to_string()),
                ("webhook-signature", entry),
            ],
            body.clone().into_bytes(),
        )
        .await?;
    assert_eq!(status, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 2)
        .await?;
    let (event, signed_at, stored_body, signature): (String, i64, Vec<u8>, Vec<u8>) =
        sqlx::query_as(
            "SELECT event_id, signed_at, body, signature FROM kyt_screenings \
             WHERE tenant_id = $1 AND signature IS NOT NULL",
        )
        .bind(acme.id.as_uuid())
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!((event.as_str(), signed_at), (id.as_str(), now));
    assert_eq!(stored_body, body.as_bytes());
    assert_eq!(signature.len(), 64);
    let done = stack
        .approvals()
        .await?
        .approve_withdrawal(authed(&acme.approver, approval_under(acme.id, &w, &key, 2)))
        .await?
        .into_inner();
    assert_eq!(
        done.state,
        opledger_proto::v1::WithdrawalState::Approved as i32
    );
    world.stop().await
}
