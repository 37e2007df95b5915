//! The settings of one custodian account, one section per profile (`profile = "..."` picks it).
//! Credentials are paths to files holding them, never the secrets themselves.

use crate::amount::MAX_DECIMALS;
use crate::codec::is_plain_id;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// One custodian account.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "profile", rename_all = "snake_case")]
pub enum AccountConfig {
    /// Fireblocks v1 (`lookup_by_reference`).
    LookupByReference(FireblocksConfig),
    /// BitGo (`one_send_per_reference`).
    OneSendPerReference(BitGoConfig),
    /// Coinbase Prime (`no_lookup`).
    NoLookup(PrimeConfig),
}

/// A Fireblocks v1 account.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FireblocksConfig {
    /// The API's base URL (`https://api.fireblocks.io`): `http(s)://host[:port]`, no path.
    pub base_url: String,
    /// File holding the API key (sent as `X-API-Key` and the token's `sub`).
    pub api_key_file: PathBuf,
    /// File holding the API secret: an RSA private key, PKCS#8 PEM (`BEGIN PRIVATE KEY`).
    pub api_secret_file: PathBuf,
    /// The vault account paying (`source.id`).
    pub vault_account_id: String,
    /// The provider's asset id (`ETH`).
    pub asset_id: String,
    /// The asset's decimals (18 for ETH): amounts are sent in whole units.
    pub decimals: u8,
    /// Seconds one call may take (connect included); 20 when absent.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// PEM CA alone trusted for an `https` base URL; absent: the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Seconds after our last request during which "not found" means "not indexed yet".
    pub consistency_window_secs: u64,
}

/// A BitGo wallet.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BitGoConfig {
    /// The API's base URL: `http(s)://host[:port]`, no path.
    pub base_url: String,
    /// File holding the access token (`Authorization: Bearer`).
    pub access_token_file: PathBuf,
    /// File holding the wallet passphrase (`walletPassphrase`, added to the body when sent, never
    /// stored with it).
    pub wallet_passphrase_file: PathBuf,
    /// The coin (`eth`, `hteth`).
    pub coin: String,
    /// The wallet id: 32 lowercase hex digits.
    pub wallet_id: String,
    /// Seconds one call may take (connect included); 20 when absent.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// PEM CA alone trusted for an `https` base URL; absent: the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Seconds after our last request during which "not found" means "not indexed yet".
    pub consistency_window_secs: u64,
}

/// A Coinbase Prime portfolio wallet.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrimeConfig {
    /// The API's base URL: `http(s)://host[:port]`, no path.
    pub base_url: String,
    /// File holding the access key (`X-CB-ACCESS-KEY`).
    pub access_key_file: PathBuf,
    /// File holding the passphrase (`X-CB-ACCESS-PASSPHRASE`).
    pub passphrase_file: PathBuf,
    /// File holding the signing secret (the HMAC key, its bytes as written).
    pub signing_key_file: PathBuf,
    /// The portfolio id.
    pub portfolio_id: String,
    /// The wallet id paying.
    pub wallet_id: String,
    /// The currency symbol (`ETH`).
    pub currency_symbol: String,
    /// The asset's decimals (18 for ETH): amounts are sent in whole units.
    pub decimals: u8,
    /// Seconds one call may take (connect included); 20 when absent.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// PEM CA alone trusted for an `https` base URL; absent: the system's roots.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Seconds the provider's list may lag behind a withdrawal.
    pub consistency_window_secs: u64,
}

fn default_timeout() -> u64 {
    20
}

/// The longest timeout and consistency window accepted.
const MAX_TIMEOUT_SECS: u64 = 300;
const MAX_WINDOW_SECS: u64 = 7 * 24 * 3600;

/// Why an account could not be set up. Errors name the setting, never a value.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A setting is invalid.
    #[error("{field}: {problem}")]
    Invalid {
        /// The setting.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A secret file could not be read.
    #[error("{field}: cannot read {}: {source}", path.display())]
    ReadSecret {
        /// The setting naming the file.
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Client(#[from] opledger_chain::ClientError),
}

/// `Err(SetupError::Invalid)` for `field`.
pub fn invalid<T>(field: &'static str, problem: &'static str) -> Result<T, SetupError> {
    Err(SetupError::Invalid { field, problem })
}

/// The base URL without a trailing slash: `http` or `https`, a host, no credentials, no path, no
/// query, no fragment (request paths, which the providers sign, start at the root).
pub fn base_url(field: &'static str, text: &str) -> Result<String, SetupError> {
    let Ok(url) = reqwest::Url::parse(text) else {
        return invalid(field, "not a URL");
    };
    if !matches!(url.scheme(), "http" | "https") {
        return invalid(field, "must be http or https");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return invalid(field, "must name a host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return invalid(field, "must not carry credentials");
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return invalid(field, "must have no path, query or fragment");
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// The call timeout.
pub fn timeout(field: &'static str, secs: u64) -> Result<Duration, SetupError> {
    if secs == 0 || secs > MAX_TIMEOUT_SECS {
        return invalid(field, "must be 1 to 300 seconds");
    }
    Ok(Duration::from_secs(secs))
}

/// The consistency window.
pub fn window(field: &'static str, secs: u64) -> Result<Duration, SetupError> {
    if secs > MAX_WINDOW_SECS {
        return invalid(field, "must be at most 7 days");
    }
    Ok(Duration::from_secs(secs))
}

/// An identifier used in paths and bodies.
pub fn plain_id(field: &'static str, text: &str) -> Result<(), SetupError> {
    if is_plain_id(text) {
        Ok(())
    } else {
        invalid(
            field,
            "must be 1 to 128 characters of [A-Za-z0-9_.-], not dots alone",
        )
    }
}

/// An asset's decimals.
pub fn decimals(field: &'static str, decimals: u8) -> Result<u8, SetupError> {
    if decimals > MAX_DECIMALS {
        return invalid(field, "must be at most 38");
    }
    Ok(decimals)
}

/// A BitGo wallet id.
pub fn bitgo_wallet_id(field: &'static str, text: &str) -> Result<(), SetupError> {
    if text.len() == 32
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        invalid(field, "must be 32 lowercase hex digits")
    }
}

#[cfg(test)]
mod tests;
