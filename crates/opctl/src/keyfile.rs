//! Approver and operator keys on the command line: key files (`opctl approver keygen` writes both
//! kinds), `OPLEDGER_APPROVER_KEY` and `OPLEDGER_OPERATOR_KEY` through `opledger-keyfile` (mode
//! 0600, never overwritten, zeroized), their errors as usage failures naming the flag. Keys sign
//! approval and credit statements locally and are never sent or printed anywhere.

use crate::error::Failure;
use opledger_domain::approval::SigningKey;
use std::path::Path;

pub use opledger_keyfile::{key_id, public_hex};

/// A new key written to `path` (`--out`).
pub fn generate(path: &Path) -> Result<SigningKey, Failure> {
    opledger_keyfile::generate(path).map_err(|e| Failure::usage(format!("--out: {e}")))
}

/// The key in `path` (`--key-file`).
pub fn read(path: &Path) -> Result<SigningKey, Failure> {
    opledger_keyfile::read(path)
        .map_err(|e| Failure::usage(format!("--key-file {}: {e}", path.display())))
}

/// A key of `holder` (approver, operator) given as 64 hex digits; the error never quotes the text.
pub fn parse(text: &str, holder: &str) -> Result<SigningKey, String> {
    opledger_keyfile::parse(text).map_err(|e| format!("not an {holder} key: {e}"))
}
