//! A real anvil node (Foundry's local Ethereum node) per test, driven over plain JSON-RPC.
//!
//! The binary comes from `OPLEDGER_ANVIL_BIN`, which `scripts/test.sh` exports after installing
//! the pinned anvil from npm (`scripts/anvil.sh install`).

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use serde_json::json;
use tokio::time::Instant;

mod calls;
mod json_rpc;

pub use calls::TxpoolStatus;
use json_rpc::quantity_u64;
pub use json_rpc::{RpcCallError, RpcError};

/// The environment variable holding the path of the anvil binary. `scripts/test.sh` sets it.
pub const ANVIL_BIN_ENV: &str = "OPLEDGER_ANVIL_BIN";

/// The first two of anvil's well-known development accounts (mnemonic "test test … junk"):
/// `(address, secret key)`, both `0x`-prefixed hex. Anvil funds and unlocks them, so
/// `eth_sendTransaction` from them works without a signer.
///
/// These keys are public; they must never hold anything outside tests.
pub const DEV_KEYS: [(&str, &str); 2] = [
    (
        "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
        "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    ),
    (
        "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
        "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    ),
];

/// How long [`Anvil::start`] waits for `eth_chainId` to answer.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// Spawns tried when the picked port was taken by someone else in the meantime.
const START_ATTEMPTS: u32 = 5;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const POLL_INTERVAL: Duration = Duration::from_millis(25);
/// Log lines quoted in errors and on a panicking drop.
const LOG_TAIL_LINES: usize = 40;

/// How to start an [`Anvil`]; [`Default`] gives anvil's own defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnvilOptions {
    /// Seconds between blocks (`--block-time`); `None` mines a block for every transaction
    /// (automine).
    pub block_time: Option<u64>,
    /// `--chain-id`; 31337 by default.
    pub chain_id: u64,
    /// Number of funded, unlocked dev accounts (`--accounts`); 10 by default.
    pub accounts: u32,
    /// Balance of each dev account in ETH (`--balance`); 10000 by default.
    pub balance_eth: u64,
}

impl Default for AnvilOptions {
    fn default() -> Self {
        AnvilOptions {
            block_time: None,
            chain_id: 31337,
            accounts: 10,
            balance_eth: 10_000,
        }
    }
}

/// A real anvil node for one test, listening on 127.0.0.1 only.
///
/// Its stdout and stderr (the account list, then one line per RPC call) go to a log file under
/// the system temp folder ([`Self::log_path`], [`Self::log_tail`]); its `HOME` is a folder of its
/// own there, removed on stop, so that anvil's state cache does not pile up in the user's home.
/// It is killed (SIGKILL) on [`Self::stop`] or when dropped; if the test is panicking at that
/// moment, the tail of its log is printed to stderr.
#[derive(Debug)]
pub struct Anvil {
    child: Option<Child>,
    pid: u32,
    port: u16,
    options: AnvilOptions,
    bin: PathBuf,
    log_path: PathBuf,
    home: PathBuf,
    client: reqwest::Client,
    next_id: AtomicU64,
}

impl Anvil {
    /// Starts anvil with [`AnvilOptions::default`] (automine, chain 31337, 10 accounts of
    /// 10000 ETH) and waits until it answers JSON-RPC.
    pub async fn start() -> anyhow::Result<Anvil> {
        Self::start_with(AnvilOptions::default()).await
    }

    /// Starts anvil with `options` on a free port of 127.0.0.1 and waits (up to 20 s) until it
    /// answers `eth_chainId` with the configured chain id.
    pub async fn start_with(options: AnvilOptions) -> anyhow::Result<Anvil> {
        if options.block_time == Some(0) {
            bail!("AnvilOptions::block_time must be at least 1 second; use None for automine");
        }
        let bin = anvil_bin(std::env::var_os(ANVIL_BIN_ENV))?;
        let client = crate::http_client()
            .no_proxy()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .context("building the HTTP client for anvil's JSON-RPC")?;
        let mut attempt = 1;
        loop {
            let mut anvil = Self::spawn(&bin, &options, client.clone())?;
            match anvil.wait_ready().await {
                Ok(()) => return Ok(anvil),
                // Another process took the port between free_port() and anvil's bind.
                Err(e) if attempt < START_ATTEMPTS && anvil.lost_port_race() => {
                    tracing::debug!("anvil could not bind port {}: retrying ({e:#})", anvil.port);
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn spawn(bin: &Path, options: &AnvilOptions, client: reqwest::Client) -> anyhow::Result<Anvil> {
        let name = format!(
            "opledger-anvil-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        );
        let log_path = std::env::temp_dir().join(format!("{name}.log"));
        let home = std::env::temp_dir().join(format!("{name}-home"));
        std::fs::create_dir_all(&home)
            .with_context(|| format!("creating anvil's home folder {}", home.display()))?;
        let log = File::create(&log_path)
            .with_context(|| format!("creating the log file {}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .with_context(|| format!("duplicating the log file {}", log_path.display()))?;

        let port = crate::free_port();
        let mut command = Command::new(bin);
        command.args([
            "--host".to_owned(),
            "127.0.0.1".to_owned(),
            "--port".to_owned(),
            port.to_string(),
            "--chain-id".to_owned(),
            options.chain_id.to_string(),
            "--accounts".to_owned(),
            options.accounts.to_string(),
            "--balance".to_owned(),
            options.balance_eth.to_string(),
        ]);
        if let Some(seconds) = options.block_time {
            command.args(["--block-time".to_owned(), seconds.to_string()]);
        }
        command
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let child = command
            .spawn()
            .with_context(|| format!("starting anvil ({})", bin.display()))?;
        Ok(Anvil {
            pid: child.id(),
            child: Some(child),
            port,
            options: options.clone(),
            bin: bin.to_owned(),
            log_path,
            home,
            client,
            next_id: AtomicU64::new(1),
        })
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                bail!(
                    "anvil ({}, pid {}) exited during startup with {status}; last lines of {}:\n{}",
                    self.bin.display(),
                    self.pid,
                    self.log_path.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            let last_error = match tokio::time::timeout(
                remaining.clamp(Duration::from_millis(1), CONNECT_TIMEOUT),
                self.rpc("eth_chainId", json!([])),
            )
            .await
            {
                Ok(Ok(value)) => {
                    let chain_id = quantity_u64(&value, "eth_chainId")?;
                    if chain_id != self.options.chain_id {
                        bail!(
                            "anvil on {} reports chain id {chain_id}, expected {}",
                            self.rpc_url(),
                            self.options.chain_id
                        );
                    }
                    return Ok(());
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => "eth_chainId timed out".to_owned(),
            };
            if Instant::now() >= deadline {
                bail!(
                    "anvil (pid {}) did not answer eth_chainId on {} within {START_TIMEOUT:?} \
                     (last error: {last_error}); last lines of {}:\n{}",
                    self.pid,
                    self.rpc_url(),
                    self.log_path.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// True when anvil exited because its port was taken.
    fn lost_port_race(&mut self) -> bool {
        self.exit_status().is_some()
            && self
                .log_tail(LOG_TAIL_LINES)
                .to_ascii_lowercase()
                .contains("address already in use")
    }

    fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn rpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The TCP port anvil listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Process id of anvil (still the recorded one after [`Self::stop`]).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The chain id anvil was started with.
    pub fn chain_id(&self) -> u64 {
        self.options.chain_id
    }

    /// The options anvil was started with.
    pub fn options(&self) -> &AnvilOptions {
        &self.options
    }

    /// Path of the file that receives anvil's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines of anvil's output so far.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::child::tail_of(&self.log_path, lines)
    }

    /// True until anvil exits or is stopped.
    pub fn is_running(&mut self) -> bool {
        self.child.is_some() && self.exit_status().is_none()
    }

    /// Kills anvil (SIGKILL), reaps it and removes its home folder. Idempotent.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // An error here means it exited already.
            let _ = child.kill();
            let _ = child.wait();
        }
        if self.home.exists() {
            let _ = std::fs::remove_dir_all(&self.home);
        }
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "--- last lines of anvil (pid {}, {}, log {}) ---\n{}\n--- end of anvil log ---",
                self.pid,
                self.rpc_url(),
                self.log_path.display(),
                self.log_tail(LOG_TAIL_LINES)
            );
        }
    }
}

/// The anvil binary named by the value of [`ANVIL_BIN_ENV`].
fn anvil_bin(value: Option<OsString>) -> anyhow::Result<PathBuf> {
    let path = value
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| {
            anyhow!(
                "{ANVIL_BIN_ENV} is not set: run scripts/test.sh, which installs anvil from npm"
            )
        })?;
    if !path.is_file() {
        bail!(
            "{ANVIL_BIN_ENV}={} is not a file: run scripts/test.sh, which installs anvil from npm",
            path.display()
        );
    }
    Ok(path)
}

#[cfg(test)]
mod tests;
