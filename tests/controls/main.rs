//! Controls 12 and 13, the partly organisational ones: their documents exist, name owners, and
//! agree with the code and configuration; logs sampled from real service processes carry no
//! idempotency key, address, memo or webhook identifier in clear; and the single-writer claim of
//! the serialization statement holds under a race.

mod control_12;
mod control_13;

use std::path::PathBuf;

/// A file of the repository, as text.
pub fn repo_file(path: &str) -> anyhow::Result<String> {
    let full = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&full).map_err(|e| anyhow::anyhow!("{}: {e}", full.display()))
}
