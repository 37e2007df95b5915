//! Endpoints whose provider signs in its own way: the verification scheme an endpoint names, and
//! the pure checks of the two HMAC schemes of custodians (BitGo, Coinbase Prime as the
//! conformance double sends it). Fireblocks' detached JWS is verified by `opledger-custodian`
//! against the provider's key set; the ingress fetches that key set.
//!
//! A custodian's status event is only ever a wake-up for the executor's lookup: what is read here
//! is the event id (the dedup key), our reference when the provider sends one, and whether the
//! event is about a transfer. Nothing else of the body (its status above all) is read.
//!
//! | scheme | signature | event id | our reference |
//! |---|---|---|---|
//! | `bitgo_hmac` | `x-signature-sha256`: 64 hex digits, HMAC-SHA256(secret, body) | header `idempotency-key` | `sequenceId` |
//! | `prime_hmac` | `X-CB-SIGNATURE`: base64 HMAC-SHA256(secret, `X-CB-TIMESTAMP` + body); the timestamp within the tolerance | `event_id` | none |
//! | `fireblocks_jws` | `Fireblocks-Webhook-Signature` (see `opledger-custodian`) | `id` | `data.externalTxId` |
//!
//! Errors carry a stable code and never a header value, a signature or any part of the body.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::event::nested_deeper_than;
use crate::secret::VerificationKey;

/// The event type a custodian's transfer status event is stored under (one for every provider;
/// the endpoint's source label names the provider).
pub const CUSTODIAN_STATUS: &str = "custodian.status";

/// Longest event id accepted, in bytes (the inbox's dedup key).
pub const MAX_EVENT_ID_LEN: usize = 256;

/// Deepest nesting of a custodian's body that is read.
const MAX_DEPTH: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// How an endpoint's deliveries are verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum EndpointScheme {
    /// Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
    #[default]
    Standard,
    /// Fireblocks webhooks v2: a detached JWS, RS512, against the provider's key set.
    FireblocksJws,
    /// BitGo: hex HMAC-SHA256 of the body in `x-signature-sha256`.
    BitgoHmac,
    /// Coinbase Prime (as the double sends it): base64 HMAC-SHA256 of timestamp + body.
    PrimeHmac,
}

impl EndpointScheme {
    /// Every scheme.
    pub const ALL: [EndpointScheme; 4] = [
        EndpointScheme::Standard,
        EndpointScheme::FireblocksJws,
        EndpointScheme::BitgoHmac,
        EndpointScheme::PrimeHmac,
    ];

    /// The stored and configured name.
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointScheme::Standard => "standard",
            EndpointScheme::FireblocksJws => "fireblocks_jws",
            EndpointScheme::BitgoHmac => "bitgo_hmac",
            EndpointScheme::PrimeHmac => "prime_hmac",
        }
    }

    /// The scheme named `name`, if any.
    pub fn parse(name: &str) -> Option<EndpointScheme> {
        EndpointScheme::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// True for a custodian's own scheme (its deliveries are status events, only wake-ups).
    pub fn is_custodian(self) -> bool {
        self != EndpointScheme::Standard
    }

    /// True when the endpoint's stored keys verify (Standard, BitGo, Prime); a JWS endpoint uses
    /// the provider's published key set instead.
    pub fn uses_stored_keys(self) -> bool {
        self != EndpointScheme::FireblocksJws
    }
}

impl fmt::Display for EndpointScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a verified custodian delivery says, as far as the inbox reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderDelivery {
    /// The provider's event id: 1 to [`MAX_EVENT_ID_LEN`] visible ASCII characters.
    pub event_id: String,
    /// The provider's timestamp of the event, unix seconds, when it sends one.
    pub sent_at: Option<i64>,
    /// Whether the event is about a transfer (a status event); others are stored UNHANDLED.
    pub about_transfer: bool,
    /// The provider's event type, when it names one (at most 64 visible characters kept).
    pub event_type: Option<String>,
    /// Our reference as the provider wrote it, when it sends one.
    pub reference: Option<String>,
}

impl fmt::Debug for ProviderDelivery {
    // The reference names one of our withdrawals: never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderDelivery")
            .field("event_id_len", &self.event_id.len())
            .field("sent_at", &self.sent_at)
            .field("about_transfer", &self.about_transfer)
            .field("event_type", &self.event_type)
            .field("reference", &self.reference.is_some())
            .finish()
    }
}

/// Why a custodian delivery was refused. Never carries a header value, a signature or the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// No key of the endpoint can verify this scheme (a configuration problem).
    #[error("no verification key is configured")]
    NoKeys,
    /// A required header is absent (or repeated).
    #[error("missing {0} header")]
    MissingHeader(&'static str),
    /// A header is present but malformed.
    #[error("invalid {0} header")]
    InvalidHeader(&'static str),
    /// The signature names an algorithm the provider does not use.
    #[error("signature algorithm not accepted")]
    Algorithm,
    /// The signature names a key the provider's key set does not hold.
    #[error("signature key id unknown")]
    UnknownKey,
    /// The timestamp is further in the past than the tolerance.
    #[error("timestamp is too old")]
    TimestampTooOld,
    /// The timestamp is further in the future than the tolerance.
    #[error("timestamp is too far in the future")]
    TimestampTooNew,
    /// No key of the endpoint made this signature over this body.
    #[error("no valid signature")]
    NoValidSignature,
    /// The signature verifies, but the body is not an event the scheme reads (no event id).
    #[error("body is not a readable event")]
    Body,
}

impl ProviderError {
    /// Stable machine-readable code (`no_keys`, `missing_header`, `invalid_header`,
    /// `algorithm_not_accepted`, `unknown_key`, `timestamp_too_old`, `timestamp_too_new`,
    /// `no_valid_signature`, `unreadable_event`).
    pub fn code(&self) -> &'static str {
        match self {
            ProviderError::NoKeys => "no_keys",
            ProviderError::MissingHeader(_) => "missing_header",
            ProviderError::InvalidHeader(_) => "invalid_header",
            ProviderError::Algorithm => "algorithm_not_accepted",
            ProviderError::UnknownKey => "unknown_key",
            ProviderError::TimestampTooOld => "timestamp_too_old",
            ProviderError::TimestampTooNew => "timestamp_too_new",
            ProviderError::NoValidSignature => "no_valid_signature",
            ProviderError::Body => "unreadable_event",
        }
    }

    /// True when the request itself is malformed (400) rather than unauthenticated (401).
    pub fn is_malformed(&self) -> bool {
        matches!(
            self,
            ProviderError::MissingHeader(_) | ProviderError::InvalidHeader(_) | ProviderError::Body
        )
    }
}

/// A header's text: present, 1 to `max` bytes, UTF-8.
fn header_text<'a>(
    name: &'static str,
    value: Option<&'a [u8]>,
    max: usize,
) -> Result<&'a str, ProviderError> {
    let bytes = value.ok_or(ProviderError::MissingHeader(name))?;
    if bytes.is_empty() || bytes.len() > max {
        return Err(ProviderError::InvalidHeader(name));
    }
    std::str::from_utf8(bytes)
        .map(str::trim)
        .map_err(|_| ProviderError::InvalidHeader(name))
}

/// An event id: 1 to [`MAX_EVENT_ID_LEN`] visible ASCII characters.
pub fn valid_event_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_EVENT_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

/// A provider's event type as kept with an UNHANDLED event: at most 64 characters, control
/// characters replaced (the sealed raw body keeps the original).
pub fn kept_event_type(text: &str) -> String {
    text.chars()
        .take(64)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

/// The endpoint's HMAC keys (the only kind these schemes use).
fn hmac_keys(keys: &[VerificationKey]) -> Result<Vec<HmacSha256>, ProviderError> {
    let macs: Vec<HmacSha256> = keys
        .iter()
        .filter_map(|key| match key {
            VerificationKey::Hmac(secret) => Some(HmacSha256::new(secret.hmac_block().into())),
            VerificationKey::Ed25519(_) => None,
        })
        .collect();
    if macs.is_empty() {
        return Err(ProviderError::NoKeys);
    }
    Ok(macs)
}

/// True when one of `macs`, fed `parts`, makes `tag` (compared in constant time).
fn any_mac_matches(macs: Vec<HmacSha256>, parts: &[&[u8]], tag: &[u8]) -> bool {
    let mut matched = false;
    for mut mac in macs {
        for part in parts {
            mac.update(part);
        }
        // Every key is tried: the time taken does not say which one matched.
        matched |= mac.verify_slice(tag).is_ok();
    }
    matched
}

#[derive(Deserialize)]
struct BitGoBody {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(rename = "sequenceId", default)]
    sequence_id: Option<String>,
}

/// Verifies a BitGo delivery: `signature` (`x-signature-sha256`) is the 64 lowercase or uppercase
/// hex digits of HMAC-SHA256 of the raw body under one of the endpoint's HMAC `keys`, and
/// `idempotency_key` (the event id, not covered by the signature) is 1 to 256 visible ASCII
/// characters. The body must be a JSON object with a string `type`; a `transfer` event is about a
/// transfer, and its `sequenceId` is our reference.
pub fn verify_bitgo(
    keys: &[VerificationKey],
    signature: Option<&[u8]>,
    idempotency_key: Option<&[u8]>,
    body: &[u8],
) -> Result<ProviderDelivery, ProviderError> {
    let macs = hmac_keys(keys)?;
    let signature = header_text("x-signature-sha256", signature, 256)?;
    let mut tag = [0_u8; 32];
    if signature.len() != 64 || hex::decode_to_slice(signature, &mut tag).is_err() {
        return Err(ProviderError::InvalidHeader("x-signature-sha256"));
    }
    let event_id = header_text("idempotency-key", idempotency_key, MAX_EVENT_ID_LEN)?;
    if !valid_event_id(event_id) {
        return Err(ProviderError::InvalidHeader("idempotency-key"));
    }
    if !any_mac_matches(macs, &[body], &tag) {
        return Err(ProviderError::NoValidSignature);
    }
    let read: BitGoBody = read_body(body)?;
    let about_transfer = read.event_type == "transfer";
    Ok(ProviderDelivery {
        event_id: event_id.to_owned(),
        sent_at: None,
        about_transfer,
        event_type: Some(kept_event_type(&read.event_type)),
        reference: read.sequence_id.filter(|_| about_transfer),
    })
}

#[derive(Deserialize)]
struct PrimeBody {
    event_id: String,
    #[serde(default)]
    event_type: Option<String>,
}

/// Prime event types about a transaction.
const PRIME_TRANSACTION_EVENTS: [&str; 2] = ["TRANSACTION_CREATED", "TRANSACTION_STATUS_UPDATED"];

/// Verifies a Coinbase Prime delivery as the conformance double sends it: `timestamp`
/// (`X-CB-TIMESTAMP`, unix seconds) within `tolerance_secs` of `now_unix` both ways, and
/// `signature` (`X-CB-SIGNATURE`) the padded standard base64 of HMAC-SHA256 of the timestamp as
/// sent followed by the raw body, under one of the endpoint's HMAC `keys`. The body must be a JSON
/// object with a string `event_id`; Prime names no reference of ours.
pub fn verify_prime(
    keys: &[VerificationKey],
    timestamp: Option<&[u8]>,
    signature: Option<&[u8]>,
    body: &[u8],
    now_unix: i64,
    tolerance_secs: i64,
) -> Result<ProviderDelivery, ProviderError> {
    let macs = hmac_keys(keys)?;
    let stamp = header_text("x-cb-timestamp", timestamp, 20)?;
    let seconds: i64 = if stamp.bytes().all(|b| b.is_ascii_digit()) {
        stamp
            .parse()
            .map_err(|_| ProviderError::InvalidHeader("x-cb-timestamp"))?
    } else {
        return Err(ProviderError::InvalidHeader("x-cb-timestamp"));
    };
    let signature = header_text("x-cb-signature", signature, 256)?;
    let mut tag = [0_u8; 64];
    let len = STANDARD
        .decode_slice(signature, &mut tag)
        .map_err(|_| ProviderError::InvalidHeader("x-cb-signature"))?;
    if len != 32 {
        return Err(ProviderError::InvalidHeader("x-cb-signature"));
    }
    let age = i128::from(now_unix) - i128::from(seconds);
    let tolerance = i128::from(tolerance_secs.max(0));
    if age > tolerance {
        return Err(ProviderError::TimestampTooOld);
    }
    if -age > tolerance {
        return Err(ProviderError::TimestampTooNew);
    }
    if !any_mac_matches(macs, &[stamp.as_bytes(), body], &tag[..32]) {
        return Err(ProviderError::NoValidSignature);
    }
    let read: PrimeBody = read_body(body)?;
    if !valid_event_id(&read.event_id) {
        return Err(ProviderError::Body);
    }
    Ok(ProviderDelivery {
        event_id: read.event_id,
        sent_at: Some(seconds),
        about_transfer: read
            .event_type
            .as_deref()
            .is_some_and(|t| PRIME_TRANSACTION_EVENTS.contains(&t)),
        event_type: read.event_type.as_deref().map(kept_event_type),
        reference: None,
    })
}

/// A verified body as `T` (a JSON object no deeper than [`MAX_DEPTH`]), else [`ProviderError::Body`].
fn read_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ProviderError> {
    if nested_deeper_than(body, MAX_DEPTH) {
        return Err(ProviderError::Body);
    }
    serde_json::from_slice(body).map_err(|_| ProviderError::Body)
}

#[cfg(test)]
mod tests;
