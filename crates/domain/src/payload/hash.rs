//! The SHA-256 digest identifying a withdrawal payload.

use std::fmt;

/// Why bytes or text could not be turned into a [`PayloadHash`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PayloadHashError {
    /// The input did not hold exactly 32 bytes.
    #[error("payload hash must be 32 bytes, got {actual}")]
    WrongLength {
        /// Number of bytes that were given.
        actual: usize,
    },
    /// The text is not 64 hexadecimal digits.
    #[error("payload hash must be 64 hex digits")]
    InvalidHex,
}

/// SHA-256 of a payload's canonical bytes (see `WithdrawalPayload::canonical_bytes`).
#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
pub struct PayloadHash([u8; 32]);

impl PayloadHash {
    /// Wraps raw digest bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The raw digest bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hexadecimal, 64 characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hexadecimal digits (either case).
    pub fn from_hex(text: &str) -> Result<Self, PayloadHashError> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(text, &mut out).map_err(|_| PayloadHashError::InvalidHex)?;
        Ok(Self(out))
    }
}

impl TryFrom<&[u8]> for PayloadHash {
    type Error = PayloadHashError;

    fn try_from(bytes: &[u8]) -> Result<Self, Self::Error> {
        <[u8; 32]>::try_from(bytes)
            .map(Self)
            .map_err(|_| PayloadHashError::WrongLength {
                actual: bytes.len(),
            })
    }
}

impl fmt::Display for PayloadHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_display() {
        let mut bytes = [0u8; 32];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = u8::try_from(i * 7).expect("small") ^ 0xa5;
        }
        let h = PayloadHash::from_bytes(bytes);
        let hex = h.to_hex();
        assert_eq!(hex.len(), 64);
        assert_eq!(hex, hex.to_ascii_lowercase());
        assert_eq!(h.to_string(), hex);
        assert_eq!(PayloadHash::from_hex(&hex), Ok(h));
        assert_eq!(PayloadHash::from_hex(&hex.to_ascii_uppercase()), Ok(h));
        assert_eq!(h.as_bytes(), &bytes);
    }

    #[test]
    fn refuses_bad_input() {
        assert_eq!(PayloadHash::from_hex(""), Err(PayloadHashError::InvalidHex));
        assert_eq!(
            PayloadHash::from_hex(&"a".repeat(63)),
            Err(PayloadHashError::InvalidHex)
        );
        assert_eq!(
            PayloadHash::from_hex(&"a".repeat(66)),
            Err(PayloadHashError::InvalidHex)
        );
        assert_eq!(
            PayloadHash::from_hex(&"g".repeat(64)),
            Err(PayloadHashError::InvalidHex)
        );
        assert_eq!(
            PayloadHash::try_from(&[0u8; 31][..]),
            Err(PayloadHashError::WrongLength { actual: 31 })
        );
        assert_eq!(
            PayloadHash::try_from(&[7u8; 32][..]),
            Ok(PayloadHash::from_bytes([7; 32]))
        );
    }
}
