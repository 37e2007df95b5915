//! The `[[trust_roots]]` configuration section every verifier embeds, and its validation.
//!
//! A verifier's configuration holds the section as
//! `#[serde(default)] pub trust_roots: Vec<TrustRootConfig>` (TOML: one `[[trust_roots]]` table
//! per tenant with `tenant_id`, `admin_public_keys` and `min_version`), never read from the
//! database, and its validation calls [`check_trust_roots`] on it. The entry type is
//! `opledger_config::TrustRootConfig` (the witness pins its tenants' keys with it too),
//! re-exported here so that a verifier names one crate for the section and its checks.

use opledger_config::ConfigError;
use std::collections::BTreeSet;

pub use opledger_config::TrustRootConfig;

/// Checks a `[[trust_roots]]` section: every entry names a distinct tenant (UUID) and at least one
/// Ed25519 administrator public key (64 hex digits each), with a `min_version` of at least 1.
/// Returns the tenants it roots, lowercase, so that the caller can require a root for each tenant
/// it serves. Refusals name the field under `trust_roots`.
pub fn check_trust_roots(roots: &[TrustRootConfig]) -> Result<BTreeSet<String>, ConfigError> {
    let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
    let mut rooted = BTreeSet::new();
    for root in roots {
        if root.tenant_id.parse::<uuid::Uuid>().is_err() {
            return invalid("trust_roots.tenant_id", "must be a tenant UUID");
        }
        if !rooted.insert(root.tenant_id.to_ascii_lowercase()) {
            return invalid("trust_roots.tenant_id", "names a tenant twice");
        }
        if root.admin_public_keys.is_empty() {
            return invalid(
                "trust_roots.admin_public_keys",
                "must name at least one key",
            );
        }
        if root.admin_public_keys.iter().any(|k| {
            hex::decode(k)
                .ok()
                .and_then(|b| opledger_domain::approval::verifying_key(&b).ok())
                .is_none()
        }) {
            return invalid(
                "trust_roots.admin_public_keys",
                "entries must be Ed25519 public keys (64 hex digits)",
            );
        }
        if root.min_version == 0 {
            return invalid("trust_roots.min_version", "must be at least 1");
        }
    }
    Ok(rooted)
}
