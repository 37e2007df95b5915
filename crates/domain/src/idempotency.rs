//! Client-supplied idempotency keys.
//!
//! A key names one intended withdrawal: retrying with the same key and the same
//! payload must never pay twice. Keys are treated as secrets: they are never
//! displayed, their `Debug` is redacted, errors never echo them, and the store
//! keeps only [`IdempotencyKey::digest`]. The parser also refuses values that
//! look like personal or financial data (emails, on-chain addresses, account
//! numbers) or that are too guessable to be safe.

use std::fmt;

use sha2::{Digest, Sha256};

/// Minimum key length in bytes.
pub const MIN_LEN: usize = 16;
/// Maximum key length in bytes.
pub const MAX_LEN: usize = 255;
/// Minimum number of distinct characters in a key.
pub const MIN_DISTINCT_CHARS: usize = 6;
/// Minimum estimated entropy of the whole key in bits: the empirical Shannon entropy of its
/// characters times its length. A per-character threshold would refuse some random hex keys (a
/// 32-digit UUID can repeat digits enough to dip below 3 bits per character); a total does not,
/// while short keys with little variety still fail. About 1 in 25,000 random 16-digit hex keys is
/// refused by these estimates; 32 or more random characters (a UUID) always pass.
pub const MIN_ENTROPY_BITS: f64 = 32.0;
/// Minimum empirical Shannon entropy per character, in bits: low enough that random hex passes
/// (it averages above 3.2), high enough to refuse long runs of one character.
pub const MIN_ENTROPY_BITS_PER_CHAR: f64 = 2.0;

/// Domain-separation prefix hashed before the key bytes in [`IdempotencyKey::digest`].
const DIGEST_DOMAIN: &[u8] = b"opledger/idempotency-key/v1\x00";

/// Why a string was refused as an idempotency key. Messages never include the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdempotencyKeyError {
    /// No key was given (empty string).
    #[error("idempotency key is missing")]
    Missing,
    /// The key is shorter than 16 bytes.
    #[error("idempotency key is shorter than 16 bytes")]
    TooShort,
    /// The key is longer than 255 bytes.
    #[error("idempotency key is longer than 255 bytes")]
    TooLong,
    /// The key contains a character outside `A-Z a-z 0-9 - _ . :`.
    #[error(
        "idempotency key contains a character outside ascii letters, digits, '-', '_', '.' and ':'"
    )]
    InvalidCharacter,
    /// The key contains '@' and may be an email address.
    #[error("idempotency key looks like an email address")]
    LooksLikeEmail,
    /// The key contains an EVM-style address (`0x` and 40 hex digits).
    #[error("idempotency key looks like an on-chain address")]
    LooksLikeAddress,
    /// The key is made only of digits and may be an account or card number.
    #[error("idempotency key looks like an account or card number")]
    LooksLikeAccountNumber,
    /// The key has too few distinct characters or too little estimated entropy in total.
    #[error("idempotency key has too little entropy")]
    LowEntropy,
}

/// A validated idempotency key. Deliberately has no `Display`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Validates `text` as an idempotency key.
    ///
    /// Checks, in order: missing, email shape, length, charset, address shape,
    /// digits only, entropy.
    pub fn parse(text: &str) -> Result<Self, IdempotencyKeyError> {
        if text.is_empty() {
            return Err(IdempotencyKeyError::Missing);
        }
        if text.contains('@') {
            return Err(IdempotencyKeyError::LooksLikeEmail);
        }
        if text.len() < MIN_LEN {
            return Err(IdempotencyKeyError::TooShort);
        }
        if text.len() > MAX_LEN {
            return Err(IdempotencyKeyError::TooLong);
        }
        let bytes = text.as_bytes();
        if !bytes.iter().copied().all(is_key_byte) {
            return Err(IdempotencyKeyError::InvalidCharacter);
        }
        if contains_evm_address(bytes) {
            return Err(IdempotencyKeyError::LooksLikeAddress);
        }
        if bytes.iter().all(u8::is_ascii_digit) {
            return Err(IdempotencyKeyError::LooksLikeAccountNumber);
        }
        if is_low_entropy(bytes) {
            return Err(IdempotencyKeyError::LowEntropy);
        }
        Ok(Self(text.to_owned()))
    }

    /// Returns the key in clear. Every call site is a place where a secret leaves
    /// this type, so keep them few and visible in review.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// SHA-256 of `b"opledger/idempotency-key/v1\x00"` followed by the key bytes.
    /// This digest is what the store keeps; the key itself is never persisted.
    pub fn digest(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(DIGEST_DOMAIN);
        hasher.update(self.0.as_bytes());
        hasher.finalize().into()
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdempotencyKey(<redacted>)")
    }
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':')
}

/// True if `bytes` contains `0x` (either case) followed by 40 hex digits.
fn contains_evm_address(bytes: &[u8]) -> bool {
    bytes.windows(42).any(|w| {
        w[0] == b'0' && (w[1] == b'x' || w[1] == b'X') && w[2..].iter().all(u8::is_ascii_hexdigit)
    })
}

/// Too few distinct characters, or estimated total entropy below the threshold.
fn is_low_entropy(bytes: &[u8]) -> bool {
    let mut counts = [0usize; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    let distinct = counts.iter().filter(|&&c| c > 0).count();
    if distinct < MIN_DISTINCT_CHARS {
        return true;
    }
    // Entropy is a heuristic on the key's shape, never used for money.
    let total = bytes.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = c as f64 / total;
            -p * p.log2()
        })
        .sum();
    entropy < MIN_ENTROPY_BITS_PER_CHAR || entropy * total < MIN_ENTROPY_BITS
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use uuid::Uuid;

    /// `len` characters drawn from `alphabet` (power-of-two size) using v4 UUID randomness.
    fn random_token(alphabet: &[u8], len: usize) -> String {
        let mask = alphabet.len() - 1;
        let mut out = String::with_capacity(len);
        while out.len() < len {
            for b in Uuid::new_v4().into_bytes() {
                if out.len() < len {
                    out.push(char::from(alphabet[usize::from(b) & mask]));
                }
            }
        }
        out
    }

    fn err(text: &str) -> IdempotencyKeyError {
        IdempotencyKey::parse(text).expect_err("key should be refused")
    }

    #[test]
    fn accepts_common_random_key_formats() {
        for _ in 0..2000 {
            let v4 = Uuid::new_v4().to_string();
            let v7 = Uuid::now_v7().to_string();
            let simple = Uuid::new_v4().simple().to_string();
            let b64 = random_token(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                32,
            );
            let ulid = format!(
                "01HZX7K3M9{}",
                random_token(b"0123456789ABCDEFGHJKMNPQRSTVWXYZ", 16)
            );
            for key in [v4, v7, simple, b64, ulid] {
                assert!(IdempotencyKey::parse(&key).is_ok(), "{key}");
            }
        }
        for key in [
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",           // ULID
            "01HZX7K3M9Q2W8E5R4T6Y1V0ZP",           // ULID
            "9f86d081884c7d659a2feaa0c55ad015",     // 32-char hex
            "q2Xv_7Lm-Pz9KaR3sT0uWb4yHc8NdEfG",     // base64url token
            "order:2024-05-17:retry-3f9a1c7e",      // structured with randomness
            "tenant.acme:withdrawal:7f3e9b2a-11c4", // structured
        ] {
            assert!(IdempotencyKey::parse(key).is_ok(), "{key}");
        }
    }

    #[test]
    fn refuses_with_specific_reasons() {
        use IdempotencyKeyError::*;
        assert_eq!(err(""), Missing);
        assert_eq!(err("abc123"), TooShort);
        assert_eq!(err(&"aB3-".repeat(64)), TooLong);
        assert_eq!(err("alice@example.com"), LooksLikeEmail);
        assert_eq!(err("a@b"), LooksLikeEmail);
        assert_eq!(err("alice+tag@example.com!"), LooksLikeEmail);
        assert_eq!(err("key with spaces 12345"), InvalidCharacter);
        assert_eq!(err("key/with/slash/12345"), InvalidCharacter);
        assert_eq!(err("kéy-unicode-123456"), InvalidCharacter);
        assert_eq!(
            err("0x52908400098527886E0F7030069857D2E4169EE7"),
            LooksLikeAddress
        );
        assert_eq!(
            err("pay-0X52908400098527886e0f7030069857d2e4169ee7-1"),
            LooksLikeAddress
        );
        assert_eq!(err("4111111111111111"), LooksLikeAccountNumber);
        assert_eq!(err("1111222233334444"), LooksLikeAccountNumber);
        assert_eq!(err("aaaaaaaaaaaaaaaa"), LowEntropy);
        assert_eq!(err("abababababababab"), LowEntropy);
        assert_eq!(err("abcdeabcdeabcdeabcde"), LowEntropy);
        assert_eq!(
            err("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabcdefgh"),
            LowEntropy
        );
    }

    #[test]
    fn short_hex_after_0x_is_not_an_address() {
        assert!(IdempotencyKey::parse("0x5290840009852788-ref-k7Q").is_ok());
    }

    #[test]
    fn debug_is_redacted_and_expose_returns_key() {
        let text = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
        let key = IdempotencyKey::parse(text).expect("valid key");
        assert_eq!(format!("{key:?}"), "IdempotencyKey(<redacted>)");
        assert_eq!(
            format!("{:?}", Some(&key)),
            "Some(IdempotencyKey(<redacted>))"
        );
        assert_eq!(key.expose(), text);
    }

    #[test]
    fn digest_is_domain_separated_sha256() {
        let text = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
        let key = IdempotencyKey::parse(text).expect("valid key");
        let mut expected = Sha256::new();
        expected.update(b"opledger/idempotency-key/v1\x00");
        expected.update(text.as_bytes());
        let expected: [u8; 32] = expected.finalize().into();
        assert_eq!(key.digest(), expected);
        let plain: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        assert_ne!(key.digest(), plain);
        // Independently computed with Python hashlib.
        assert_eq!(
            hex::encode(key.digest()),
            "a52bc76eaa4dc2d369900b27199cb8cc6715d5d62c3670fa187a0ec46f7ea95a"
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics_and_errors_never_echo_input(s in any::<String>()) {
            if let Err(e) = IdempotencyKey::parse(&s) {
                let msg = e.to_string();
                if s.chars().count() >= 8 {
                    prop_assert!(!msg.contains(&s));
                }
                prop_assert_eq!(msg.clone(), msg.trim_end_matches(['.', '!']).to_string());
            }
        }

        #[test]
        fn printable_ascii_inputs_never_echoed(s in "[ -~]{8,300}") {
            if let Err(e) = IdempotencyKey::parse(&s) {
                prop_assert!(!e.to_string().contains(&s));
            }
        }
    }
}
