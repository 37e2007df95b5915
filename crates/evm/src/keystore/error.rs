//! The keystore error type, shared by the keystore codec and its KDF module.

/// Why a keystore cannot be read, decrypted or written.
#[derive(Debug, thiserror::Error)]
pub enum KeystoreError {
    /// The keystore file could not be read.
    #[error("cannot read keystore file: {0}")]
    Io(#[source] std::io::Error),
    /// The keystore file is larger than any keystore could be.
    #[error("keystore file is too large")]
    TooLarge,
    /// The document is not keystore JSON (only the position is reported).
    #[error("keystore json is malformed at line {line}, column {column}")]
    Malformed {
        /// Line of the first error.
        line: usize,
        /// Column of the first error.
        column: usize,
    },
    /// The `version` field is not 3.
    #[error("unsupported keystore version {0}, expected 3")]
    UnsupportedVersion(u64),
    /// The cipher is not `aes-128-ctr`.
    #[error("unsupported keystore cipher, expected aes-128-ctr")]
    UnsupportedCipher,
    /// The KDF (or the pbkdf2 prf) is not one this crate implements.
    #[error("unsupported keystore kdf, expected scrypt or pbkdf2 with hmac-sha256")]
    UnsupportedKdf,
    /// The KDF parameters are invalid or above the accepted cost bounds.
    #[error("keystore kdf parameters are invalid or too expensive: {0}")]
    InvalidKdfParams(&'static str),
    /// A hex field is badly encoded or has the wrong length.
    #[error("keystore field {0} is not valid hex of the expected length")]
    InvalidField(&'static str),
    /// The MAC does not match: the passphrase is wrong or the file is corrupt.
    #[error("wrong keystore passphrase (or corrupted keystore)")]
    WrongPassphrase,
    /// The secret is not a valid secp256k1 private key.
    #[error("secret is not a valid secp256k1 private key")]
    InvalidSecretKey,
    /// The file's `address` field is not the decrypted key's address.
    #[error("keystore address field does not match the decrypted key")]
    AddressMismatch,
    /// A primitive rejected its input sizes (should not happen).
    #[error("internal keystore cryptography error")]
    Crypto,
}
