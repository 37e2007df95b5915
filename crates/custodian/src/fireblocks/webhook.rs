//! Fireblocks webhooks v2: a detached JWS (`<protected>..<signature>`, RS512) over the raw body,
//! verified against the provider's JWKS; the key set parsed and fetched.

use crate::codec::{b64url, b64url_decode, parse_optional_hash};
use crate::config::SetupError;
use crate::fireblocks::wire::{TxResponse, millis};
use crate::transport::{TransportFailure, exchange};
use crate::types::WebhookError;
use chrono::{DateTime, Utc};
use opledger_domain::custodian::ProviderStatus;
use opledger_domain::evidence::Hash32;
use ring::signature::{RSA_PKCS1_2048_8192_SHA512, RsaPublicKeyComponents};
use serde::Deserialize;
use std::fmt;
use std::path::Path;
use std::time::Duration;
use uuid::Uuid;

/// The longest signature header read (an 8192-bit signature is about 1.4 KiB in base64url).
const MAX_HEADER: usize = 8 * 1024;

/// One RSA verification key.
#[derive(Clone, PartialEq, Eq)]
struct Jwk {
    kid: String,
    n: Vec<u8>,
    e: Vec<u8>,
}

/// The provider's webhook signing keys (RSA keys for RS512 of a JWKS document).
#[derive(Clone, PartialEq, Eq)]
pub struct Jwks {
    keys: Vec<Jwk>,
}

impl fmt::Debug for Jwks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jwks")
            .field("kids", &self.kids().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a key set could not be read or fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// Not a JWKS document.
    #[error("not a JWKS document")]
    Malformed,
    /// Two keys share a key id.
    #[error("two keys share a key id")]
    DuplicateKid,
    /// No RSA signing key for RS512.
    #[error("no RSA signing key for RS512")]
    NoKeys,
    /// The fetch failed (timeout, connection, a status other than 200, a body too large).
    #[error("the key set could not be fetched")]
    Fetch,
}

#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<RawJwk>,
}

#[derive(Deserialize)]
struct RawJwk {
    kty: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(rename = "use", default)]
    usage: Option<String>,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
}

/// Big-endian bytes without leading zeros (as `ring` wants them).
fn unsigned(bytes: Vec<u8>) -> Option<Vec<u8>> {
    let first = bytes.iter().position(|&b| b != 0)?;
    Some(bytes[first..].to_vec())
}

impl Jwks {
    /// The RSA keys of a JWKS document usable for RS512 signatures (`kty` RSA, `use` absent or
    /// `sig`, `alg` absent or `RS512`); other keys are left out. A key id used twice, or a usable
    /// key without `kid`, `n` or `e` in base64url, is refused.
    pub fn parse(bytes: &[u8]) -> Result<Jwks, JwksError> {
        let raw: RawJwks = serde_json::from_slice(bytes).map_err(|_| JwksError::Malformed)?;
        let mut keys: Vec<Jwk> = Vec::new();
        for key in raw.keys {
            let usable = key.kty == "RSA"
                && key.usage.as_deref().is_none_or(|u| u == "sig")
                && key.alg.as_deref().is_none_or(|a| a == "RS512");
            if !usable {
                continue;
            }
            let decode = |field: Option<&str>| field.and_then(b64url_decode).and_then(unsigned);
            let (Some(kid), Some(n), Some(e)) = (
                key.kid.clone().filter(|k| !k.is_empty()),
                decode(key.n.as_deref()),
                decode(key.e.as_deref()),
            ) else {
                return Err(JwksError::Malformed);
            };
            if keys.iter().any(|known| known.kid == kid) {
                return Err(JwksError::DuplicateKid);
            }
            keys.push(Jwk { kid, n, e });
        }
        if keys.is_empty() {
            return Err(JwksError::NoKeys);
        }
        Ok(Jwks { keys })
    }

    /// The key ids, in the document's order.
    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|key| key.kid.as_str())
    }
}

/// GETs a JWKS URL (`<base>/.well-known/jwks.json`): one request per fetch, no redirect.
#[derive(Debug, Clone)]
pub struct JwksFetcher {
    client: reqwest::Client,
    url: reqwest::Url,
}

impl JwksFetcher {
    /// A fetcher of `url` (http or https), each fetch bounded by `timeout`, trusting only
    /// `ca_file` when set.
    pub fn new(
        url: &str,
        timeout: Duration,
        ca_file: Option<&Path>,
    ) -> Result<JwksFetcher, SetupError> {
        let invalid = |problem| SetupError::Invalid {
            field: "jwks_url",
            problem,
        };
        let url = reqwest::Url::parse(url).map_err(|_| invalid("not a URL"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(invalid("must be an http(s) URL with a host"));
        }
        let client =
            opledger_chain::http_client(timeout, ca_file, [("accept", "application/json")])?;
        Ok(JwksFetcher { client, url })
    }

    /// The key set now served.
    pub async fn fetch(&self) -> Result<Jwks, JwksError> {
        let request = self
            .client
            .get(self.url.clone())
            .build()
            .map_err(|_| JwksError::Fetch)?;
        let answer = exchange(&self.client, request)
            .await
            .map_err(|_: TransportFailure| JwksError::Fetch)?;
        if answer.status != 200 {
            return Err(JwksError::Fetch);
        }
        Jwks::parse(&answer.body)
    }
}

/// What a webhook is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireblocksEventKind {
    /// `transaction.created`.
    TransactionCreated,
    /// `transaction.status.updated`.
    TransactionStatusUpdated,
    /// Any other event type (not about a transaction this crate reads).
    Other,
}

/// A transaction as a webhook shows it: enough to find our operation and wake it; the decision
/// rests on a lookup.
#[derive(Clone, PartialEq, Eq)]
pub struct FireblocksTransaction {
    /// The provider's transaction id.
    pub id: String,
    /// Our reference (`externalTxId`), when set.
    pub external_tx_id: Option<String>,
    /// The status as written.
    pub status_text: String,
    /// The status, when documented.
    pub status: Option<ProviderStatus>,
    /// The sub-status, when not empty.
    pub sub_status: Option<String>,
    /// The hash broadcast, if any.
    pub tx_hash: Option<Hash32>,
}

impl fmt::Debug for FireblocksTransaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FireblocksTransaction")
            .field("status_text", &self.status_text)
            .field("sub_status", &self.sub_status)
            .field("tx_hash", &self.tx_hash.is_some())
            .finish_non_exhaustive()
    }
}

/// A verified webhook event.
#[derive(Clone, PartialEq, Eq)]
pub struct FireblocksEvent {
    /// The event id (deduplicate on it).
    pub id: Uuid,
    /// What it is about.
    pub kind: FireblocksEventKind,
    /// `eventType` as written.
    pub event_type: String,
    /// `eventVersion`.
    pub event_version: Option<u64>,
    /// `resourceId`.
    pub resource_id: Option<String>,
    /// `createdAt`.
    pub created_at: Option<DateTime<Utc>>,
    /// `workspaceId`.
    pub workspace_id: Option<String>,
    /// The transaction, for the two transaction event types.
    pub transaction: Option<FireblocksTransaction>,
}

impl fmt::Debug for FireblocksEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FireblocksEvent")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("event_version", &self.event_version)
            .field("created_at", &self.created_at)
            .field("transaction", &self.transaction)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Protected {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<serde_json::Value>,
    #[serde(default)]
    b64: Option<serde_json::Value>,
}

/// Verifies a Fireblocks webhook v2: `signature_header` (`Fireblocks-Webhook-Signature`) is
/// `<protected>..<signature>`, `protected` names `alg` RS512 and a `kid` of `jwks`, and the
/// signature (RSASSA-PKCS1-v1_5, SHA-512) covers `protected + "." + base64url(raw_body)`. An
/// unknown `kid` is [`WebhookError::UnknownKey`]: refresh the key set once and verify again.
pub fn verify_fireblocks_webhook(
    raw_body: &[u8],
    signature_header: &str,
    jwks: &Jwks,
) -> Result<FireblocksEvent, WebhookError> {
    let header = signature_header.trim();
    if header.len() > MAX_HEADER {
        return Err(WebhookError::Header);
    }
    let mut parts = header.split('.');
    let (Some(protected), Some(""), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(WebhookError::Header);
    };
    let fields = b64url_decode(protected)
        .and_then(|json| serde_json::from_slice::<Protected>(&json).ok())
        .ok_or(WebhookError::Header)?;
    if fields.crit.is_some() || fields.b64.is_some() {
        return Err(WebhookError::Header);
    }
    if fields.alg != "RS512" {
        return Err(WebhookError::Algorithm);
    }
    let kid = fields.kid.ok_or(WebhookError::Header)?;
    let signature = b64url_decode(signature)
        .filter(|s| !s.is_empty())
        .ok_or(WebhookError::Header)?;
    let key = jwks
        .keys
        .iter()
        .find(|key| key.kid == kid)
        .ok_or(WebhookError::UnknownKey)?;
    let signing_input = format!("{protected}.{}", b64url(raw_body));
    RsaPublicKeyComponents {
        n: &key.n,
        e: &key.e,
    }
    .verify(
        &RSA_PKCS1_2048_8192_SHA512,
        signing_input.as_bytes(),
        &signature,
    )
    .map_err(|_| WebhookError::Signature)?;
    read_event(raw_body)
}

#[derive(Deserialize)]
struct RawEvent {
    id: String,
    #[serde(rename = "eventType")]
    event_type: String,
    #[serde(rename = "eventVersion", default)]
    event_version: Option<u64>,
    #[serde(rename = "resourceId", default)]
    resource_id: Option<String>,
    #[serde(default)]
    data: Option<serde_json::Value>,
    #[serde(rename = "createdAt", default)]
    created_at: Option<i64>,
    #[serde(rename = "workspaceId", default)]
    workspace_id: Option<String>,
}

/// A verified body as an event.
fn read_event(raw_body: &[u8]) -> Result<FireblocksEvent, WebhookError> {
    let raw: RawEvent = serde_json::from_slice(raw_body).map_err(|_| WebhookError::Body)?;
    let id = Uuid::try_parse(&raw.id).map_err(|_| WebhookError::Body)?;
    let kind = match raw.event_type.as_str() {
        "transaction.created" => FireblocksEventKind::TransactionCreated,
        "transaction.status.updated" => FireblocksEventKind::TransactionStatusUpdated,
        _ => FireblocksEventKind::Other,
    };
    let transaction = match kind {
        FireblocksEventKind::Other => None,
        _ => {
            let data = raw.data.ok_or(WebhookError::Body)?;
            let tx: TxResponse = serde_json::from_value(data).map_err(|_| WebhookError::Body)?;
            let tx_hash =
                parse_optional_hash(tx.tx_hash.as_deref()).map_err(|()| WebhookError::Body)?;
            Some(FireblocksTransaction {
                status: tx.status.parse().ok(),
                id: tx.id,
                external_tx_id: tx.external_tx_id,
                status_text: tx.status,
                sub_status: tx.sub_status.filter(|s| !s.is_empty()),
                tx_hash,
            })
        }
    };
    Ok(FireblocksEvent {
        id,
        kind,
        event_type: raw.event_type,
        event_version: raw.event_version,
        resource_id: raw.resource_id,
        created_at: millis(raw.created_at),
        workspace_id: raw.workspace_id,
        transaction,
    })
}
