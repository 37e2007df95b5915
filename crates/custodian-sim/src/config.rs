//! The double's configuration file (JSON), read once at start. See the crate's README.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::amount::{is_address, is_hash};
use crate::faults::Schedule;
use crate::profile::Profile;

/// The whole configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address to listen on; `127.0.0.1:0` (a free port) by default. Loopback only.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The chain the hot wallet pays on.
    pub chain: ChainConfig,
    /// Decimals of the asset (18 for ETH): whole units = wei / 10^decimals.
    #[serde(default = "default_decimals")]
    pub decimals: u32,
    /// Confirmations before COMPLETED / confirmed / TRANSACTION_DONE (1: in a block).
    #[serde(default = "default_confirmations")]
    pub confirmations: u64,
    /// The fault schedule (replaced at run time by `POST /sim/faults`).
    #[serde(default)]
    pub faults: Schedule,
    /// The Fireblocks profile; its routes are served only when set.
    #[serde(default)]
    pub fireblocks: Option<FireblocksConfig>,
    /// The BitGo profile; its routes are served only when set.
    #[serde(default)]
    pub bitgo: Option<BitgoConfig>,
    /// The Coinbase Prime profile; its routes are served only when set.
    #[serde(default)]
    pub prime: Option<PrimeConfig>,
    /// ERC-20 contracts (`0x` and 40 hex digits) by a profile's asset name (Fireblocks
    /// `asset_id`, BitGo `coin`, Prime `currency_symbol`): a profile whose asset is named here
    /// pays by calling `transfer(to, amount)` on the contract from the hot wallet (the amount in
    /// the token's base units: whole units times 10^`decimals`), instead of sending the native
    /// coin. The hot wallet must hold the tokens, and the native coin for gas.
    #[serde(default)]
    pub tokens: BTreeMap<String, String>,
    /// Adversarial tests only: every transfer pays this address (`0x` and 40 hex digits) instead
    /// of the requested destination, while the records keep showing the request's (a custodian
    /// whose payouts go elsewhere). Absent: the requested destination, always.
    #[serde(default)]
    pub divert_to: Option<String>,
    /// Adversarial tests only: no transfer is made; every transfer's record names this
    /// transaction (`0x` and 64 hex digits, one already on chain: say an earlier payout of the
    /// hot wallet's) and goes COMPLETED as if it were the payout (a custodian naming a transfer
    /// made before the request). Absent: the double's own transfer, always.
    #[serde(default)]
    pub names_hash: Option<String>,
}

/// The chain and the hot wallet.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainConfig {
    /// JSON-RPC URL of the node (`http://127.0.0.1:<port>`).
    pub rpc_url: String,
    /// EIP-155 chain id.
    pub chain_id: u64,
    /// The hot wallet's secp256k1 private key, hex (with or without `0x`). The double must be the
    /// only sender from this account.
    pub hot_wallet_key: String,
    /// Priority fee per gas, in wei (1 gwei by default).
    #[serde(default = "default_tip")]
    pub priority_fee_wei: u128,
    /// How often receipts and blocks are polled, in real milliseconds.
    #[serde(default = "default_poll")]
    pub poll_interval_ms: u64,
}

/// Settings every profile has (read from the profile's own keys).
#[derive(Debug, Clone, Default)]
pub struct Timing {
    /// Milliseconds after an accept during which lookups answer not found.
    pub consistency_lag_ms: i64,
    /// Milliseconds a transfer stays in authorization.
    pub authorization_delay_ms: i64,
    /// Where status webhooks are posted.
    pub webhook_url: Option<String>,
}

macro_rules! timing {
    ($($profile:ty),*) => {$(
        impl $profile {
            /// The profile's lags, delays and webhook URL.
            pub fn timing(&self) -> Timing {
                Timing {
                    consistency_lag_ms: secs_ms(self.consistency_lag_secs),
                    authorization_delay_ms: secs_ms(self.authorization_delay_secs),
                    webhook_url: self.webhook_url.clone(),
                }
            }
        }
    )*};
}

timing!(FireblocksConfig, BitgoConfig, PrimeConfig);

/// Seconds to milliseconds, saturating.
pub fn secs_ms(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// The Fireblocks profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FireblocksConfig {
    /// The API key expected in `X-API-Key` and the JWT's `sub`.
    pub api_key: String,
    /// The API key's RSA public key (PEM, SPKI or PKCS#1) that verifies the RS256 JWTs.
    pub api_public_key_pem: String,
    /// The only source vault account id accepted.
    pub vault_account_id: String,
    /// The only asset id accepted (e.g. `ETH`).
    pub asset_id: String,
    /// `workspaceId` of the webhooks.
    pub workspace_id: String,
    /// RSA private keys (PKCS#8 or PKCS#1 PEM) for webhook signatures: the first signs from the
    /// start, each rotation takes the next; generated (2048 bits) when none is left.
    #[serde(default)]
    pub webhook_signing_keys_pem: Vec<String>,
    /// The key that signs forged webhooks (generated when absent).
    #[serde(default)]
    pub webhook_forger_key_pem: Option<String>,
    /// Seconds (double's clock) a rotated-out key stays in the JWKS.
    #[serde(default = "default_overlap")]
    pub webhook_key_overlap_secs: u64,
    /// Seconds (double's clock) after an accept during which lookups answer not found.
    #[serde(default)]
    pub consistency_lag_secs: u64,
    /// Seconds (double's clock) a transfer stays in authorization before it is queued.
    #[serde(default)]
    pub authorization_delay_secs: u64,
    /// Where status webhooks are posted (loopback only); none sent when absent.
    #[serde(default)]
    pub webhook_url: Option<String>,
}

/// The BitGo profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BitgoConfig {
    /// The coin in the paths (e.g. `hteth`).
    pub coin: String,
    /// The wallet id in the paths (32 lowercase hex).
    pub wallet_id: String,
    /// The bearer access token.
    pub access_token: String,
    /// The `walletPassphrase` every send must carry.
    pub wallet_passphrase: String,
    /// The HMAC-SHA256 key of `x-signature-sha256`.
    pub webhook_secret: String,
    /// Seconds (double's clock) after an accept during which lookups answer not found.
    #[serde(default)]
    pub consistency_lag_secs: u64,
    /// Seconds (double's clock) a transfer stays in authorization before it is queued.
    #[serde(default)]
    pub authorization_delay_secs: u64,
    /// Where status webhooks are posted (loopback only); none sent when absent.
    #[serde(default)]
    pub webhook_url: Option<String>,
}

/// The Coinbase Prime profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrimeConfig {
    /// The portfolio id in the paths.
    pub portfolio_id: String,
    /// The wallet id in the withdrawal path and the transactions' `wallet_id`.
    pub wallet_id: String,
    /// `X-CB-ACCESS-KEY`.
    pub access_key: String,
    /// `X-CB-ACCESS-PASSPHRASE`.
    pub passphrase: String,
    /// The HMAC-SHA256 key of request signatures and webhooks (its UTF-8 bytes).
    pub signing_secret: String,
    /// The only `currency_symbol` accepted (e.g. `ETH`).
    pub currency_symbol: String,
    /// Seconds (double's clock) after an accept during which lookups answer not found.
    #[serde(default)]
    pub consistency_lag_secs: u64,
    /// Seconds (double's clock) a transfer stays in authorization before it is queued.
    #[serde(default)]
    pub authorization_delay_secs: u64,
    /// Where status webhooks are posted (loopback only); none sent when absent.
    #[serde(default)]
    pub webhook_url: Option<String>,
}

fn default_listen() -> String {
    "127.0.0.1:0".to_owned()
}

fn default_decimals() -> u32 {
    18
}

fn default_confirmations() -> u64 {
    1
}

fn default_tip() -> u128 {
    1_000_000_000
}

fn default_poll() -> u64 {
    25
}

fn default_overlap() -> u64 {
    600
}

impl Config {
    /// Reads and checks the file.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the config {}", path.display()))?;
        let config: Config = serde_json::from_str(&text)
            .with_context(|| format!("parsing the config {}", path.display()))?;
        config.check()?;
        Ok(config)
    }

    /// Every rule the file format cannot say: loopback addresses, sizes, ranges.
    pub fn check(&self) -> anyhow::Result<()> {
        let listen: std::net::SocketAddr = self.listen.parse().context("listen")?;
        if !listen.ip().is_loopback() {
            bail!("listen must be a loopback address, not {listen}");
        }
        loopback_url("chain.rpc_url", &self.chain.rpc_url)?;
        if self.decimals > 30 {
            bail!("decimals must be at most 30");
        }
        if self.confirmations == 0 {
            bail!("confirmations must be at least 1");
        }
        if self
            .faults
            .rules
            .iter()
            .any(|r| !(0.0..=1.0).contains(&r.rate))
        {
            bail!("faults: every rate must be in [0, 1]");
        }
        if self.fireblocks.is_none() && self.bitgo.is_none() && self.prime.is_none() {
            bail!("configure at least one of fireblocks, bitgo, prime");
        }
        let timings = [
            self.fireblocks.as_ref().map(FireblocksConfig::timing),
            self.bitgo.as_ref().map(BitgoConfig::timing),
            self.prime.as_ref().map(PrimeConfig::timing),
        ];
        for timing in timings.into_iter().flatten() {
            if let Some(url) = &timing.webhook_url {
                loopback_url("webhook_url", url)?;
            }
        }
        if let Some(bitgo) = &self.bitgo {
            let id = &bitgo.wallet_id;
            if id.len() != 32 || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                bail!("bitgo.wallet_id must be 32 lowercase hex digits");
            }
        }
        if let Some(asset) = self
            .tokens
            .iter()
            .find(|(_, c)| !is_address(c))
            .map(|t| t.0)
        {
            bail!("tokens.{asset} must be 0x and 40 hex digits");
        }
        if self.divert_to.as_deref().is_some_and(|a| !is_address(a)) {
            bail!("divert_to must be 0x and 40 hex digits");
        }
        if self.names_hash.as_deref().is_some_and(|h| !is_hash(h)) {
            bail!("names_hash must be 0x and 64 hex digits");
        }
        Ok(())
    }

    /// The token contract `profile` pays in, if its asset is one of [`Config::tokens`]; `None`:
    /// the native coin.
    pub fn token_of(&self, profile: Profile) -> Option<&str> {
        let asset = match profile {
            Profile::Fireblocks => self.fireblocks.as_ref().map(|c| c.asset_id.as_str()),
            Profile::Bitgo => self.bitgo.as_ref().map(|c| c.coin.as_str()),
            Profile::Prime => self.prime.as_ref().map(|c| c.currency_symbol.as_str()),
        }?;
        self.tokens.get(asset).map(String::as_str)
    }
}

/// Refuses a URL that is not `http://` on a loopback host: the double only talks to this machine.
pub fn loopback_url(what: &str, url: &str) -> anyhow::Result<()> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{what} must start with http://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    };
    if !matches!(host, "127.0.0.1" | "localhost" | "[::1]") && !host.starts_with("127.") {
        bail!("{what} must be on a loopback host (127.0.0.1, localhost, [::1]), not {host}");
    }
    Ok(())
}
