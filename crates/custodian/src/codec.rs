//! Small encodings every profile shares: addresses and hashes as text, SHA-256, base64url, and our
//! reference as sent.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use opledger_domain::evidence::{Address, Hash32};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Our reference as every provider sees it: lowercase, hyphenated, 36 characters.
pub fn reference_text(reference: Uuid) -> String {
    reference.hyphenated().to_string()
}

/// Whether `text` is `reference` as a provider echoes it back (any case).
pub fn is_reference(text: &str, reference: Uuid) -> bool {
    text.eq_ignore_ascii_case(&reference_text(reference))
}

/// An address as sent: `0x` and 40 lowercase hex digits.
pub fn address_text(address: &Address) -> String {
    format!("0x{}", hex::encode(address))
}

/// An address from an answer: `0x` (or `0X`) and 40 hex digits of any case.
pub fn parse_address(text: &str) -> Option<Address> {
    opledger_domain::evidence::parse_address(text)
}

/// A transaction hash from an answer: 64 hex digits of any case, with or without `0x`.
pub fn parse_hash(text: &str) -> Option<Hash32> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.len() != 64 {
        return None;
    }
    let mut out = [0_u8; 32];
    hex::decode_to_slice(digits, &mut out).ok()?;
    Some(out)
}

/// A hash that may be absent: `None` for an absent or empty text, `Err` for one that is not a
/// hash.
pub fn parse_optional_hash(text: Option<&str>) -> Result<Option<Hash32>, ()> {
    match text {
        None | Some("") => Ok(None),
        Some(text) => parse_hash(text).map(Some).ok_or(()),
    }
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// base64url without padding.
pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// base64url without padding, decoded strictly (padding and other alphabets refused).
pub fn b64url_decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

/// `text` percent-encoded for a query value (everything but RFC 3986's unreserved characters).
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Whether `text` is usable as one path segment or identifier in a signed URL: 1 to 128
/// characters of `[A-Za-z0-9_.-]`, not dots alone (`.` and `..` are path steps, which a URL
/// normalises away).
pub fn is_plain_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 128
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !text.bytes().all(|b| b == b'.')
}
