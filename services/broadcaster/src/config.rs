//! Typed configuration: defaults, then the TOML file named by `OPLEDGER_BROADCASTER_CONFIG`, then
//! `OPLEDGER_BROADCASTER_*` environment variables, then validation.

use opledger_chain::ChainLinks;
use opledger_config::{ConfigError, ServiceBase};
use opledger_grpc::client::SignerLink;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The broadcaster's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
    /// The team that owns a withdrawal the watcher escalates because its attempt reverted.
    #[serde(default = "default_owner")]
    pub owner: String,
    /// The team that owns a withdrawal the watcher escalates on evidence of a compromised key or
    /// a tampered attempt.
    #[serde(default = "default_security_owner")]
    pub security_owner: String,
    /// Names this worker in transition logs.
    pub worker_id: String,
    /// How the signer is reached (`signer_url`, `signer_token`, `signer_tls`).
    #[serde(flatten)]
    pub signer: SignerLink,
    /// How each network's nodes are reached (`rpc`, `rpc_ca`, `rpc_headers`, `evidence`).
    #[serde(flatten)]
    pub chain: ChainLinks,
    /// Seconds a BROADCAST transfer may stay unmined before it is fee-bumped.
    pub bump_after_secs: u64,
    /// Blocks below the head within which confirmed inclusions are re-checked for reorganizations.
    pub reorg_window_blocks: u64,
    /// Milliseconds between reads of the fair queue of due operations while a slot is free: once
    /// the last read is used up (at once if it was a full batch), and every
    /// max(`poll_interval_ms`, 200) while it is not, so a new withdrawal is seen within that long.
    /// Also the pause between the chain watcher's passes.
    pub poll_interval_ms: u64,
    /// Due operations read from the fair queue at a time (each tenant's in turn).
    pub batch_size: u32,
    /// BROADCAST operations the watcher examines per new head.
    pub watch_batch_size: u32,
    /// Operations worked on at once (the next one starts as soon as one finishes).
    pub concurrency: usize,
    /// Milliseconds a submission may take before it counts as a timeout (UNKNOWN).
    pub submit_timeout_ms: u64,
    /// Back-off of an operation a pass could not move (the signer refused, was unavailable or
    /// busy, the call was interrupted, no RPC endpoint): the first failure is retried at the next
    /// pass, the n-th consecutive one waits `backoff_base_ms` x 2^(n-2) milliseconds, at most
    /// `backoff_max_ms`; the queue skips it meanwhile.
    pub backoff_base_ms: u64,
    /// Longest back-off in milliseconds (at least `backoff_base_ms`).
    pub backoff_max_ms: u64,
}

opledger_config::service_config!(Config);

fn default_owner() -> String {
    "payments-operations".to_owned()
}

fn default_security_owner() -> String {
    "security".to_owned()
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15054, 9104, 8),
            worker_id: "broadcaster".to_owned(),
            signer: SignerLink::default(),
            chain: ChainLinks::default(),
            owner: default_owner(),
            security_owner: default_security_owner(),
            reorg_window_blocks: 64,
            bump_after_secs: 60,
            poll_interval_ms: 200,
            batch_size: 64,
            watch_batch_size: 2_000,
            concurrency: 8,
            submit_timeout_ms: 5_000,
            backoff_base_ms: 1_000,
            backoff_max_ms: 60_000,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_BROADCASTER_", file)?;
        config.base.validate()?;
        config.signer.validate()?;
        config.chain.validate()?;
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        for owner in [&config.owner, &config.security_owner] {
            let ok = !owner.is_empty()
                && owner.len() <= 63
                && owner.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !ok {
                return invalid(
                    "owner/security_owner",
                    "must be 1 to 63 lowercase letters, digits, '-' or '_'",
                );
            }
        }
        if config.batch_size == 0 || config.concurrency == 0 {
            return invalid("batch_size/concurrency", "must be at least 1");
        }
        if config.backoff_base_ms == 0 {
            return invalid("backoff_base_ms", "must be at least 1");
        }
        if config.backoff_max_ms < config.backoff_base_ms {
            return invalid("backoff_max_ms", "must be at least backoff_base_ms");
        }
        Ok(config)
    }

    /// The back-off this configuration sets.
    pub fn backoff(&self) -> opledger_store::queue::Backoff {
        opledger_store::queue::Backoff::new(
            Duration::from_millis(self.backoff_base_ms),
            Duration::from_millis(self.backoff_max_ms),
        )
    }
}
