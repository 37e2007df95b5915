//! The API-key cache of a service whose callers present API keys.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The section a service that authenticates callers by API key flattens in
/// (`#[serde(flatten)] api_keys`: the key stays top-level, `auth_cache_ttl_secs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApiKeyCache {
    /// Seconds a verified API key stays cached (a revoked key works at most this long). 0: every
    /// call looks its key up.
    pub auth_cache_ttl_secs: u64,
}

impl Default for ApiKeyCache {
    fn default() -> ApiKeyCache {
        ApiKeyCache {
            auth_cache_ttl_secs: 30,
        }
    }
}

impl ApiKeyCache {
    /// How long a verified key stays cached.
    pub fn ttl(&self) -> Duration {
        Duration::from_secs(self.auth_cache_ttl_secs)
    }
}
