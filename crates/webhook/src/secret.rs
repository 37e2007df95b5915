//! Webhook signing keys in their Standard Webhooks text forms.
//!
//! A provider and opledger share either a symmetric secret (`whsec_` + base64
//! of 24 to 64 random bytes, signature scheme `v1`, HMAC-SHA256), or the
//! provider signs with an Ed25519 key of which we only hold the public half
//! (`whpk_` + base64 of 32 bytes, scheme `v1a`). The prefix is mandatory: a
//! value pasted into the wrong configuration slot is refused instead of being
//! silently used as key material.
//!
//! Base64 is the standard alphabet with canonical padding. Secret material
//! lives in zeroizing memory, `Debug` prints `<redacted>`, and no error
//! carries any part of the text it refused.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use rand::RngCore;
use zeroize::Zeroizing;

/// Prefix of a symmetric signing secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Prefix of an Ed25519 public key.
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";
/// Prefix of an Ed25519 signing key (32-byte seed).
pub const SIGNING_KEY_PREFIX: &str = "whsk_";
/// Fewest secret bytes accepted in a `whsec_` secret.
pub const MIN_SECRET_LEN: usize = 24;
/// Most secret bytes accepted in a `whsec_` secret.
pub const MAX_SECRET_LEN: usize = 64;
/// Number of random bytes in a secret minted by [`SigningSecret::generate`].
pub const GENERATED_SECRET_LEN: usize = 32;

/// Block size of SHA-256, the HMAC key block.
const HMAC_BLOCK_LEN: usize = 64;

// HMAC pads a key shorter than the hash block with zeros (RFC 2104, step 1),
// so storing the secret zero-padded to the block and keying HMAC with the
// whole block is the same function. That only holds while no secret can be
// longer than the block.
const _: () = assert!(MAX_SECRET_LEN <= HMAC_BLOCK_LEN);

/// Longest base64 text looked at: the encoding of 64 bytes is 88 characters.
const MAX_KEY_TEXT_LEN: usize = 88;

/// Why a key's text form was refused. Never carries the refused text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The text does not start with the prefix of its kind.
    #[error("key must start with `{expected}`")]
    MissingPrefix {
        /// The required prefix, e.g. `"whsec_"`.
        expected: &'static str,
    },
    /// The part after the prefix is not padded standard base64.
    #[error("key is not valid padded standard base64")]
    InvalidBase64,
    /// The decoded key has the wrong number of bytes.
    #[error("key must decode to {expected}")]
    InvalidLength {
        /// The accepted length, in words, e.g. `"24 to 64 bytes"`.
        expected: &'static str,
    },
    /// The 32 bytes are not an acceptable Ed25519 public key (not a curve
    /// point, or a weak small-order point).
    #[error("key is not a valid ed25519 public key")]
    InvalidPublicKey,
}

/// Strips `prefix` and decodes the rest into `out`, returning the number of
/// bytes written. Anything longer than `out` is an [`KeyError::InvalidLength`].
fn decode_prefixed(
    text: &str,
    prefix: &'static str,
    out: &mut [u8],
    expected: &'static str,
) -> Result<usize, KeyError> {
    let Some(encoded) = text.strip_prefix(prefix) else {
        return Err(KeyError::MissingPrefix { expected: prefix });
    };
    if encoded.len() > MAX_KEY_TEXT_LEN {
        return Err(KeyError::InvalidLength { expected });
    }
    STANDARD
        .decode_slice(encoded, out)
        .map_err(|err| match err {
            base64::DecodeSliceError::OutputSliceTooSmall => KeyError::InvalidLength { expected },
            base64::DecodeSliceError::DecodeError(_) => KeyError::InvalidBase64,
        })
}

/// Writes `prefix` followed by the base64 of `bytes` into zeroizing memory.
fn encode_prefixed(prefix: &str, bytes: &[u8]) -> Zeroizing<String> {
    let mut text = Zeroizing::new(String::with_capacity(prefix.len() + MAX_KEY_TEXT_LEN));
    text.push_str(prefix);
    STANDARD.encode_string(bytes, &mut text);
    text
}

/// Symmetric secret shared with a provider, used for `v1` (HMAC-SHA256)
/// signatures. Text form: `whsec_` + base64 of 24 to 64 bytes.
#[derive(Clone)]
pub struct SigningSecret {
    /// The secret bytes followed by zeros up to the HMAC-SHA256 block size.
    block: Zeroizing<[u8; HMAC_BLOCK_LEN]>,
    /// Number of meaningful bytes at the start of `block`.
    len: usize,
}

impl SigningSecret {
    /// Parses the `whsec_<base64>` text form. The prefix is required.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        // Room for 66 bytes so that 65- and 66-byte secrets are reported as
        // a bad length rather than as a decoding failure.
        let mut decoded = Zeroizing::new([0u8; HMAC_BLOCK_LEN + 2]);
        let len = decode_prefixed(
            text,
            SECRET_PREFIX,
            decoded.as_mut_slice(),
            "24 to 64 bytes",
        )?;
        Self::from_bytes(&decoded[..len])
    }

    /// Wraps raw secret bytes (24 to 64 of them).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        if !(MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&bytes.len()) {
            return Err(KeyError::InvalidLength {
                expected: "24 to 64 bytes",
            });
        }
        let mut block = Zeroizing::new([0u8; HMAC_BLOCK_LEN]);
        block[..bytes.len()].copy_from_slice(bytes);
        Ok(Self {
            block,
            len: bytes.len(),
        })
    }

    /// Mints a fresh secret of [`GENERATED_SECRET_LEN`] random bytes.
    pub fn generate() -> Self {
        let mut block = Zeroizing::new([0u8; HMAC_BLOCK_LEN]);
        rand::rng().fill_bytes(&mut block[..GENERATED_SECRET_LEN]);
        Self {
            block,
            len: GENERATED_SECRET_LEN,
        }
    }

    /// The `whsec_<base64>` text form, in zeroizing memory, for an operator
    /// tool to print once and hand to the provider.
    pub fn to_whsec_string(&self) -> Zeroizing<String> {
        encode_prefixed(SECRET_PREFIX, self.as_bytes())
    }

    /// The secret bytes.
    fn as_bytes(&self) -> &[u8] {
        &self.block[..self.len]
    }

    /// The secret as a full HMAC-SHA256 key block (zero-padded).
    pub(crate) fn hmac_block(&self) -> &[u8; HMAC_BLOCK_LEN] {
        &self.block
    }
}

impl PartialEq for SigningSecret {
    /// Constant-time comparison of the secret bytes.
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq;
        self.len == other.len && bool::from(self.block.as_slice().ct_eq(other.block.as_slice()))
    }
}

impl Eq for SigningSecret {}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

/// Public half of a provider's Ed25519 key, used for `v1a` signatures.
/// Text form: `whpk_` + base64 of the 32-byte compressed point.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Ed25519PublicKey(VerifyingKey);

impl Ed25519PublicKey {
    /// Parses the `whpk_<base64>` text form. Refuses bytes that are not a
    /// curve point and weak (small-order) points.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut decoded = [0u8; 34];
        let len = decode_prefixed(text, PUBLIC_KEY_PREFIX, &mut decoded, "32 bytes")?;
        let bytes: &[u8; 32] =
            decoded
                .get(..len)
                .and_then(|b| b.try_into().ok())
                .ok_or(KeyError::InvalidLength {
                    expected: "32 bytes",
                })?;
        Self::from_bytes(bytes)
    }

    /// Wraps the 32-byte compressed point. Refuses invalid and weak points.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, KeyError> {
        let key = VerifyingKey::from_bytes(bytes).map_err(|_| KeyError::InvalidPublicKey)?;
        if key.is_weak() {
            return Err(KeyError::InvalidPublicKey);
        }
        Ok(Self(key))
    }

    /// The 32-byte compressed point.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// The `whpk_<base64>` text form.
    pub fn to_whpk_string(&self) -> String {
        let mut text = String::from(PUBLIC_KEY_PREFIX);
        STANDARD.encode_string(self.0.as_bytes(), &mut text);
        text
    }

    /// Checks a 64-byte signature over `message` with the strict rules
    /// (canonical encodings only, no weak keys).
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let signature = ed25519_dalek::Signature::from_bytes(signature);
        self.0.verify_strict(message, &signature).is_ok()
    }
}

impl fmt::Debug for Ed25519PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Ed25519PublicKey")
            .field(&self.to_whpk_string())
            .finish()
    }
}

/// Ed25519 signing key for `v1a` signatures, for a sender tool, tests and
/// benchmarks (opledger itself only verifies). Text form: `whsk_` + base64 of
/// the 32-byte seed. Zeroized on drop.
#[derive(Clone)]
pub struct Ed25519SigningKey(SigningKey);

impl Ed25519SigningKey {
    /// Parses the `whsk_<base64 of the 32-byte seed>` text form.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        let mut decoded = Zeroizing::new([0u8; 34]);
        let len = decode_prefixed(text, SIGNING_KEY_PREFIX, decoded.as_mut_slice(), "32 bytes")?;
        let seed: &[u8; 32] =
            decoded
                .get(..len)
                .and_then(|b| b.try_into().ok())
                .ok_or(KeyError::InvalidLength {
                    expected: "32 bytes",
                })?;
        Ok(Self::from_seed(seed))
    }

    /// Builds the key from its 32-byte seed.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self(SigningKey::from_bytes(seed))
    }

    /// Mints a fresh random key.
    pub fn generate() -> Self {
        let mut seed = Zeroizing::new([0u8; 32]);
        rand::rng().fill_bytes(seed.as_mut_slice());
        Self::from_seed(&seed)
    }

    /// The matching public key, to configure on the verifying side.
    pub fn public_key(&self) -> Ed25519PublicKey {
        Ed25519PublicKey(self.0.verifying_key())
    }

    /// The `whsk_<base64>` text form, in zeroizing memory.
    pub fn to_whsk_string(&self) -> Zeroizing<String> {
        let seed = Zeroizing::new(self.0.to_bytes());
        encode_prefixed(SIGNING_KEY_PREFIX, seed.as_slice())
    }

    /// Signs `message`.
    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.0.sign(message).to_bytes()
    }
}

impl fmt::Debug for Ed25519SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ed25519SigningKey(<redacted>)")
    }
}

/// One key an endpoint accepts signatures from. An endpoint holds a list of
/// them so a provider can rotate: during the overlap both the old and the new
/// key are configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerificationKey {
    /// Shared secret, matches `v1` entries.
    Hmac(SigningSecret),
    /// Provider's public key, matches `v1a` entries.
    Ed25519(Ed25519PublicKey),
}

impl VerificationKey {
    /// Parses either text form, chosen by prefix: `whsec_...` or `whpk_...`.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        if text.starts_with(PUBLIC_KEY_PREFIX) {
            Ed25519PublicKey::parse(text).map(Self::Ed25519)
        } else {
            SigningSecret::parse(text).map(Self::Hmac)
        }
    }
}

impl From<SigningSecret> for VerificationKey {
    fn from(secret: SigningSecret) -> Self {
        Self::Hmac(secret)
    }
}

impl From<Ed25519PublicKey> for VerificationKey {
    fn from(key: Ed25519PublicKey) -> Self {
        Self::Ed25519(key)
    }
}

#[cfg(test)]
mod tests;
