//! The signer's own configuration: defaults, then the TOML file named by `OPLEDGER_SIGNER_CONFIG`,
//! then `OPLEDGER_SIGNER_*` environment variables, then validation. Networks, assets and wallets
//! come from the file; passphrases never do (a file path or an environment variable name).

use opledger_config::{ConfigError, ServiceBase, Wei};
pub use opledger_trust::TrustRootConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The signer's configuration.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The keys every service has (listen addresses, database pool, listener limits).
    #[serde(flatten)]
    pub base: ServiceBase,
    /// Seconds a claim (APPROVED -> SIGNING) is leased before another signer may reclaim it.
    pub lease_secs: u64,
    /// Names this signer instance in leases and transition logs.
    pub instance_id: String,
    /// The callers allowed to call the signer (`[[callers]]`): each a `name`, the SHA-256 (hex)
    /// of its token (`token_sha256`; tokens are never stored), the `capabilities` it holds
    /// (`sign_withdrawal`, `fee_bump`, `cancel`) and optionally `client_cert_sha256`, the SHA-256
    /// (hex) of its DER client certificate: then it must call over mutual TLS with exactly that
    /// certificate. Give each caller only its own moves (broadcaster: `sign_withdrawal` and
    /// `fee_bump`; reconciler: `cancel`).
    pub callers: Vec<CallerConfig>,
    /// Seconds the latest attempt of a BROADCAST withdrawal must be old before the signer signs a
    /// fee bump of it (the signer checks it itself, whoever asks).
    pub fee_bump_min_age_secs: u64,
    /// Seconds the latest attempt of an UNKNOWN withdrawal must be old before the signer signs a
    /// cancel of it (the signer checks it itself, whoever asks).
    pub cancel_min_age_secs: u64,
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
    /// The team that owns a withdrawal the signer ended because it is evidence of tampering (the
    /// recomputed hash or the approvals do not verify): FAILED_TERMINAL, hold kept.
    #[serde(default = "default_security_owner")]
    pub security_owner: String,
    /// The team that owns a withdrawal the signer ended because nothing here can execute it (no
    /// wallet, network or asset configured, a fee above its cap, a memo): FAILED_TERMINAL, hold
    /// kept.
    #[serde(default = "default_operations_owner")]
    pub operations_owner: String,
    /// Milliseconds between the signer's sweeps for signed attempts still held back by the
    /// signed-bytes gate (their signing commit's answer was lost, or their release failed): an
    /// attempt at least this old and unreleased is probed (a commit after its own, which must be
    /// acknowledged) and then released for submission. See docs/serialization.md.
    pub release_sweep_ms: u64,
    /// How often (seconds) the signer checks whether a retiring wallet (`retiring = true`) has
    /// finished: once none of the operations whose original it signed is in flight (each ended
    /// without a payout, or CONFIRMED longer than `wallet_retire_grace_secs` ago and at or below
    /// the chain watcher's reorganization floor) and it signed nothing for
    /// `wallet_retire_min_age_secs`, it is marked RETIRED and its key is dropped from memory; it
    /// signs nothing afterwards. From 1 to 3600.
    pub wallet_retire_check_secs: u64,
    /// Seconds a CONFIRMED withdrawal keeps its retiring wallet loaded after its confirmation at
    /// least. Besides, it keeps it while its inclusion is above the chain watcher's
    /// reorganization floor (the watcher re-checks confirmed inclusions over its
    /// `reorg_window_blocks` and sends a reorganized one back to BROADCAST, where a fee bump or
    /// cancel needs the original's key again; a stopped watcher leaves the floor where it was).
    /// From 0 to 604800.
    pub wallet_retire_grace_secs: u64,
    /// Seconds a retiring wallet stays loaded at least after the latest attempt it signed for
    /// any of its withdrawals (a fee bump or cancel included), whatever the rows other services
    /// write say (confirmations, inclusions, the watcher's reorganization floor: they can only
    /// keep it longer). Read from attempts only the signer writes, it bounds how early a
    /// compromised broadcaster login could make the signer drop a key a reorganized withdrawal
    /// still needs. From 0 to 7776000.
    pub wallet_retire_min_age_secs: u64,
}

opledger_config::service_config!(Config);

fn default_security_owner() -> String {
    "security".to_owned()
}

fn default_operations_owner() -> String {
    "payments-operations".to_owned()
}

/// What a caller may ask the signer for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// `SignWithdrawal`: sign an approved withdrawal's original transfer.
    SignWithdrawal,
    /// `SignReplacement` with `ATTEMPT_KIND_FEE_BUMP` (BROADCAST withdrawals only).
    FeeBump,
    /// `SignReplacement` with `ATTEMPT_KIND_CANCEL` (UNKNOWN withdrawals only).
    Cancel,
}

impl Capability {
    /// The configured name.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::SignWithdrawal => "sign_withdrawal",
            Capability::FeeBump => "fee_bump",
            Capability::Cancel => "cancel",
        }
    }
}

/// One caller of the signer and what it may do.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CallerConfig {
    /// Names the caller in logs and security events (e.g. "broadcaster").
    pub name: String,
    /// SHA-256 (64 hex digits) of the caller's token.
    pub token_sha256: String,
    /// What it may ask for.
    pub capabilities: Vec<Capability>,
    /// SHA-256 (64 hex digits) of the caller's DER client certificate: when set, its calls must
    /// come over mutual TLS with exactly this certificate.
    #[serde(default)]
    pub client_cert_sha256: Option<String>,
}

/// A 64-hex-digit SHA-256 digest, decoded.
pub fn digest(hex_text: &str) -> Option<[u8; 32]> {
    if hex_text.len() != 64 {
        return None;
    }
    hex::decode(hex_text).ok()?.try_into().ok()
}

/// The signer's TLS identity and, for mutual TLS, the CA that issues its callers' certificates.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
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
    pub max_fee_per_gas: Wei,
    /// Max priority fee per gas of an original attempt, wei (decimal string).
    pub max_priority_fee_per_gas: Wei,
    /// Percent a fee bump raises both fees (at least 10).
    pub fee_bump_percent: u32,
    /// Most a cancel replacement may spend per gas, wei (decimal string): its own budget.
    pub cancel_max_fee_per_gas: Wei,
}

/// One tenant's hot wallet on one network.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WalletConfig {
    /// The tenant (UUID).
    pub tenant_id: String,
    /// The network id (a key of `networks`).
    pub network: String,
    /// The `keystore` backend: an Ethereum keystore v3 JSON file, decrypted into the signer's
    /// (zeroized) memory at start. Exactly one of this and `pkcs11`.
    #[serde(default)]
    pub keystore: Option<PathBuf>,
    /// The keystore's passphrase: a file holding it (trailing newline ignored)...
    #[serde(default)]
    pub passphrase_file: Option<PathBuf>,
    /// ...or the name of an environment variable holding it.
    #[serde(default)]
    pub passphrase_env: Option<String>,
    /// The `pkcs11` backend: a key generated inside a PKCS#11 token (an HSM) by `opledger-admin
    /// hsm keygen`; it never enters the signer's memory, the token signs each hash. Exactly one
    /// of this and `keystore`.
    #[serde(default)]
    pub pkcs11: Option<Pkcs11Wallet>,
    /// The account's nonce when the wallet was put in service (its first transaction's nonce).
    #[serde(default)]
    pub initial_nonce: u64,
    /// True for a wallet rotated out: it signs no new withdrawal, only fee bumps and cancels of
    /// its own in-flight nonces (a replacement must come from the original's sender). Once none of
    /// its operations is in flight the signer retires it (RETIRED, key dropped, logged); remove
    /// it from the configuration then.
    #[serde(default)]
    pub retiring: bool,
}

/// A hot wallet's key in a PKCS#11 token. The signer refuses to start when the module cannot be
/// loaded, no token has the label, the PIN is refused, or the key is missing, not secp256k1, or
/// able to leave the token (not sensitive, or extractable).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pkcs11Wallet {
    /// The token's PKCS#11 module (SoftHSM2: `/usr/lib/softhsm/libsofthsm2.so`).
    pub module: PathBuf,
    /// The token's label (at most 32 bytes).
    pub token_label: String,
    /// The key pair's label (`CKA_LABEL`), as given to `opledger-admin hsm keygen`.
    pub key_label: String,
    /// File holding the token's user PIN (trailing newline ignored, at most 1 KiB); never
    /// logged.
    pub pin_file: PathBuf,
    /// The wallet's address (`0x` and 40 hex digits), as `opledger-admin hsm keygen` printed it:
    /// a key under the label with another address (another token or partition labelled alike)
    /// refuses the start.
    pub address: String,
    /// Accept a software token (SoftHSM2: the key in this process and on its disk, encrypted
    /// under the PIN, no better than a keystore). Development and tests only.
    #[serde(default)]
    pub allow_software_token: bool,
    /// How long one signature may take the token before it counts as failed, in milliseconds
    /// (nothing is stored for it; the claim is given back).
    #[serde(default = "default_sign_timeout_ms")]
    pub sign_timeout_ms: u64,
}

fn default_sign_timeout_ms() -> u64 {
    5_000
}

impl Default for Config {
    fn default() -> Self {
        Config {
            base: ServiceBase::loopback(15053, 9103, 8),
            lease_secs: 30,
            instance_id: "signer".to_owned(),
            callers: Vec::new(),
            fee_bump_min_age_secs: 30,
            cancel_min_age_secs: 300,
            networks: BTreeMap::new(),
            wallets: Vec::new(),
            tls: None,
            trust_roots: Vec::new(),
            security_owner: default_security_owner(),
            operations_owner: default_operations_owner(),
            release_sweep_ms: 1000,
            wallet_retire_check_secs: 30,
            wallet_retire_grace_secs: 3600,
            wallet_retire_min_age_secs: 604_800,
        }
    }
}

impl Config {
    /// Loads defaults, then `file` if given, then the environment, and validates.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let config: Config = opledger_config::load("OPLEDGER_SIGNER_", file)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what can be checked without reading keys.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.base.validate()?;
        opledger_config::check_owner("security_owner", &self.security_owner)?;
        opledger_config::check_owner("operations_owner", &self.operations_owner)?;
        self.check_timing()?;
        self.check_callers()?;
        if self.lease_secs == 0 {
            return Err(ConfigError::Invalid {
                field: "lease_secs",
                problem: "must be at least 1",
            });
        }
        self.check_networks()?;
        let rooted = opledger_trust::check_trust_roots(&self.trust_roots)?;
        self.check_wallets(&rooted)
    }

    /// The sweep, retirement and grace periods are within their ranges.
    fn check_timing(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if !(100..=60_000).contains(&self.release_sweep_ms) {
            return invalid("release_sweep_ms", "must be from 100 to 60000");
        }
        if !(1..=3600).contains(&self.wallet_retire_check_secs) {
            return invalid("wallet_retire_check_secs", "must be from 1 to 3600");
        }
        if self.wallet_retire_grace_secs > 604_800 {
            return invalid("wallet_retire_grace_secs", "must be from 0 to 604800");
        }
        if self.wallet_retire_min_age_secs > 7_776_000 {
            return invalid("wallet_retire_min_age_secs", "must be from 0 to 7776000");
        }
        Ok(())
    }

    /// At least one caller; names and tokens unique; certificate pins only with mutual TLS.
    fn check_callers(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if self.callers.is_empty() {
            return invalid("callers", "must name at least one caller");
        }
        let (mut names, mut tokens) = (
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        );
        for caller in &self.callers {
            if caller.name.trim().is_empty() {
                return invalid("callers.name", "must not be empty");
            }
            if !names.insert(caller.name.as_str()) {
                return invalid("callers.name", "names a caller twice");
            }
            let Some(token) = digest(&caller.token_sha256) else {
                return invalid("callers.token_sha256", "must be 64 hex digits");
            };
            if !tokens.insert(token) {
                return invalid("callers.token_sha256", "is given to two callers");
            }
            if caller.capabilities.is_empty() {
                return invalid("callers.capabilities", "must name at least one capability");
            }
            if caller
                .client_cert_sha256
                .as_deref()
                .is_some_and(|h| digest(h).is_none())
            {
                return invalid("callers.client_cert_sha256", "must be 64 hex digits");
            }
            if caller.client_cert_sha256.is_some()
                && self.tls.as_ref().is_none_or(|t| t.client_ca.is_none())
            {
                return invalid(
                    "callers.client_cert_sha256",
                    "needs mutual TLS: set [tls] with client_ca",
                );
            }
        }
        Ok(())
    }

    /// Fee bumps of at least 10% (the fees are amounts of wei once read: [`Wei`]).
    fn check_networks(&self) -> Result<(), ConfigError> {
        if self.networks.values().any(|n| n.fee_bump_percent < 10) {
            return Err(ConfigError::Invalid {
                field: "networks.fee_bump_percent",
                problem: "must be at least 10",
            });
        }
        Ok(())
    }

    /// Every wallet belongs to a rooted tenant and a configured network, with one passphrase
    /// source.
    fn check_wallets(
        &self,
        rooted: &std::collections::BTreeSet<String>,
    ) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
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
            let passphrases = [
                wallet.passphrase_file.is_some(),
                wallet.passphrase_env.is_some(),
            ];
            match (&wallet.keystore, &wallet.pkcs11) {
                (Some(_), None) if passphrases == [true, false] || passphrases == [false, true] => {
                }
                (Some(_), None) => {
                    return invalid(
                        "wallets",
                        "a keystore wallet needs exactly one of passphrase_file and passphrase_env",
                    );
                }
                (None, Some(_)) if passphrases == [false, false] => {}
                (None, Some(_)) => {
                    return invalid(
                        "wallets.pkcs11",
                        "a pkcs11 wallet takes no passphrase: its token PIN is in pkcs11.pin_file",
                    );
                }
                _ => {
                    return invalid("wallets", "need exactly one of keystore and pkcs11");
                }
            }
            if let Some(token) = &wallet.pkcs11 {
                let label = |l: &str| !l.is_empty() && l.len() <= 32;
                if !label(&token.token_label) || !label(&token.key_label) {
                    return invalid(
                        "wallets.pkcs11",
                        "token_label and key_label must be 1 to 32 bytes",
                    );
                }
                let hex = token.address.strip_prefix("0x").unwrap_or("");
                if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return invalid("wallets.pkcs11.address", "must be 0x and 40 hex digits");
                }
                if !(100..=60_000).contains(&token.sign_timeout_ms) {
                    return invalid(
                        "wallets.pkcs11.sign_timeout_ms",
                        "must be from 100 to 60000",
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str, token: char, capabilities: &[Capability]) -> CallerConfig {
        CallerConfig {
            name: name.to_owned(),
            token_sha256: token.to_string().repeat(64),
            capabilities: capabilities.to_vec(),
            client_cert_sha256: None,
        }
    }

    fn valid() -> Config {
        let defaults = Config::default();
        Config {
            base: ServiceBase {
                database_url: opledger_config::DatabaseUrl("postgres://signer@db/opledger".into()),
                ..defaults.base.clone()
            },
            callers: vec![
                caller(
                    "broadcaster",
                    'a',
                    &[Capability::SignWithdrawal, Capability::FeeBump],
                ),
                caller("reconciler", 'b', &[Capability::Cancel]),
            ],
            ..defaults
        }
    }

    fn refused(config: &Config) -> &'static str {
        match config.validate() {
            Err(ConfigError::Invalid { field, .. }) => field,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn scoped_callers_validate_and_mistakes_are_refused_by_field() {
        assert!(valid().validate().is_ok());
        let mut c = valid();
        c.callers.clear();
        assert_eq!(refused(&c), "callers");
        let mut c = valid();
        c.callers[1].name = "broadcaster".into();
        assert_eq!(refused(&c), "callers.name");
        let mut c = valid();
        c.callers[1].token_sha256 = c.callers[0].token_sha256.clone();
        assert_eq!(refused(&c), "callers.token_sha256");
        let mut c = valid();
        c.callers[0].token_sha256 = "zz".repeat(32);
        assert_eq!(refused(&c), "callers.token_sha256");
        let mut c = valid();
        c.callers[0].capabilities.clear();
        assert_eq!(refused(&c), "callers.capabilities");
        let mut c = valid();
        c.callers[0].client_cert_sha256 = Some("0".repeat(63));
        assert_eq!(refused(&c), "callers.client_cert_sha256");
        // A well-formed certificate binding needs mutual TLS to mean anything.
        let mut c = valid();
        c.callers[0].client_cert_sha256 = Some("0".repeat(64));
        assert_eq!(refused(&c), "callers.client_cert_sha256");
        c.tls = Some(TlsConfig {
            cert: "s.pem".into(),
            key: "s.key".into(),
            client_ca: Some("ca.pem".into()),
        });
        assert!(c.validate().is_ok());
    }

    #[test]
    fn capabilities_are_named_in_snake_case_and_the_windows_default_to_30_and_300_seconds() {
        let names: Vec<&str> = [
            Capability::SignWithdrawal,
            Capability::FeeBump,
            Capability::Cancel,
        ]
        .iter()
        .map(|c| c.as_str())
        .collect();
        assert_eq!(names, ["sign_withdrawal", "fee_bump", "cancel"]);
        let defaults = Config::default();
        assert_eq!(
            (defaults.fee_bump_min_age_secs, defaults.cancel_min_age_secs),
            (30, 300)
        );
    }
}
