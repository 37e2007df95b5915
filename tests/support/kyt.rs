//! KYT screening results as a provider signs them (Standard Webhooks `v1a`) and as the inbox
//! records them, for suites that play the provider, the inbox's login or someone forging rows.

use opledger_domain::approval::{KeyKind, RegisteredKey, verifying_key};
use opledger_domain::ids::TenantId;
use opledger_webhook::{Ed25519SigningKey, Headers, VerificationKey, sign_v1a, verify};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

/// The deterministic KYT provider key `index` of a tenant.
pub fn provider_key(tenant: TenantId, index: u8) -> Ed25519SigningKey {
    let seed: [u8; 32] =
        Sha256::digest(format!("opledger test kyt provider {tenant} {index}")).into();
    Ed25519SigningKey::from_seed(&seed)
}

/// The provider key `index` as a trust statement registers it.
pub fn registered(tenant: TenantId, index: u8) -> anyhow::Result<RegisteredKey> {
    let public = verifying_key(&provider_key(tenant, index).public_key().to_bytes())
        .map_err(|e| anyhow::anyhow!("kyt key: {e}"))?;
    Ok(RegisteredKey::new(public, KeyKind::Kyt))
}

/// A `kyt.result` delivery as the inbox keeps it once `verify` accepted it.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// `webhook-id`.
    pub event_id: String,
    /// `webhook-timestamp`, unix seconds.
    pub timestamp: i64,
    /// The raw body.
    pub body: Vec<u8>,
    /// The `v1a` signature that verified.
    pub signature: Vec<u8>,
}

/// The body of a `kyt.result` about `withdrawal_id`.
pub fn body(withdrawal_id: &str, result: &str, provider_ref: &str) -> Vec<u8> {
    format!(
        r#"{{"type":"kyt.result","data":{{"operation_id":"{withdrawal_id}","result":"{result}","provider_ref":"{provider_ref}"}}}}"#
    )
    .into_bytes()
}

/// `body` signed by `key` as event `event_id`, checked the way the inbox checks it.
pub fn signed(key: &Ed25519SigningKey, event_id: &str, body: Vec<u8>) -> anyhow::Result<Delivery> {
    let timestamp = chrono::Utc::now().timestamp();
    let entry = sign_v1a(key, event_id, timestamp, &body);
    let ts = timestamp.to_string();
    let verified = verify(
        &[VerificationKey::Ed25519(key.public_key())],
        &Headers::from_strs(event_id, &ts, &entry),
        &body,
        timestamp,
        300,
    )
    .map_err(|e| anyhow::anyhow!("v1a: {e}"))?;
    let signature = verified
        .signature()
        .ok_or_else(|| anyhow::anyhow!("no v1a signature kept"))?
        .to_vec();
    Ok(Delivery {
        event_id: event_id.to_owned(),
        timestamp,
        body,
        signature,
    })
}

/// Records a screening of the withdrawal the way the inbox does: an endpoint (created on `owner`),
/// then on `writer` (whoever's login that is) the inbox event it came in and the screening row,
/// with the delivery whole when `delivery` is given (a row without one is what a `v1` delivery
/// leaves).
pub async fn record(
    owner: &PgPool,
    writer: &PgPool,
    tenant: TenantId,
    withdrawal_id: &str,
    result: &str,
    provider_ref: &str,
    delivery: Option<&Delivery>,
) -> anyhow::Result<()> {
    let endpoint = format!("whe_{}", uuid::Uuid::new_v4().simple());
    sqlx::query(
        "INSERT INTO webhook_endpoints (endpoint_id, tenant_id, source, allowed_types) \
         VALUES ($1, $2, 'kyt', ARRAY['kyt.result'])",
    )
    .bind(&endpoint)
    .bind(tenant.as_uuid())
    .execute(owner)
    .await?;
    let (inbox_id,): (i64,) = sqlx::query_as(
        "INSERT INTO inbox_events (tenant_id, source, event_id, endpoint_id, body_hash, \
           event_type, kind, sent_at, body_purged_at) \
         VALUES ($1, 'kyt', $2, $3, $4, 'kyt.result', 'EVENT', now(), now()) \
         RETURNING inbox_id",
    )
    .bind(tenant.as_uuid())
    .bind(format!("evt-{provider_ref}"))
    .bind(&endpoint)
    .bind(vec![0_u8; 32])
    .fetch_one(writer)
    .await?;
    sqlx::query(
        "INSERT INTO kyt_screenings (tenant_id, op_id, source, provider_ref, result, inbox_id, \
           event_id, signed_at, body, signature) \
         VALUES ($1, $2, 'kyt', $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(tenant.as_uuid())
    .bind(withdrawal_id.parse::<uuid::Uuid>()?)
    .bind(provider_ref)
    .bind(result)
    .bind(inbox_id)
    .bind(delivery.map(|d| d.event_id.as_str()))
    .bind(delivery.map(|d| d.timestamp))
    .bind(delivery.map(|d| d.body.as_slice()))
    .bind(delivery.map(|d| d.signature.as_slice()))
    .execute(writer)
    .await?;
    Ok(())
}
