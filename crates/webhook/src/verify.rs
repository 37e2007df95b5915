//! Standard Webhooks signature verification over the raw request.
//!
//! A provider sends three headers with every delivery:
//!
//! - `webhook-id`: the event's unique id, which the ingress uses for
//!   deduplication. Accepted: 1 to 256 visible ASCII characters (`!` to `~`,
//!   no space).
//! - `webhook-timestamp`: unix seconds as ASCII digits. Accepted when within
//!   the tolerance (default [`DEFAULT_TOLERANCE_SECS`]) of the caller's clock,
//!   in both directions, which bounds how long a captured request can be
//!   replayed.
//! - `webhook-signature`: space-separated entries `v1,<base64 HMAC-SHA256>`
//!   or `v1a,<base64 Ed25519 signature>`, at most [`MAX_SIGNATURE_ENTRIES`]
//!   of them in at most [`MAX_SIGNATURE_HEADER_LEN`] bytes. Several entries
//!   let a provider rotate keys; one entry made by one configured key is
//!   enough. Entries of an unknown version, or that are malformed, are
//!   skipped.
//!
//! The signed content is `{webhook-id}.{webhook-timestamp}.{body}`, with the
//! header values exactly as received and the body as raw bytes: nothing is
//! re-serialized before checking. HMAC tags are compared in constant time and
//! Ed25519 signatures are checked with the strict rules.
//!
//! Checks run in a fixed order (keys configured, `webhook-id`,
//! `webhook-timestamp`, `webhook-signature` shape, time window, signatures)
//! and the first failure is returned. Every [`VerifyError`] has a stable
//! [`code`](VerifyError::code) for responses and metrics; none carries a
//! header value, a signature or the body.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::secret::{Ed25519PublicKey, Ed25519SigningKey, SigningSecret, VerificationKey};

/// Default accepted distance, in seconds, between `webhook-timestamp` and the
/// caller's clock, in either direction.
pub const DEFAULT_TOLERANCE_SECS: i64 = 300;
/// Longest accepted `webhook-id`, in bytes.
pub const MAX_ID_LEN: usize = 256;
/// Longest accepted `webhook-timestamp`, in bytes.
pub const MAX_TIMESTAMP_LEN: usize = 32;
/// Longest accepted `webhook-signature`, in bytes.
pub const MAX_SIGNATURE_HEADER_LEN: usize = 8 * 1024;
/// Most entries accepted in `webhook-signature`.
pub const MAX_SIGNATURE_ENTRIES: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// One of the three Standard Webhooks headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HeaderName {
    /// `webhook-id`.
    Id,
    /// `webhook-timestamp`.
    Timestamp,
    /// `webhook-signature`.
    Signature,
}

impl HeaderName {
    /// The lowercase HTTP header name.
    pub fn as_str(self) -> &'static str {
        match self {
            HeaderName::Id => "webhook-id",
            HeaderName::Timestamp => "webhook-timestamp",
            HeaderName::Signature => "webhook-signature",
        }
    }
}

impl fmt::Display for HeaderName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The raw values of the three headers as the ingress received them, `None`
/// when absent. Values are taken as bytes because HTTP header values need not
/// be UTF-8; [`verify`] refuses those that are not. When a header is repeated,
/// the ingress should refuse the request or pass `None`, not pick one.
#[derive(Clone, Copy, Default)]
pub struct Headers<'a> {
    /// Value of `webhook-id`.
    pub id: Option<&'a [u8]>,
    /// Value of `webhook-timestamp`.
    pub timestamp: Option<&'a [u8]>,
    /// Value of `webhook-signature`.
    pub signature: Option<&'a [u8]>,
}

impl<'a> Headers<'a> {
    /// Builds the set from three UTF-8 values, a convenience for senders and
    /// tests.
    pub fn from_strs(id: &'a str, timestamp: &'a str, signature: &'a str) -> Self {
        Self {
            id: Some(id.as_bytes()),
            timestamp: Some(timestamp.as_bytes()),
            signature: Some(signature.as_bytes()),
        }
    }
}

impl fmt::Debug for Headers<'_> {
    /// Shows only which headers are present and their lengths.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Len(Option<usize>);
        impl fmt::Debug for Len {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Some(len) => write!(f, "<{len} bytes>"),
                    None => f.write_str("None"),
                }
            }
        }
        f.debug_struct("Headers")
            .field("id", &Len(self.id.map(<[u8]>::len)))
            .field("timestamp", &Len(self.timestamp.map(<[u8]>::len)))
            .field("signature", &Len(self.signature.map(<[u8]>::len)))
            .finish()
    }
}

/// Signature scheme of a `webhook-signature` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `v1`: HMAC-SHA256 with a shared secret.
    V1,
    /// `v1a`: Ed25519.
    V1a,
}

impl Scheme {
    /// The version prefix as written in the header.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::V1 => "v1",
            Scheme::V1a => "v1a",
        }
    }
}

/// A request whose signature and timestamp were accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    event_id: String,
    timestamp: i64,
    key_index: usize,
    scheme: Scheme,
    signature: Option<[u8; 64]>,
}

impl Verified {
    /// The validated `webhook-id`: 1 to 256 visible ASCII characters.
    pub fn event_id(&self) -> &str {
        &self.event_id
    }

    /// The `webhook-timestamp`, unix seconds.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// Index, in the `keys` passed to [`verify`], of the first key that
    /// matched: shows whether a provider still signs with the old key during
    /// a rotation.
    pub fn key_index(&self) -> usize {
        self.key_index
    }

    /// Scheme of the matching entry.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The `v1a` Ed25519 signature that verified, when the timestamp was sent in its canonical
    /// decimal form (no leading zeros): then anyone holding the provider's public key can verify
    /// it again over [`signed_content`] of the event id, [`Verified::timestamp`] and the body,
    /// which is how a KYT result reaches the signer as a signed fact. `None` for `v1` (a shared
    /// secret proves nothing to a third party) and for a non-canonical timestamp.
    pub fn signature(&self) -> Option<&[u8; 64]> {
        self.signature.as_ref()
    }
}

/// Why a request was refused. Never carries a header value, a signature or
/// any part of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// No verification key is configured for the endpoint: a configuration
    /// problem, not the sender's fault.
    #[error("no verification key is configured")]
    NoKeys,
    /// A required header is absent.
    #[error("missing {header} header")]
    MissingHeader {
        /// The absent header.
        header: HeaderName,
    },
    /// A header is present but malformed or out of limits.
    #[error("invalid {header} header: {reason}")]
    InvalidHeader {
        /// The refused header.
        header: HeaderName,
        /// Why, lowercase, without the value.
        reason: &'static str,
    },
    /// `webhook-timestamp` is further in the past than the tolerance.
    #[error("webhook-timestamp is too old")]
    TimestampTooOld,
    /// `webhook-timestamp` is further in the future than the tolerance.
    #[error("webhook-timestamp is too far in the future")]
    TimestampTooNew,
    /// No entry of `webhook-signature` was made by a configured key over this
    /// id, timestamp and body.
    #[error("no valid signature in webhook-signature")]
    NoValidSignature,
}

impl VerifyError {
    /// Stable machine-readable code: `no_keys`, `missing_header`,
    /// `invalid_header`, `timestamp_too_old`, `timestamp_too_new` or
    /// `no_valid_signature`.
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::NoKeys => "no_keys",
            VerifyError::MissingHeader { .. } => "missing_header",
            VerifyError::InvalidHeader { .. } => "invalid_header",
            VerifyError::TimestampTooOld => "timestamp_too_old",
            VerifyError::TimestampTooNew => "timestamp_too_new",
            VerifyError::NoValidSignature => "no_valid_signature",
        }
    }

    /// The header the error is about, if any.
    pub fn header(&self) -> Option<HeaderName> {
        match self {
            VerifyError::NoKeys => None,
            VerifyError::MissingHeader { header } | VerifyError::InvalidHeader { header, .. } => {
                Some(*header)
            }
            VerifyError::TimestampTooOld | VerifyError::TimestampTooNew => {
                Some(HeaderName::Timestamp)
            }
            VerifyError::NoValidSignature => Some(HeaderName::Signature),
        }
    }
}

fn invalid(header: HeaderName, reason: &'static str) -> VerifyError {
    VerifyError::InvalidHeader { header, reason }
}

/// Presence, non-emptiness, length and UTF-8 checks shared by all headers.
fn header_text(
    header: HeaderName,
    value: Option<&[u8]>,
    max_len: usize,
) -> Result<&str, VerifyError> {
    let Some(bytes) = value else {
        return Err(VerifyError::MissingHeader { header });
    };
    if bytes.is_empty() {
        return Err(invalid(header, "is empty"));
    }
    if bytes.len() > max_len {
        return Err(invalid(header, "is too long"));
    }
    std::str::from_utf8(bytes).map_err(|_| invalid(header, "is not valid utf-8"))
}

fn parse_id(value: Option<&[u8]>) -> Result<&str, VerifyError> {
    let id = header_text(HeaderName::Id, value, MAX_ID_LEN)?;
    if !id.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid(
            HeaderName::Id,
            "contains a character other than visible ascii",
        ));
    }
    Ok(id)
}

/// Returns the header text (signed as received) and its value.
fn parse_timestamp(value: Option<&[u8]>) -> Result<(&str, i64), VerifyError> {
    let text = header_text(HeaderName::Timestamp, value, MAX_TIMESTAMP_LEN)?;
    let mut seconds: i64 = 0;
    for b in text.bytes() {
        if !b.is_ascii_digit() {
            return Err(invalid(
                HeaderName::Timestamp,
                "is not a decimal number of seconds",
            ));
        }
        seconds = seconds
            .checked_mul(10)
            .and_then(|s| s.checked_add(i64::from(b - b'0')))
            .ok_or(invalid(HeaderName::Timestamp, "does not fit in 64 bits"))?;
    }
    Ok((text, seconds))
}

fn check_window(timestamp: i64, now_unix: i64, tolerance_secs: i64) -> Result<(), VerifyError> {
    let tolerance = i128::from(tolerance_secs.max(0));
    let age = i128::from(now_unix) - i128::from(timestamp);
    if age > tolerance {
        Err(VerifyError::TimestampTooOld)
    } else if -age > tolerance {
        Err(VerifyError::TimestampTooNew)
    } else {
        Ok(())
    }
}

/// One decoded entry of `webhook-signature`.
struct Entry {
    scheme: Scheme,
    bytes: [u8; 64],
    len: usize,
}

impl Entry {
    fn hmac_tag(&self) -> Option<&[u8]> {
        (self.scheme == Scheme::V1 && self.len == 32).then(|| &self.bytes[..32])
    }

    fn ed25519_signature(&self) -> Option<&[u8; 64]> {
        (self.scheme == Scheme::V1a && self.len == 64).then_some(&self.bytes)
    }
}

/// Splits and decodes `webhook-signature`, keeping only the entries of a
/// known scheme whose base64 decodes to at most 64 bytes.
fn parse_signatures(value: Option<&[u8]>) -> Result<Vec<Entry>, VerifyError> {
    let text = header_text(HeaderName::Signature, value, MAX_SIGNATURE_HEADER_LEN)?;
    let mut count = 0usize;
    let mut entries = Vec::new();
    for raw in text.split(' ').filter(|raw| !raw.is_empty()) {
        count += 1;
        if count > MAX_SIGNATURE_ENTRIES {
            return Err(invalid(HeaderName::Signature, "has too many entries"));
        }
        let Some((version, encoded)) = raw.split_once(',') else {
            continue;
        };
        let scheme = match version {
            "v1" => Scheme::V1,
            "v1a" => Scheme::V1a,
            _ => continue,
        };
        let mut bytes = [0u8; 64];
        if let Ok(len) = STANDARD.decode_slice(encoded, &mut bytes) {
            entries.push(Entry { scheme, bytes, len });
        }
    }
    if count == 0 {
        return Err(invalid(HeaderName::Signature, "has no entry"));
    }
    Ok(entries)
}

/// HMAC-SHA256 of `{id}.{timestamp}.{body}` under `secret`.
fn hmac_v1(secret: &SigningSecret, id: &str, timestamp: &str, body: &[u8]) -> [u8; 32] {
    // The block is the secret zero-padded to the SHA-256 block size, which
    // keys HMAC exactly like the unpadded secret (see `secret.rs`).
    let mut mac = HmacSha256::new(secret.hmac_block().into());
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// `{id}.{timestamp}.{body}` in one buffer, for Ed25519.
/// The bytes a Standard Webhooks signature covers: `{id}.{timestamp}.{body}`, the id and the
/// timestamp exactly as sent.
pub fn signed_content(id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(id.len() + timestamp.len() + body.len() + 2);
    content.extend_from_slice(id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(timestamp.as_bytes());
    content.push(b'.');
    content.extend_from_slice(body);
    content
}

/// Verifies a delivery: headers well formed, timestamp within
/// `tolerance_secs` of `now_unix` (a negative tolerance counts as 0), and at
/// least one `webhook-signature` entry made by one of `keys` over
/// `{webhook-id}.{webhook-timestamp}.{body}`.
///
/// `keys` are tried in order; the index of the first that matches is
/// reported in [`Verified::key_index`].
pub fn verify(
    keys: &[VerificationKey],
    headers: &Headers<'_>,
    body: &[u8],
    now_unix: i64,
    tolerance_secs: i64,
) -> Result<Verified, VerifyError> {
    if keys.is_empty() {
        return Err(VerifyError::NoKeys);
    }
    let id = parse_id(headers.id)?;
    let (timestamp_text, timestamp) = parse_timestamp(headers.timestamp)?;
    let entries = parse_signatures(headers.signature)?;
    check_window(timestamp, now_unix, tolerance_secs)?;

    let mut ed25519_content: Option<Vec<u8>> = None;
    for (key_index, key) in keys.iter().enumerate() {
        let scheme = match key {
            VerificationKey::Hmac(secret) => {
                let mut tags = entries.iter().filter_map(Entry::hmac_tag).peekable();
                if tags.peek().is_none() {
                    continue;
                }
                let expected = hmac_v1(secret, id, timestamp_text, body);
                let mut matched = subtle::Choice::from(0);
                for tag in tags {
                    matched |= expected.as_slice().ct_eq(tag);
                }
                bool::from(matched).then_some(None)
            }
            VerificationKey::Ed25519(public_key) => {
                ed25519_match(public_key, &entries, &mut ed25519_content, || {
                    signed_content(id, timestamp_text, body)
                })
                .map(Some)
            }
        };
        if let Some(matched) = scheme {
            let canonical = timestamp_text == timestamp.to_string();
            return Ok(Verified {
                event_id: id.to_owned(),
                timestamp,
                key_index,
                scheme: if matched.is_some() {
                    Scheme::V1a
                } else {
                    Scheme::V1
                },
                signature: matched.filter(|_| canonical),
            });
        }
    }
    Err(VerifyError::NoValidSignature)
}

/// The first `v1a` entry that verifies under `public_key`.
/// The signed content is built at most once per call to [`verify`].
fn ed25519_match(
    public_key: &Ed25519PublicKey,
    entries: &[Entry],
    content: &mut Option<Vec<u8>>,
    build: impl FnOnce() -> Vec<u8>,
) -> Option<[u8; 64]> {
    let mut signatures = entries
        .iter()
        .filter_map(Entry::ed25519_signature)
        .peekable();
    signatures.peek()?;
    let message = content.get_or_insert_with(build);
    signatures
        .find(|signature| public_key.verify(message, signature))
        .copied()
}

/// Signs a delivery with a shared secret and returns the `webhook-signature`
/// entry `v1,<base64>`. For senders, tests and benchmarks; [`verify`] accepts
/// the result only for an `id` of 1 to 256 visible ASCII characters and a
/// non-negative `timestamp`.
pub fn sign_v1(secret: &SigningSecret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let tag = hmac_v1(secret, id, &timestamp.to_string(), body);
    let mut entry = String::from("v1,");
    STANDARD.encode_string(tag, &mut entry);
    entry
}

/// Signs a delivery with an Ed25519 key and returns the `webhook-signature`
/// entry `v1a,<base64>`. Same caveats as [`sign_v1`].
pub fn sign_v1a(key: &Ed25519SigningKey, id: &str, timestamp: i64, body: &[u8]) -> String {
    let signature = key.sign(&signed_content(id, &timestamp.to_string(), body));
    let mut entry = String::from("v1a,");
    STANDARD.encode_string(signature, &mut entry);
    entry
}

#[cfg(test)]
mod tests;
