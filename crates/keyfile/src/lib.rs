//! Ed25519 key files of approvers (`opctl approver keygen`) and tenant administrators
//! (`opledger-admin trust keygen`): the 32-byte seed as 64 hex digits on one line, created with
//! mode 0600 and never overwritten. Seeds live in zeroizing memory; no error ever quotes a file's
//! content. This crate never sends a key anywhere and holds no key beyond the call.

use opledger_domain::approval::{KeyId, SigningKey};
use rand::RngCore;
use std::io::Write;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

/// Why a key file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// The file exists: a key file is never overwritten.
    #[error("{} exists: refusing to overwrite a key file", .0.display())]
    Exists(PathBuf),
    /// The file could not be created, written or read.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// create, write or read.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The content is not 64 hex digits (the content itself is never shown).
    #[error("a key is 64 hex digits (the Ed25519 seed)")]
    Malformed,
}

/// A new key from the operating system's random source, written to `path` (created with mode
/// 0600; an existing file is never overwritten).
pub fn generate(path: &Path) -> Result<SigningKey, KeyFileError> {
    let mut seed = Zeroizing::new([0_u8; 32]);
    rand::rng().fill_bytes(seed.as_mut());
    let key = SigningKey::from_bytes(&seed);
    let text = Zeroizing::new(format!("{}\n", hex::encode(seed.as_ref())));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let io = |what, source| KeyFileError::Io {
        what,
        path: path.to_owned(),
        source,
    };
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            KeyFileError::Exists(path.to_owned())
        } else {
            io("create", e)
        }
    })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| io("write", e))?;
    Ok(key)
}

/// Reads a key file written by [`generate`].
pub fn read(path: &Path) -> Result<SigningKey, KeyFileError> {
    let text =
        Zeroizing::new(
            std::fs::read_to_string(path).map_err(|source| KeyFileError::Io {
                what: "read",
                path: path.to_owned(),
                source,
            })?,
        );
    parse(&text)
}

/// Parses 64 hex digits of seed (surrounding white space and a `0x` prefix are allowed).
pub fn parse(text: &str) -> Result<SigningKey, KeyFileError> {
    let digits = text.trim();
    let digits = digits.strip_prefix("0x").unwrap_or(digits);
    let mut seed = Zeroizing::new([0_u8; 32]);
    hex::decode_to_slice(digits, seed.as_mut()).map_err(|_| KeyFileError::Malformed)?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The public key as 64 lowercase hex digits.
pub fn public_hex(key: &SigningKey) -> String {
    hex::encode(key.verifying_key().as_bytes())
}

/// The key id (`KeyId::of` the public key).
pub fn key_id(key: &SigningKey) -> KeyId {
    KeyId::of(&key.verifying_key())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_reads_back_is_private_and_is_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("opledger-keyfile-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("approver.key");
        let key = generate(&path).expect("generated");
        assert_eq!(read(&path).expect("reads").to_bytes(), key.to_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(matches!(generate(&path), Err(KeyFileError::Exists(_))));
        assert_eq!(read(&path).expect("unchanged").to_bytes(), key.to_bytes());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn malformed_seeds_are_refused_without_quoting_them() {
        let secret = "zz".repeat(32);
        let e = parse(&secret).expect_err("not hex");
        assert!(!e.to_string().contains(&secret));
        assert!(parse(&"ab".repeat(31)).is_err());
        let key = parse(&format!("0x{}\n", "01".repeat(32))).expect("0x and newline");
        assert_eq!(key.to_bytes(), [1; 32]);
        assert_eq!(key_id(&key).to_hex().len(), 32);
        assert_eq!(public_hex(&key).len(), 64);
    }
}
