//! Approver keys: Ed25519 private keys kept in a file (the 32-byte seed as 64 hex digits on one
//! line, mode 0600) or handed over in `OPLEDGER_APPROVER_KEY`. They sign approval statements
//! locally and are never sent anywhere; seeds are zeroized when dropped.

use crate::error::Failure;
use opledger_domain::approval::{KeyId, SigningKey};
use rand::RngCore;
use std::io::Write;
use std::path::Path;
use zeroize::Zeroizing;

/// A new key from the operating system's random source, written to `path` (created with mode
/// 0600; an existing file is never overwritten).
pub fn generate(path: &Path) -> Result<SigningKey, Failure> {
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
    let mut file = options.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            Failure::usage(format!(
                "--out: {} exists: refusing to overwrite a key file",
                path.display()
            ))
        } else {
            Failure::usage(format!("--out: cannot create {}: {e}", path.display()))
        }
    })?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| Failure::usage(format!("--out: cannot write {}: {e}", path.display())))?;
    Ok(key)
}

/// Reads a key file written by [`generate`] (or `opledger-admin trust keygen`).
pub fn read(path: &Path) -> Result<SigningKey, Failure> {
    let text =
        Zeroizing::new(std::fs::read_to_string(path).map_err(|e| {
            Failure::usage(format!("--key-file: cannot read {}: {e}", path.display()))
        })?);
    parse(&text).map_err(|what| Failure::usage(format!("--key-file {}: {what}", path.display())))
}

/// Parses 64 hex digits of seed (surrounding white space and a `0x` prefix are allowed). The
/// error never quotes the text.
pub fn parse(text: &str) -> Result<SigningKey, &'static str> {
    let digits = text.trim();
    let digits = digits.strip_prefix("0x").unwrap_or(digits);
    let mut seed = Zeroizing::new([0_u8; 32]);
    hex::decode_to_slice(digits, seed.as_mut())
        .map_err(|_| "an approver key is 64 hex digits (the Ed25519 seed)")?;
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
    fn a_generated_key_reads_back_and_is_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("opctl-keyfile-{}", uuid::Uuid::new_v4()));
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
        let f = generate(&path).expect_err("exists");
        assert!(f.message.contains("refusing to overwrite"), "{}", f.message);
        assert_eq!(read(&path).expect("unchanged").to_bytes(), key.to_bytes());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn malformed_seeds_are_refused_without_quoting_them() {
        let secret = "zz".repeat(32);
        let e = parse(&secret).expect_err("not hex");
        assert!(!e.contains(&secret));
        assert!(parse(&"ab".repeat(31)).is_err());
        let key = parse(&format!("0x{}\n", "01".repeat(32))).expect("0x and newline");
        assert_eq!(key.to_bytes(), [1; 32]);
        assert_eq!(key_id(&key).to_hex().len(), 32);
        assert_eq!(public_hex(&key).len(), 64);
    }
}
