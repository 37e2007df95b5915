//! A tenant's trust root as the signer and the witness pin it.

use serde::{Deserialize, Serialize};

/// One tenant's trust root: its administrators' pinned keys (`[[trust_roots]]`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustRootConfig {
    /// The tenant (UUID).
    pub tenant_id: String,
    /// Ed25519 public keys (64 hex digits each) of the tenant's administrators: a trust statement
    /// signed by any of them is accepted.
    pub admin_public_keys: Vec<String>,
    /// The lowest trust statement version accepted (refuses a rollback to an older statement
    /// even on a fresh database); 1 when absent.
    #[serde(default = "one")]
    pub min_version: u64,
}

fn one() -> u64 {
    1
}
