//! Webhook endpoints and their verification keys: creation, rotation, retirement and the lookup
//! the ingress verifies a request with.

use super::sealed::SealedBody;
use crate::{Result, Store, StoreError};
use opledger_domain::ids::TenantId;
use opledger_webhook::provider::EndpointScheme;
use sqlx::PgConnection;

/// How an endpoint key verifies signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// Standard Webhooks `v1`: HMAC-SHA256 with a shared secret (stored sealed).
    Hmac,
    /// Standard Webhooks `v1a`: an Ed25519 public key (stored as is).
    Ed25519,
}

impl SecretKind {
    fn as_str(self) -> &'static str {
        match self {
            SecretKind::Hmac => "hmac",
            SecretKind::Ed25519 => "ed25519",
        }
    }
}

/// One active verification key of an endpoint.
#[derive(Debug, Clone)]
pub struct StoredSecret {
    /// Its id (for retirement).
    pub secret_id: i64,
    /// The kind.
    pub kind: SecretKind,
    /// For HMAC: the secret, sealed with the endpoint id as associated data. For Ed25519: `None`.
    pub sealed: Option<SealedBody>,
    /// For Ed25519: the 32-byte public key. Empty for HMAC (the material is in `sealed`).
    pub public_key: Vec<u8>,
}

/// A new verification key for an endpoint.
#[derive(Debug, Clone)]
pub enum NewSecret {
    /// An HMAC secret, already sealed by the caller with the endpoint id as associated data.
    Hmac(SealedBody),
    /// An Ed25519 public key (32 bytes).
    Ed25519(Vec<u8>),
}

/// A webhook endpoint with its active keys.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `whe_` + 32 hex digits; the last path segment of its URL.
    pub endpoint_id: String,
    /// The tenant it belongs to: the only source of tenancy for what arrives on it.
    pub tenant_id: TenantId,
    /// The provider label (first path segment).
    pub source: String,
    /// Event types this provider may send; anything else is stored UNHANDLED.
    pub allowed_types: Vec<String>,
    /// How its deliveries are verified (migration 35; `standard` before).
    pub scheme: EndpointScheme,
    /// For `fireblocks_jws`: where the provider publishes its key set.
    pub jwks_url: Option<String>,
    /// Active keys (any may verify: rotation).
    pub secrets: Vec<StoredSecret>,
}

/// A new endpoint: its id (from [`new_endpoint_id`]), tenant, source label, allowed event types,
/// verification scheme, key set URL (`fireblocks_jws` only) and first key (none for
/// `fireblocks_jws`, whose keys are the provider's published ones).
#[derive(Debug, Clone, Copy)]
pub struct NewEndpoint<'a> {
    /// `whe_` + 32 hex digits.
    pub endpoint_id: &'a str,
    /// The tenant it belongs to.
    pub tenant_id: TenantId,
    /// The provider label.
    pub source: &'a str,
    /// Event types it may send.
    pub allowed_types: &'a [String],
    /// How its deliveries are verified.
    pub scheme: EndpointScheme,
    /// The provider's key set URL (`fireblocks_jws` only).
    pub jwks_url: Option<&'a str>,
    /// Its first key, sealed by the caller with the endpoint id as associated data.
    pub first: Option<&'a NewSecret>,
}

/// A fresh endpoint id (`whe_` + 32 hex digits): minted before the endpoint exists, because its
/// HMAC secret is sealed with the id as associated data.
pub fn new_endpoint_id() -> String {
    let bytes: [u8; 16] = rand::random();
    format!("whe_{}", hex::encode(bytes))
}

async fn insert_secret(
    conn: &mut PgConnection,
    endpoint_id: &str,
    secret: &NewSecret,
) -> Result<i64> {
    let (kind, key_id, nonce, material) = match secret {
        NewSecret::Hmac(s) => (
            SecretKind::Hmac,
            Some(s.key_id),
            Some(s.nonce.as_slice()),
            s.ciphertext.as_slice(),
        ),
        NewSecret::Ed25519(k) => (SecretKind::Ed25519, None, None, k.as_slice()),
    };
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO webhook_secrets (endpoint_id, kind, key_id, nonce, material) \
         VALUES ($1, $2, $3, $4, $5) RETURNING secret_id",
    )
    .bind(endpoint_id)
    .bind(kind.as_str())
    .bind(key_id)
    .bind(nonce)
    .bind(material)
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
}

impl Store {
    /// Creates endpoint `endpoint_id` (from [`new_endpoint_id`]; the caller sealed the first HMAC
    /// secret with that id as associated data) for `tenant_id` with its first key; returns the
    /// key's id. Owner role.
    pub async fn create_webhook_endpoint_with_id(
        &self,
        endpoint_id: &str,
        tenant_id: TenantId,
        source: &str,
        allowed_types: &[String],
        first: &NewSecret,
    ) -> Result<i64> {
        let created = self
            .create_webhook_endpoint(&NewEndpoint {
                endpoint_id,
                tenant_id,
                source,
                allowed_types,
                scheme: EndpointScheme::Standard,
                jwks_url: None,
                first: Some(first),
            })
            .await?;
        created.ok_or(StoreError::Corrupt {
            what: "webhook secret",
        })
    }

    /// Creates an endpoint with any verification scheme and, when given, its first key; returns
    /// the key's id. Owner role. The database refuses a key set URL on any scheme but
    /// `fireblocks_jws`, and that scheme without one.
    pub async fn create_webhook_endpoint(&self, new: &NewEndpoint<'_>) -> Result<Option<i64>> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO webhook_endpoints (endpoint_id, tenant_id, source, allowed_types, \
               scheme, jwks_url) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(new.endpoint_id)
        .bind(new.tenant_id.as_uuid())
        .bind(new.source)
        .bind(new.allowed_types)
        .bind(new.scheme.as_str())
        .bind(new.jwks_url)
        .execute(&mut *tx)
        .await?;
        let id = match new.first {
            Some(first) => Some(insert_secret(&mut tx, new.endpoint_id, first).await?),
            None => None,
        };
        tx.commit().await?;
        Ok(id)
    }

    /// Adds a key to an endpoint (rotation: both verify until the old one is retired).
    pub async fn add_webhook_secret(&self, endpoint_id: &str, secret: &NewSecret) -> Result<i64> {
        let mut conn = self.pool.acquire().await?;
        insert_secret(&mut conn, endpoint_id, secret).await
    }

    /// Retires a key; false when it was not active on that endpoint.
    pub async fn retire_webhook_secret(&self, endpoint_id: &str, secret_id: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE webhook_secrets SET retired_at = now() \
             WHERE endpoint_id = $1 AND secret_id = $2 AND retired_at IS NULL",
        )
        .bind(endpoint_id)
        .bind(secret_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }

    /// The enabled endpoint with this id and its active keys.
    pub async fn webhook_endpoint(&self, endpoint_id: &str) -> Result<Option<Endpoint>> {
        type EndpointRow = (uuid::Uuid, String, Vec<String>, String, Option<String>);
        let row: Option<EndpointRow> = sqlx::query_as(
            "SELECT tenant_id, source, allowed_types, scheme, jwks_url FROM webhook_endpoints \
             WHERE endpoint_id = $1 AND disabled_at IS NULL",
        )
        .bind(endpoint_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some((tenant, source, allowed_types, scheme, jwks_url)) = row else {
            return Ok(None);
        };
        let scheme = EndpointScheme::parse(&scheme).ok_or(StoreError::Corrupt {
            what: "webhook endpoint scheme",
        })?;
        type SecretRow = (i64, String, Option<i16>, Option<Vec<u8>>, Vec<u8>);
        let rows: Vec<SecretRow> = sqlx::query_as(
            "SELECT secret_id, kind, key_id, nonce, material FROM webhook_secrets \
             WHERE endpoint_id = $1 AND retired_at IS NULL ORDER BY secret_id",
        )
        .bind(endpoint_id)
        .fetch_all(&self.pool)
        .await?;
        let mut secrets = Vec::with_capacity(rows.len());
        for (secret_id, kind, key_id, nonce, material) in rows {
            secrets.push(match (kind.as_str(), key_id, nonce) {
                ("hmac", Some(key_id), Some(nonce)) => StoredSecret {
                    secret_id,
                    kind: SecretKind::Hmac,
                    sealed: Some(SealedBody {
                        key_id,
                        nonce,
                        ciphertext: material,
                    }),
                    public_key: Vec::new(),
                },
                ("ed25519", None, None) => StoredSecret {
                    secret_id,
                    kind: SecretKind::Ed25519,
                    sealed: None,
                    public_key: material,
                },
                _ => {
                    return Err(StoreError::Corrupt {
                        what: "webhook secret",
                    });
                }
            });
        }
        Ok(Some(Endpoint {
            endpoint_id: endpoint_id.to_owned(),
            tenant_id: TenantId::from_uuid(tenant),
            source,
            allowed_types,
            scheme,
            jwks_url,
            secrets,
        }))
    }
}
