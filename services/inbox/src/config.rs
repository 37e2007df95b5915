//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_INBOX_CONFIG`, then
//! `OPLEDGER_INBOX_*` environment variables, then validation.

use opledger_config::{ApiKeyCache, ConfigError, Secret, ServiceBase};
use opledger_webhook::seal::BodyKey;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Days a processed event's body is kept before the retention job purges it. `docs/privacy.md`
/// states this value; a test checks that they agree.
pub const DEFAULT_RETENTION_PROCESSED_DAYS: u32 = 30;
/// Days a quarantined or UNHANDLED body is kept (from arrival). Documented in `docs/privacy.md`.
pub const DEFAULT_RETENTION_QUARANTINED_DAYS: u32 = 90;

/// Days the per-minute counts of refused webhook requests are kept. Documented in
/// `docs/privacy.md`.
pub const DEFAULT_RETENTION_REJECTIONS_DAYS: u32 = 30;

/// The inbox service's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
    /// Address of the webhook ingress (`POST /webhooks/{source}/{endpoint}`, HTTP/1.1).
    pub http_listen: SocketAddr,
    /// Body and endpoint-secret encryption keys, comma-separated `<id>:<base64 of 32 bytes>`;
    /// the first seals, all open (`OPLEDGER_INBOX_BODY_KEYS`).
    pub body_keys: Secret,
    /// Largest accepted body in bytes (larger: 413, nothing stored).
    pub max_body_bytes: usize,
    /// Milliseconds a request may take end to end (longer: 503, nothing acknowledged).
    pub request_timeout_ms: u64,
    /// Seconds a signature timestamp may differ from now, both ways (Standard Webhooks: 300).
    pub timestamp_tolerance_secs: i64,
    /// Seconds an endpoint and its keys stay cached (a retired key works at most this long; an
    /// added key verifies at once: a refused signature re-reads the keys, at most every 100 ms).
    pub endpoint_cache_ttl_secs: u64,
    /// Milliseconds one fetch of a custodian's webhook key set (`fireblocks_jws` endpoints) may
    /// take.
    pub jwks_timeout_ms: u64,
    /// At most one fetch of a key set per this many milliseconds, whatever asks for it (a
    /// signature naming an unknown key id, a stale set, a failed fetch): forged key ids cannot
    /// flood the provider's key server.
    pub jwks_refresh_min_interval_ms: u64,
    /// Seconds a fetched key set is used before it is fetched again (a key the provider removed
    /// stops verifying within this).
    pub jwks_max_age_secs: u64,
    /// PEM CA alone trusted for `https` key set URLs; absent: the system's roots.
    #[serde(default)]
    pub jwks_ca_file: Option<PathBuf>,
    /// Names this processor in transition logs.
    pub worker_id: String,
    /// Milliseconds between processor polls when there is no work.
    pub poll_interval_ms: u64,
    /// Processors running at once; 0 runs an ingress-only instance (another instance, with
    /// processors, applies the work: ingress and processing then scale separately).
    pub processors: usize,
    /// Attempts before a failing item becomes a dead letter.
    pub max_attempts: i32,
    /// Milliseconds before the first retry; doubles per attempt, at most 10 minutes.
    pub retry_base_ms: u64,
    /// Team owning dead letters.
    pub dead_letter_owner: String,
    /// Team owning KYT failures that arrive after the operation left REQUESTED.
    pub compliance_owner: String,
    /// Days a processed event's body is kept.
    pub retention_processed_days: u32,
    /// Days a quarantined or UNHANDLED body is kept.
    pub retention_quarantined_days: u32,
    /// Days the per-minute counts of refused webhook requests are kept.
    pub retention_rejections_days: u32,
    /// Seconds between retention passes.
    pub retention_interval_secs: u64,
    /// How long a verified API key of an operator stays cached (`auth_cache_ttl_secs`).
    #[serde(flatten)]
    pub api_keys: ApiKeyCache,
}

opledger_config::service_config!(Config);

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15056, 9106, 16),
            http_listen: SocketAddr::from(([127, 0, 0, 1], 8088)),
            body_keys: Secret::default(),
            max_body_bytes: 256 * 1024,
            request_timeout_ms: 10_000,
            timestamp_tolerance_secs: opledger_webhook::verify::DEFAULT_TOLERANCE_SECS,
            endpoint_cache_ttl_secs: 30,
            jwks_timeout_ms: 5_000,
            jwks_refresh_min_interval_ms: 30_000,
            jwks_max_age_secs: 600,
            jwks_ca_file: None,
            worker_id: "inbox".to_owned(),
            poll_interval_ms: 200,
            processors: 2,
            max_attempts: 8,
            retry_base_ms: 1_000,
            dead_letter_owner: "payments-operations".to_owned(),
            compliance_owner: "compliance".to_owned(),
            retention_processed_days: DEFAULT_RETENTION_PROCESSED_DAYS,
            retention_quarantined_days: DEFAULT_RETENTION_QUARANTINED_DAYS,
            retention_rejections_days: DEFAULT_RETENTION_REJECTIONS_DAYS,
            retention_interval_secs: 3600,
            api_keys: ApiKeyCache::default(),
        }
    }
}

fn invalid(field: &'static str, problem: &'static str) -> ConfigError {
    ConfigError::Invalid { field, problem }
}

fn is_team(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_INBOX_", file)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value; the keys must parse.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.base.validate()?;
        self.body_keys()?;
        if self.max_body_bytes == 0 || self.max_body_bytes > 16 * 1024 * 1024 {
            return Err(invalid("max_body_bytes", "must be 1 to 16777216"));
        }
        if self.request_timeout_ms == 0 {
            return Err(invalid("request_timeout_ms", "must be at least 1"));
        }
        if !(1..=3600).contains(&self.timestamp_tolerance_secs) {
            return Err(invalid("timestamp_tolerance_secs", "must be 1 to 3600"));
        }
        if !(1..=60_000).contains(&self.jwks_timeout_ms) {
            return Err(invalid("jwks_timeout_ms", "must be 1 to 60000"));
        }
        if !(100..=3_600_000).contains(&self.jwks_refresh_min_interval_ms) {
            return Err(invalid(
                "jwks_refresh_min_interval_ms",
                "must be 100 to 3600000",
            ));
        }
        if !(1..=86_400).contains(&self.jwks_max_age_secs) {
            return Err(invalid("jwks_max_age_secs", "must be 1 to 86400"));
        }
        if self.max_attempts < 1 || self.poll_interval_ms == 0 {
            return Err(invalid(
                "max_attempts",
                "max_attempts and poll_interval_ms must be at least 1",
            ));
        }
        if !is_team(&self.dead_letter_owner) || !is_team(&self.compliance_owner) {
            return Err(invalid(
                "dead_letter_owner",
                "owners must match [a-z0-9][a-z0-9_-]{0,62}",
            ));
        }
        if self.retention_processed_days == 0 || self.retention_quarantined_days == 0 {
            return Err(invalid(
                "retention_processed_days",
                "retention must be at least 1 day",
            ));
        }
        if self.retention_rejections_days == 0 {
            return Err(invalid(
                "retention_rejections_days",
                "retention must be at least 1 day",
            ));
        }
        if self.retention_interval_secs == 0 {
            return Err(invalid("retention_interval_secs", "must be at least 1"));
        }
        Ok(())
    }

    /// The ingress's settings: limits, timestamp tolerance, key caching, and how custodians'
    /// webhook key sets are fetched and kept.
    pub fn ingress(&self) -> crate::ingress::IngressSettings {
        crate::ingress::IngressSettings {
            max_body_bytes: self.max_body_bytes,
            timeout: Duration::from_millis(self.request_timeout_ms),
            tolerance_secs: self.timestamp_tolerance_secs,
            cache_ttl: Duration::from_secs(self.endpoint_cache_ttl_secs),
            body_timeout: Duration::from_millis(self.base.listener.request_timeout_ms),
            jwks: crate::ingress::jwks::JwksSettings {
                timeout: Duration::from_millis(self.jwks_timeout_ms),
                refresh_interval: Duration::from_millis(self.jwks_refresh_min_interval_ms),
                max_age: Duration::from_secs(self.jwks_max_age_secs),
                ca_file: self.jwks_ca_file.clone(),
            },
        }
    }

    /// The parsed keys, sealing key first.
    pub fn body_keys(&self) -> Result<Vec<BodyKey>, ConfigError> {
        let keys: Vec<BodyKey> = self
            .body_keys
            .0
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(BodyKey::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| {
                invalid(
                    "body_keys",
                    "must be <id>:<base64 of 32 bytes>, comma-separated",
                )
            })?;
        if keys.is_empty() {
            return Err(invalid("body_keys", "is required"));
        }
        Ok(keys)
    }
}
