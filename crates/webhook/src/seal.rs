//! Raw webhook bodies encrypted at rest.
//!
//! The ingress keeps every verified body, for audit and replay, but a body can
//! carry customer data, so it is stored sealed with XChaCha20-Poly1305 under a
//! [`BodyKey`]. Each key has a 16-bit id stored next to the ciphertext: to
//! rotate, add a new key, seal with it, and keep the old one configured for
//! [`open`] until no row refers to it. Nonces are 24 random bytes, large
//! enough that random nonces never repeat in practice.
//!
//! The associated data binds a ciphertext to its row: the ingress passes
//! [`row_aad`] of the tenant, source and event id, so a sealed body copied
//! into another row fails to open.
//!
//! Key text form (configuration): `<id>:<base64 of 32 bytes>`, e.g.
//! `3:q83v...=`, with the id in decimal (0 to 65535) and padded standard
//! base64.

use std::fmt;

use crate::secret::SigningSecret;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use opledger_domain::TenantId;
use rand::RngCore;
use zeroize::Zeroizing;

/// Length of a body key, in bytes.
pub const BODY_KEY_LEN: usize = 32;
/// Length of a nonce, in bytes.
pub const NONCE_LEN: usize = 24;
/// Length of the Poly1305 tag appended to every ciphertext, in bytes.
pub const TAG_LEN: usize = 16;

/// Domain separation prefix of [`row_aad`].
const ROW_AAD_DOMAIN: &[u8] = b"opledger/webhook-body/v1\0";

/// Version byte of [`Sealed::to_bytes`].
const ENCODING_V1: u8 = 1;

/// A key for sealing bodies, with its id. Zeroized on drop; `Debug` shows only
/// the id.
#[derive(Clone)]
pub struct BodyKey {
    id: u16,
    key: Zeroizing<[u8; BODY_KEY_LEN]>,
}

/// Why a body key's text form was refused. Never carries the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyKeyError {
    /// No `:` between the id and the key.
    #[error("body key must be `<id>:<base64 key>`")]
    MissingSeparator,
    /// The id is not a decimal number from 0 to 65535.
    #[error("body key id must be a decimal number from 0 to 65535")]
    InvalidId,
    /// The key is not padded standard base64.
    #[error("body key is not valid padded standard base64")]
    InvalidBase64,
    /// The key does not decode to 32 bytes.
    #[error("body key must decode to 32 bytes")]
    InvalidLength,
    /// A key list is empty or names the same id twice.
    #[error("body key list must hold at least one key and no id twice")]
    EmptyOrDuplicate,
}

impl BodyKey {
    /// Wraps a 32-byte key under `id`.
    pub fn from_bytes(id: u16, key: &[u8; BODY_KEY_LEN]) -> Self {
        Self {
            id,
            key: Zeroizing::new(*key),
        }
    }

    /// Parses the `<id>:<base64 of 32 bytes>` configuration text.
    pub fn parse(text: &str) -> Result<Self, BodyKeyError> {
        let (id_text, encoded) = text.split_once(':').ok_or(BodyKeyError::MissingSeparator)?;
        if id_text.is_empty() || id_text.len() > 5 || !id_text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(BodyKeyError::InvalidId);
        }
        let id: u16 = id_text.parse().map_err(|_| BodyKeyError::InvalidId)?;
        // 44 characters encode 32 bytes; refuse longer text before decoding.
        if encoded.len() > 44 {
            return Err(BodyKeyError::InvalidLength);
        }
        let mut key = Zeroizing::new([0u8; BODY_KEY_LEN + 1]);
        let len = STANDARD
            .decode_slice(encoded, key.as_mut_slice())
            .map_err(|err| match err {
                base64::DecodeSliceError::OutputSliceTooSmall => BodyKeyError::InvalidLength,
                base64::DecodeSliceError::DecodeError(_) => BodyKeyError::InvalidBase64,
            })?;
        if len != BODY_KEY_LEN {
            return Err(BodyKeyError::InvalidLength);
        }
        let mut exact = Zeroizing::new([0u8; BODY_KEY_LEN]);
        exact.copy_from_slice(&key[..BODY_KEY_LEN]);
        Ok(Self { id, key: exact })
    }

    /// Mints a random key under `id`.
    pub fn generate(id: u16) -> Self {
        let mut key = Zeroizing::new([0u8; BODY_KEY_LEN]);
        rand::rng().fill_bytes(key.as_mut_slice());
        Self { id, key }
    }

    /// The key id, stored next to each ciphertext.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The `<id>:<base64>` configuration text, in zeroizing memory, for an
    /// operator tool to print once.
    pub fn to_config_string(&self) -> Zeroizing<String> {
        let mut text = Zeroizing::new(String::with_capacity(6 + 44));
        text.push_str(&self.id.to_string());
        text.push(':');
        STANDARD.encode_string(self.key.as_slice(), &mut text);
        text
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        // The cipher keeps its own copy of the key and zeroizes it on drop.
        XChaCha20Poly1305::new(<&Key>::from(&*self.key))
    }
}

impl fmt::Debug for BodyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyKey")
            .field("id", &self.id)
            .field("key", &format_args!("<redacted>"))
            .finish()
    }
}

/// A sealed body: what the ingress stores.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed {
    /// Id of the [`BodyKey`] that sealed it.
    pub key_id: u16,
    /// The random nonce.
    pub nonce: [u8; NONCE_LEN],
    /// The ciphertext followed by the 16-byte authentication tag.
    pub ciphertext: Vec<u8>,
}

impl Sealed {
    /// One self-describing byte string for a single column: version byte
    /// `0x01`, key id (2 bytes, big-endian), nonce (24 bytes), ciphertext.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + 2 + NONCE_LEN + self.ciphertext.len());
        out.push(ENCODING_V1);
        out.extend_from_slice(&self.key_id.to_be_bytes());
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.ciphertext);
        out
    }

    /// Reads the form written by [`to_bytes`](Self::to_bytes); `None` when the
    /// version is unknown or the input is shorter than header plus tag.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (&version, rest) = bytes.split_first()?;
        if version != ENCODING_V1 || rest.len() < 2 + NONCE_LEN + TAG_LEN {
            return None;
        }
        let (id, rest) = rest.split_at(2);
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        Some(Self {
            key_id: u16::from_be_bytes([id[0], id[1]]),
            nonce: nonce.try_into().ok()?,
            ciphertext: ciphertext.to_vec(),
        })
    }
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealed")
            .field("key_id", &self.key_id)
            .field("ciphertext_len", &self.ciphertext.len())
            .finish_non_exhaustive()
    }
}

/// Why a body could not be sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The plaintext exceeds what XChaCha20-Poly1305 can encrypt under one
    /// nonce (about 256 GiB).
    #[error("body is too large to seal")]
    TooLarge,
}

/// Why a sealed body could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// No configured key has this id (it was rotated out too early).
    #[error("no body key with id {key_id} is configured")]
    UnknownKey {
        /// The key id stored with the ciphertext.
        key_id: u16,
    },
    /// Authentication failed: wrong key bytes under that id, altered
    /// ciphertext, nonce or tag, or different associated data.
    #[error("sealed body failed authentication")]
    Corrupt,
}

impl OpenError {
    /// Stable machine-readable code: `unknown_key` or `corrupt`.
    pub fn code(&self) -> &'static str {
        match self {
            OpenError::UnknownKey { .. } => "unknown_key",
            OpenError::Corrupt => "corrupt",
        }
    }
}

/// Encrypts `plaintext` under `key` with a fresh random nonce, authenticating
/// `aad` (not stored: the same bytes must be passed to [`open`]).
pub fn seal(key: &BodyKey, plaintext: &[u8], aad: &[u8]) -> Result<Sealed, SealError> {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    let ciphertext = key
        .cipher()
        .encrypt(
            <&XNonce>::from(&nonce),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .map_err(|_| SealError::TooLarge)?;
    Ok(Sealed {
        key_id: key.id,
        nonce,
        ciphertext,
    })
}

/// Decrypts `sealed` with the first of `keys` whose id matches, checking
/// `aad`. The plaintext is returned in zeroizing memory.
pub fn open(
    keys: &[BodyKey],
    sealed: &Sealed,
    aad: &[u8],
) -> Result<Zeroizing<Vec<u8>>, OpenError> {
    let key = keys
        .iter()
        .find(|key| key.id == sealed.key_id)
        .ok_or(OpenError::UnknownKey {
            key_id: sealed.key_id,
        })?;
    key.cipher()
        .decrypt(
            <&XNonce>::from(&sealed.nonce),
            Payload {
                msg: &sealed.ciphertext,
                aad,
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| OpenError::Corrupt)
}

/// The associated data binding a sealed body to its row: a domain prefix,
/// then the tenant id (16 bytes), then `source` and `event_id`, each preceded
/// by its length as 8 big-endian bytes, so that no two different triples give
/// the same bytes.
pub fn row_aad(tenant_id: &TenantId, source: &str, event_id: &str) -> Vec<u8> {
    let mut aad =
        Vec::with_capacity(ROW_AAD_DOMAIN.len() + 16 + 16 + source.len() + event_id.len());
    aad.extend_from_slice(ROW_AAD_DOMAIN);
    aad.extend_from_slice(tenant_id.as_uuid().as_bytes());
    for part in [source, event_id] {
        // A usize always fits in 64 bits on the platforms Rust supports.
        let len = u64::try_from(part.len()).unwrap_or(u64::MAX);
        aad.extend_from_slice(&len.to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

const SECRET_AAD_DOMAIN: &[u8] = b"opledger/webhook-secret/v1\0";

/// The associated data binding a sealed endpoint secret to its endpoint id.
pub fn secret_aad(endpoint_id: &str) -> Vec<u8> {
    let mut aad = Vec::with_capacity(SECRET_AAD_DOMAIN.len() + endpoint_id.len());
    aad.extend_from_slice(SECRET_AAD_DOMAIN);
    aad.extend_from_slice(endpoint_id.as_bytes());
    aad
}

/// Seals an endpoint's HMAC secret (its `whsec_` text) for storage, bound to the endpoint.
pub fn seal_secret(
    key: &BodyKey,
    endpoint_id: &str,
    secret: &SigningSecret,
) -> Result<Sealed, SealError> {
    let text = secret.to_whsec_string();
    seal(key, text.as_bytes(), &secret_aad(endpoint_id))
}

/// Opens a secret sealed by [`seal_secret`] for the same endpoint.
pub fn open_secret(
    keys: &[BodyKey],
    endpoint_id: &str,
    sealed: &Sealed,
) -> Result<SigningSecret, OpenError> {
    let text = open(keys, sealed, &secret_aad(endpoint_id))?;
    std::str::from_utf8(&text)
        .ok()
        .and_then(|t| SigningSecret::parse(t).ok())
        .ok_or(OpenError::Corrupt)
}

/// Parses a comma-separated list of keys in [`BodyKey::parse`] form (the first one seals). An
/// empty list is an error, and so are two keys with the same id.
pub fn parse_key_list(text: &str) -> Result<Vec<BodyKey>, BodyKeyError> {
    let keys: Vec<BodyKey> = text
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(BodyKey::parse)
        .collect::<Result<_, _>>()?;
    let mut ids: Vec<u16> = keys.iter().map(BodyKey::id).collect();
    ids.sort_unstable();
    ids.dedup();
    if keys.is_empty() || ids.len() != keys.len() {
        return Err(BodyKeyError::EmptyOrDuplicate);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests;
