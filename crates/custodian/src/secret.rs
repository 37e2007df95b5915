//! Credentials read from files: held in zeroizing memory, never shown by `Debug`, never quoted by
//! an error.

use crate::config::SetupError;
use std::fmt;
use std::io::Read;
use std::path::Path;
use zeroize::Zeroizing;

/// The largest secret file read (a PEM RSA key of 8192 bits is about 6.4 KiB).
const MAX_SECRET_FILE: u64 = 64 * 1024;

/// A secret's bytes: zeroed when dropped, redacted in `Debug`.
#[derive(Clone)]
pub struct SecretBytes(Zeroizing<Vec<u8>>);

impl SecretBytes {
    /// Wraps bytes already read.
    pub fn new(bytes: Vec<u8>) -> SecretBytes {
        SecretBytes(Zeroizing::new(bytes))
    }

    /// The bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }

    /// The bytes as text, when they are UTF-8.
    pub fn expose_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretBytes(<redacted>)")
    }
}

/// The secret in the file at `path` (the setting `field`), its trailing whitespace (a final
/// newline) removed. An empty or oversized file is refused.
pub fn read_secret(field: &'static str, path: &Path) -> Result<SecretBytes, SetupError> {
    let io = |source| SetupError::ReadSecret {
        field,
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Zeroizing::new(Vec::new());
    file.take(MAX_SECRET_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_SECRET_FILE {
        return Err(SetupError::Invalid {
            field,
            problem: "the secret file is larger than 64 KiB",
        });
    }
    let len = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |last| last + 1);
    bytes.truncate(len);
    if bytes.is_empty() {
        return Err(SetupError::Invalid {
            field,
            problem: "the secret file is empty",
        });
    }
    Ok(SecretBytes(bytes))
}
