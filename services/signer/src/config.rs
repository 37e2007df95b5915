//! The signer's own configuration: defaults, then the TOML file named by `OPLEDGER_SIGNER_CONFIG`,
//! then `OPLEDGER_SIGNER_*` environment variables, then validation. Networks, assets and wallets
//! come from the file; passphrases never do (a file path or an environment variable name).

use opledger_grpc::config::{ConfigError, DatabaseUrl, check_database};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The signer's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address of the gRPC port.
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`, HTTP/1.1): gRPC request
    /// counts by method and code, latency histograms.
    pub metrics_listen: SocketAddr,
    /// PostgreSQL URL of a login role in `opledger_signer` (only signing columns are writable).
    pub database_url: DatabaseUrl,
    /// Pooled database connections.
    pub db_max_connections: u32,
    /// Seconds a call waits for a pooled connection.
    pub db_acquire_timeout_secs: u64,
    /// Seconds a claim (APPROVED -> SIGNING) is leased before another signer may reclaim it.
    pub lease_secs: u64,
    /// Names this signer instance in leases and transition logs.
    pub instance_id: String,
    /// SHA-256 (hex) of each caller token allowed to call the signer; tokens are never stored.
    pub caller_token_sha256: Vec<String>,
    /// Networks by id.
    pub networks: BTreeMap<String, NetworkConfig>,
    /// Hot wallets: one per tenant and network.
    pub wallets: Vec<WalletConfig>,
    /// TLS on the gRPC port; with `client_ca`, mutual TLS (recommended in production).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// The trust root of each tenant: the administrator public keys whose signature makes a
    /// trust statement (approver registry and approval policy) valid. Never read from the
    /// database; every tenant with a wallet needs one.
    #[serde(default)]
    pub trust_roots: Vec<TrustRootConfig>,
}

/// One tenant's pinned administrator keys.
#[derive(Debug, Clone, Serialize, Deserialize)]
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

/// The signer's TLS identity and, for mutual TLS, the CA that issues its callers' certificates.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain of the signer.
    pub cert: PathBuf,
    /// PEM private key of the signer.
    pub key: PathBuf,
    /// PEM CA certificate; when set, only clients with a certificate it issued can connect. Use a
    /// CA that issues certificates to the signer's callers only (the broadcaster).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

/// How the signer builds transactions on one network.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// Asset code of the native coin (e.g. "ETH").
    pub native_asset: String,
    /// ERC-20 tokens by asset code: contract address (0x...).
    #[serde(default)]
    pub tokens: BTreeMap<String, String>,
    /// Gas limit of a native transfer.
    pub gas_limit_native: u64,
    /// Gas limit of an ERC-20 transfer.
    pub gas_limit_erc20: u64,
    /// Max fee per gas of an original attempt, wei (decimal string).
    pub max_fee_per_gas: String,
    /// Max priority fee per gas of an original attempt, wei (decimal string).
    pub max_priority_fee_per_gas: String,
    /// Percent a fee bump raises both fees (at least 10).
    pub fee_bump_percent: u32,
    /// Most a cancel replacement may spend per gas, wei (decimal string): its own budget.
    pub cancel_max_fee_per_gas: String,
}

/// One tenant's hot wallet on one network.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalletConfig {
    /// The tenant (UUID).
    pub tenant_id: String,
    /// The network id (a key of `networks`).
    pub network: String,
    /// Ethereum keystore v3 JSON file.
    pub keystore: PathBuf,
    /// File holding the passphrase (trailing newline ignored)...
    #[serde(default)]
    pub passphrase_file: Option<PathBuf>,
    /// ...or the name of an environment variable holding it.
    #[serde(default)]
    pub passphrase_env: Option<String>,
    /// The account's nonce when the wallet was put in service (its first transaction's nonce).
    #[serde(default)]
    pub initial_nonce: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 50053)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], 9103)),
            database_url: DatabaseUrl::default(),
            db_max_connections: 8,
            db_acquire_timeout_secs: 5,
            lease_secs: 30,
            instance_id: "signer".to_owned(),
            caller_token_sha256: Vec::new(),
            networks: BTreeMap::new(),
            wallets: Vec::new(),
            tls: None,
            trust_roots: Vec::new(),
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_grpc::config::load("OPLEDGER_SIGNER_", file)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what can be checked without reading keys.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        check_database(&self.database_url, self.db_max_connections)?;
        if self.caller_token_sha256.is_empty() {
            return invalid("caller_token_sha256", "must name at least one caller");
        }
        if self
            .caller_token_sha256
            .iter()
            .any(|h| h.len() != 64 || hex::decode(h).is_err())
        {
            return invalid("caller_token_sha256", "entries must be 64 hex digits");
        }
        if self.lease_secs == 0 {
            return invalid("lease_secs", "must be at least 1");
        }
        for network in self.networks.values() {
            if network.fee_bump_percent < 10 {
                return invalid("networks.fee_bump_percent", "must be at least 10");
            }
            for fee in [
                &network.max_fee_per_gas,
                &network.max_priority_fee_per_gas,
                &network.cancel_max_fee_per_gas,
            ] {
                if fee.parse::<u128>().is_err() {
                    return invalid("networks.*_fee_per_gas", "must be a decimal amount of wei");
                }
            }
        }
        let mut rooted = std::collections::BTreeSet::new();
        for root in &self.trust_roots {
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
        for wallet in &self.wallets {
            if !rooted.contains(&wallet.tenant_id.to_ascii_lowercase()) {
                return invalid(
                    "wallets.tenant_id",
                    "names a tenant without a trust root: add its [[trust_roots]] entry",
                );
            }
            if !self.networks.contains_key(&wallet.network) {
                return invalid("wallets.network", "names a network that is not configured");
            }
            if wallet.passphrase_file.is_some() == wallet.passphrase_env.is_some() {
                return invalid(
                    "wallets",
                    "need exactly one of passphrase_file and passphrase_env",
                );
            }
        }
        Ok(())
    }

    /// The store settings this configuration implies.
    pub fn store_config(&self) -> opledger_store::StoreConfig {
        opledger_store::StoreConfig {
            max_connections: self.db_max_connections,
            acquire_timeout: Duration::from_secs(self.db_acquire_timeout_secs),
            ..opledger_store::StoreConfig::default()
        }
    }
}
