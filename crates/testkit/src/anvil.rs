//! A real anvil node (Foundry's local Ethereum node) per test, driven over plain JSON-RPC.
//!
//! The binary comes from `OPLEDGER_ANVIL_BIN`, which `scripts/test.sh` exports after installing
//! the pinned anvil from npm (`scripts/anvil.sh install`).

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use tokio::time::Instant;

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

/// The `error` member of a JSON-RPC 2.0 response.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// JSON-RPC error code (e.g. -32003 for a rejected transaction, -32602 for bad params).
    pub code: i64,
    /// The node's message, e.g. "nonce too low" or "transaction already imported".
    pub message: String,
    /// The optional `data` member (revert data, details).
    pub data: Option<Value>,
}

impl RpcError {
    /// The JSON-RPC error anywhere in the chain of an `anyhow` error (from an [`RpcCallError`]
    /// converted with `?`, with or without added context).
    pub fn find_in(error: &anyhow::Error) -> Option<&RpcError> {
        error.chain().find_map(|e| {
            e.downcast_ref::<RpcCallError>()
                .and_then(RpcCallError::rpc_error)
                .or_else(|| e.downcast_ref::<RpcError>())
        })
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error {}: {}", self.code, self.message)?;
        match &self.data {
            None | Some(Value::Null) => Ok(()),
            Some(data) => write!(f, " (data: {data})"),
        }
    }
}

impl std::error::Error for RpcError {}

/// Why a JSON-RPC call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcCallError {
    /// No JSON-RPC answer: connection refused, timeout, HTTP error without a JSON-RPC body, or a
    /// body that is neither a result nor an error.
    #[error("JSON-RPC {method} to {url} failed: {detail}")]
    Transport {
        /// The called method.
        method: String,
        /// The node's URL.
        url: String,
        /// What went wrong, with the underlying causes.
        detail: String,
    },
    /// The node answered with a JSON-RPC error.
    #[error("JSON-RPC {method} failed: {error}")]
    Rpc {
        /// The called method.
        method: String,
        /// The node's error: code and message.
        error: RpcError,
    },
}

impl RpcCallError {
    /// The node's error, for [`RpcCallError::Rpc`].
    pub fn rpc_error(&self) -> Option<&RpcError> {
        match self {
            RpcCallError::Rpc { error, .. } => Some(error),
            RpcCallError::Transport { .. } => None,
        }
    }

    /// The JSON-RPC error code, for [`RpcCallError::Rpc`].
    pub fn code(&self) -> Option<i64> {
        self.rpc_error().map(|e| e.code)
    }

    /// The node's error message, for [`RpcCallError::Rpc`].
    pub fn message(&self) -> Option<&str> {
        self.rpc_error().map(|e| e.message.as_str())
    }
}

/// Counts of the node's transaction pool (`txpool_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxpoolStatus {
    /// Transactions ready to be mined.
    pub pending: u64,
    /// Transactions waiting for an earlier nonce.
    pub queued: u64,
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

    /// One JSON-RPC 2.0 call over HTTP POST: the `result` (possibly `null`), or the node's error
    /// code and message ([`RpcCallError::Rpc`]), or [`RpcCallError::Transport`].
    pub async fn rpc(&self, method: &str, params: Value) -> Result<Value, RpcCallError> {
        let url = self.rpc_url();
        let transport = |detail: String| RpcCallError::Transport {
            method: method.to_owned(),
            url: url.clone(),
            detail,
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = self
            .client
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| transport(error_chain(&e)))?;
        let status = response.status();
        let text = response.text().await.map_err(|e| {
            transport(format!(
                "reading the HTTP {status} body: {}",
                error_chain(&e)
            ))
        })?;
        let reply: Value = serde_json::from_str(&text).map_err(|e| {
            transport(format!(
                "HTTP {status} with a body that is not JSON ({e}): {}",
                truncate(&text, 500)
            ))
        })?;
        parse_reply(method, reply).map_err(|e| match e {
            ReplyError::Rpc(error) => RpcCallError::Rpc {
                method: method.to_owned(),
                error,
            },
            ReplyError::Malformed(detail) => transport(format!("HTTP {status}: {detail}")),
        })
    }

    /// A transaction hash returned by `method`.
    fn hash_string(&self, method: &str, value: Value) -> Result<String, RpcCallError> {
        match value {
            Value::String(hash) => Ok(hash),
            other => Err(RpcCallError::Transport {
                method: method.to_owned(),
                url: self.rpc_url(),
                detail: format!("expected a transaction hash, got {other}"),
            }),
        }
    }

    /// [`Self::rpc`] for helpers: the error converted to `anyhow` (see [`RpcError::find_in`]).
    async fn call(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        Ok(self.rpc(method, params).await?)
    }

    /// Turns automine on or off (`evm_setAutomine`). Off, transactions wait in the pool until
    /// [`Self::mine`] (or the block time, if one was set).
    pub async fn set_automine(&self, enabled: bool) -> anyhow::Result<()> {
        self.call("evm_setAutomine", json!([enabled])).await?;
        Ok(())
    }

    /// Sets the block time (`evm_setIntervalMining`): a block every `seconds`, or, with 0, no
    /// block at all until [`Self::mine`] or the next call (transactions wait in the pool).
    pub async fn set_interval_mining(&self, seconds: u64) -> anyhow::Result<()> {
        self.call("evm_setIntervalMining", json!([seconds])).await?;
        Ok(())
    }

    /// Mines `blocks` blocks now (`anvil_mine`), including pending transactions.
    pub async fn mine(&self, blocks: u64) -> anyhow::Result<()> {
        if blocks > 0 {
            self.call("anvil_mine", json!([format!("{blocks:#x}")]))
                .await?;
        }
        Ok(())
    }

    /// Removes a transaction from the pool (`anvil_dropTransaction`); false if it was not
    /// there.
    pub async fn drop_transaction(&self, hash: &str) -> anyhow::Result<bool> {
        let dropped = self.call("anvil_dropTransaction", json!([hash])).await?;
        Ok(!dropped.is_null())
    }

    /// Replaces the last `depth` blocks with as many new empty ones (`anvil_reorg`): the block
    /// number stays, the hashes change, and the transactions of those blocks are gone.
    pub async fn reorg(&self, depth: u64) -> anyhow::Result<()> {
        self.call("anvil_reorg", json!([depth, []])).await?;
        Ok(())
    }

    /// Snapshots the whole chain state (`evm_snapshot`); the id goes to [`Self::revert`].
    pub async fn snapshot(&self) -> anyhow::Result<String> {
        let id = self.call("evm_snapshot", json!([])).await?;
        id.as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("evm_snapshot returned {id}, expected a hex string"))
    }

    /// Goes back to a snapshot (`evm_revert`); false if the id is unknown. A snapshot can be
    /// reverted to once.
    pub async fn revert(&self, snapshot_id: &str) -> anyhow::Result<bool> {
        let reverted = self.call("evm_revert", json!([snapshot_id])).await?;
        reverted
            .as_bool()
            .ok_or_else(|| anyhow!("evm_revert returned {reverted}, expected a boolean"))
    }

    /// Submits a signed transaction (`eth_sendRawTransaction`); its hash, or the node's
    /// rejection ("nonce too low", "transaction already imported", …) as
    /// [`RpcCallError::Rpc`].
    pub async fn send_raw_transaction(&self, raw: &[u8]) -> Result<String, RpcCallError> {
        let hash = self
            .rpc(
                "eth_sendRawTransaction",
                json!([format!("0x{}", hex::encode(raw))]),
            )
            .await?;
        self.hash_string("eth_sendRawTransaction", hash)
    }

    /// Sends a transaction from an unlocked dev account (`eth_sendTransaction`), e.g.
    /// `json!({"from": DEV_KEYS[0].0, "to": DEV_KEYS[1].0, "value": "0x1"})`; its hash.
    pub async fn send_transaction(&self, tx: Value) -> Result<String, RpcCallError> {
        let hash = self.rpc("eth_sendTransaction", json!([tx])).await?;
        self.hash_string("eth_sendTransaction", hash)
    }

    /// Signs a transaction with an unlocked dev account's key (`eth_signTransaction`) without
    /// sending it: the raw bytes for [`Self::send_raw_transaction`]. Give `nonce`, `gas` and the
    /// fees to get exactly the transaction wanted.
    pub async fn sign_transaction(&self, tx: Value) -> anyhow::Result<Vec<u8>> {
        let raw = self.call("eth_signTransaction", json!([tx])).await?;
        let text = raw
            .as_str()
            .ok_or_else(|| anyhow!("eth_signTransaction returned {raw}, expected hex bytes"))?;
        hex::decode(text.trim_start_matches("0x"))
            .with_context(|| format!("eth_signTransaction returned invalid hex {text}"))
    }

    /// The receipt of a mined transaction (`eth_getTransactionReceipt`); `None` while it is not
    /// mined (or if it was dropped).
    pub async fn receipt(&self, hash: &str) -> anyhow::Result<Option<Value>> {
        let receipt = self
            .call("eth_getTransactionReceipt", json!([hash]))
            .await?;
        Ok((!receipt.is_null()).then_some(receipt))
    }

    /// Polls [`Self::receipt`] until there is one, or fails after `timeout`. Needed even with
    /// automine: right after `eth_sendRawTransaction` the receipt can still be `null`.
    pub async fn wait_receipt(&self, hash: &str, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(receipt) = self.receipt(hash).await? {
                return Ok(receipt);
            }
            if Instant::now() >= deadline {
                bail!("no receipt for transaction {hash} within {timeout:?}");
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    }

    /// The transaction count of `address` at `tag` (`"latest"`, `"pending"`, or a block number
    /// in hex): the next nonce to use.
    pub async fn nonce(&self, address: &str, tag: &str) -> anyhow::Result<u64> {
        let count = self
            .call("eth_getTransactionCount", json!([address, tag]))
            .await?;
        quantity_u64(&count, "eth_getTransactionCount")
    }

    /// The balance of `address` in wei at the latest block (`eth_getBalance`).
    pub async fn balance(&self, address: &str) -> anyhow::Result<u128> {
        let balance = self
            .call("eth_getBalance", json!([address, "latest"]))
            .await?;
        quantity(&balance, "eth_getBalance")
    }

    /// The number of the latest block (`eth_blockNumber`).
    pub async fn block_number(&self) -> anyhow::Result<u64> {
        let number = self.call("eth_blockNumber", json!([])).await?;
        quantity_u64(&number, "eth_blockNumber")
    }

    /// The pool's counts (`txpool_status`).
    pub async fn txpool_status(&self) -> anyhow::Result<TxpoolStatus> {
        let status = self.call("txpool_status", json!([])).await?;
        let field = |name: &str| {
            let value = status.get(name).cloned().unwrap_or(Value::Null);
            quantity_u64(&value, &format!("txpool_status.{name}"))
        };
        Ok(TxpoolStatus {
            pending: field("pending")?,
            queued: field("queued")?,
        })
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

enum ReplyError {
    Rpc(RpcError),
    Malformed(String),
}

/// The `result` of a JSON-RPC 2.0 response, or its `error`.
fn parse_reply(method: &str, reply: Value) -> Result<Value, ReplyError> {
    let Value::Object(mut members) = reply else {
        return Err(ReplyError::Malformed(format!(
            "the {method} response is not a JSON object: {}",
            truncate(&reply.to_string(), 500)
        )));
    };
    if let Some(error) = members.remove("error").filter(|e| !e.is_null()) {
        return Err(ReplyError::Rpc(RpcError {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: match error.get("message") {
                Some(Value::String(message)) => message.clone(),
                _ => error.to_string(),
            },
            data: error.get("data").cloned(),
        }));
    }
    members.remove("result").ok_or_else(|| {
        ReplyError::Malformed(format!(
            "the {method} response has neither result nor error: {}",
            truncate(&Value::Object(members).to_string(), 500)
        ))
    })
}

/// A JSON-RPC quantity (`"0x1a"`) as a number.
fn quantity(value: &Value, what: &str) -> anyhow::Result<u128> {
    let text = value
        .as_str()
        .ok_or_else(|| anyhow!("{what}: expected a hex quantity, got {value}"))?;
    let digits = text
        .strip_prefix("0x")
        .filter(|d| !d.is_empty())
        .ok_or_else(|| anyhow!("{what}: expected a 0x-prefixed hex quantity, got {text}"))?;
    u128::from_str_radix(digits, 16)
        .with_context(|| format!("{what}: {text} is not a hex quantity that fits in 128 bits"))
}

fn quantity_u64(value: &Value, what: &str) -> anyhow::Result<u64> {
    let n = quantity(value, what)?;
    u64::try_from(n).with_context(|| format!("{what}: {n} does not fit in 64 bits"))
}

/// An error and its causes, "a: b: c".
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEI_PER_ETH: u128 = 1_000_000_000_000_000_000;
    const RECEIPT_TIMEOUT: Duration = Duration::from_secs(10);

    fn process_exists(pid: u32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn unset_binary_variable_is_a_clear_error() {
        for value in [None, Some(OsString::new())] {
            let err = anvil_bin(value).err().map(|e| e.to_string());
            assert_eq!(
                err.as_deref(),
                Some(
                    "OPLEDGER_ANVIL_BIN is not set: run scripts/test.sh, which installs anvil from npm"
                )
            );
        }
        let err = anvil_bin(Some("/nonexistent/anvil".into()))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("is not a file"), "{err}");
    }

    #[test]
    fn replies_and_quantities_parse() {
        let ok = parse_reply("m", json!({"jsonrpc": "2.0", "id": 1, "result": null}));
        assert!(matches!(ok, Ok(Value::Null)));
        let err = parse_reply(
            "m",
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32003, "message": "nonce too low"}}),
        );
        match err {
            Err(ReplyError::Rpc(e)) => {
                assert_eq!(e.code, -32003);
                assert_eq!(e.message, "nonce too low");
                assert_eq!(e.to_string(), "error -32003: nonce too low");
            }
            _ => panic!("expected an RPC error"),
        }
        assert!(matches!(
            parse_reply("m", json!({"jsonrpc": "2.0", "id": 1})),
            Err(ReplyError::Malformed(_))
        ));
        assert_eq!(quantity(&json!("0x0"), "q").ok(), Some(0));
        assert_eq!(quantity(&json!("0x1f"), "q").ok(), Some(31));
        assert!(quantity(&json!("0x"), "q").is_err());
        assert!(quantity(&json!("12"), "q").is_err());
        assert!(quantity(&json!(12), "q").is_err());
        assert!(quantity_u64(&json!("0x10000000000000000"), "q").is_err());
    }

    #[tokio::test]
    async fn start_and_stop() -> anyhow::Result<()> {
        let mut anvil = Anvil::start().await?;
        let pid = anvil.pid();
        assert!(pid > 0);
        assert!(process_exists(pid), "anvil pid {pid} is not running");
        assert!(anvil.is_running());
        assert!(anvil.rpc_url().starts_with("http://127.0.0.1:"));
        assert_eq!(anvil.block_number().await?, 0);

        anvil.stop();
        assert!(!anvil.is_running());
        assert!(
            !process_exists(pid),
            "anvil pid {pid} still exists after stop"
        );
        assert_eq!(anvil.pid(), pid);
        anvil.stop(); // idempotent
        let err = anvil.rpc("eth_blockNumber", json!([])).await.err();
        assert!(
            matches!(err, Some(RpcCallError::Transport { .. })),
            "{err:?}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn drop_kills_the_node() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;
        let pid = anvil.pid();
        drop(anvil);
        assert!(
            !process_exists(pid),
            "anvil pid {pid} still exists after drop"
        );
        Ok(())
    }

    #[tokio::test]
    async fn options_chain_id_accounts_and_balance() -> anyhow::Result<()> {
        let anvil = Anvil::start_with(AnvilOptions {
            chain_id: 1337,
            accounts: 3,
            balance_eth: 42,
            ..AnvilOptions::default()
        })
        .await?;
        assert_eq!(anvil.chain_id(), 1337);
        assert_eq!(anvil.rpc("eth_chainId", json!([])).await?, json!("0x539"));
        let accounts = anvil.rpc("eth_accounts", json!([])).await?;
        assert_eq!(accounts.as_array().map(Vec::len), Some(3), "{accounts}");
        assert_eq!(anvil.balance(DEV_KEYS[0].0).await?, 42 * WEI_PER_ETH);
        Ok(())
    }

    #[tokio::test]
    async fn dev_accounts_are_funded_and_match_anvil() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;
        assert_eq!(anvil.chain_id(), 31337);
        assert_eq!(anvil.rpc("eth_chainId", json!([])).await?, json!("0x7a69"));
        let accounts = anvil.rpc("eth_accounts", json!([])).await?;
        let log = anvil.log_tail(200);
        for (i, (address, secret)) in DEV_KEYS.iter().enumerate() {
            assert_eq!(anvil.balance(address).await?, 10_000 * WEI_PER_ETH);
            assert_eq!(
                accounts[i].as_str().map(str::to_ascii_lowercase),
                Some(address.to_ascii_lowercase())
            );
            // Anvil prints its accounts and keys at startup.
            assert!(
                log.contains(&format!("({i}) {address}")),
                "address {i} not in log:\n{log}"
            );
            assert!(
                log.contains(&format!("({i}) {secret}")),
                "key {i} not in log:\n{log}"
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn mine_snapshot_revert_and_reorg() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;
        let start = anvil.block_number().await?;
        anvil.mine(3).await?;
        assert_eq!(anvil.block_number().await?, start + 3);
        anvil.mine(0).await?;
        assert_eq!(anvil.block_number().await?, start + 3);

        let snapshot = anvil.snapshot().await?;
        anvil.mine(2).await?;
        assert_eq!(anvil.block_number().await?, start + 5);
        assert!(anvil.revert(&snapshot).await?);
        assert_eq!(anvil.block_number().await?, start + 3);

        let head = anvil.block_number().await?;
        let block_hash = |block: Value| block.get("hash").cloned().unwrap_or(Value::Null);
        let tag = format!("{head:#x}");
        let before = block_hash(
            anvil
                .rpc("eth_getBlockByNumber", json!([tag, false]))
                .await?,
        );
        anvil.reorg(2).await?;
        assert_eq!(anvil.block_number().await?, head);
        let after = block_hash(
            anvil
                .rpc("eth_getBlockByNumber", json!([tag, false]))
                .await?,
        );
        assert!(before.is_string());
        assert_ne!(before, after, "the head block was not replaced");
        Ok(())
    }

    #[tokio::test]
    async fn automine_sends_and_mines() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;
        let (from, _) = DEV_KEYS[0];
        let (to, _) = DEV_KEYS[1];
        let hash = anvil
            .send_transaction(json!({"from": from, "to": to, "value": "0x1"}))
            .await?;
        let receipt = anvil.wait_receipt(&hash, RECEIPT_TIMEOUT).await?;
        assert_eq!(receipt.get("status"), Some(&json!("0x1")), "{receipt}");
        assert_eq!(anvil.nonce(from, "latest").await?, 1);
        assert_eq!(anvil.balance(to).await?, 10_000 * WEI_PER_ETH + 1);
        Ok(())
    }

    #[tokio::test]
    async fn dropped_transaction_is_never_mined() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;
        let (from, _) = DEV_KEYS[0];
        let (to, _) = DEV_KEYS[1];
        anvil.set_automine(false).await?;
        let hash = anvil
            .send_transaction(json!({"from": from, "to": to, "value": "0x1"}))
            .await?;
        assert_eq!(
            anvil.txpool_status().await?,
            TxpoolStatus {
                pending: 1,
                queued: 0
            }
        );
        assert_eq!(anvil.nonce(from, "pending").await?, 1);
        assert_eq!(anvil.nonce(from, "latest").await?, 0);
        assert_eq!(anvil.receipt(&hash).await?, None);

        assert!(anvil.drop_transaction(&hash).await?);
        assert!(!anvil.drop_transaction(&hash).await?);
        assert_eq!(anvil.txpool_status().await?.pending, 0);
        let start = anvil.block_number().await?;
        anvil.mine(1).await?;
        assert_eq!(anvil.block_number().await?, start + 1);
        assert_eq!(anvil.receipt(&hash).await?, None);
        assert_eq!(anvil.nonce(from, "latest").await?, 0);
        Ok(())
    }

    #[tokio::test]
    async fn rejected_raw_transactions_carry_anvil_messages() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;

        // Garbage bytes: anvil cannot decode them.
        let err = anvil.send_raw_transaction(&[0xde, 0xad, 0xbe, 0xef]).await;
        let error = match err {
            Err(RpcCallError::Rpc { error, .. }) => error,
            other => panic!("expected a JSON-RPC error, got {other:?}"),
        };
        assert!(
            error.message.to_ascii_lowercase().contains("decode"),
            "{error}"
        );
        assert_ne!(error.code, 0);

        // A transaction signed by anvil itself, sent twice with automine off, then again once
        // mined: the node's own words for each case.
        anvil.set_automine(false).await?;
        let (from, _) = DEV_KEYS[0];
        let (to, _) = DEV_KEYS[1];
        let raw = anvil
            .sign_transaction(json!({
                "from": from, "to": to, "value": "0x1", "nonce": "0x0", "gas": "0x5208",
                "maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x1",
                "chainId": format!("{:#x}", anvil.chain_id()),
            }))
            .await?;
        let hash = anvil.send_raw_transaction(&raw).await?;
        let again = anvil.send_raw_transaction(&raw).await.err();
        assert_eq!(
            again.as_ref().and_then(RpcCallError::message),
            Some("transaction already imported"),
            "{again:?}"
        );
        anvil.mine(1).await?;
        let receipt = anvil.wait_receipt(&hash, RECEIPT_TIMEOUT).await?;
        assert_eq!(receipt.get("status"), Some(&json!("0x1")), "{receipt}");
        let late = anvil.send_raw_transaction(&raw).await.err();
        assert_eq!(
            late.as_ref().and_then(RpcCallError::message),
            Some("nonce too low"),
            "{late:?}"
        );

        // Through anyhow, with context, the JSON-RPC error is still found.
        let wrapped = anyhow::Error::from(late.ok_or_else(|| anyhow!("no error"))?)
            .context("sending the withdrawal");
        assert_eq!(
            RpcError::find_in(&wrapped).map(|e| e.message.as_str()),
            Some("nonce too low")
        );
        Ok(())
    }

    #[tokio::test]
    async fn block_time_mines_by_itself() -> anyhow::Result<()> {
        let anvil = Anvil::start_with(AnvilOptions {
            block_time: Some(1),
            ..AnvilOptions::default()
        })
        .await?;
        let start = anvil.block_number().await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while anvil.block_number().await? <= start {
            assert!(
                Instant::now() < deadline,
                "no block mined with --block-time 1 within 10s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            Anvil::start_with(AnvilOptions {
                block_time: Some(0),
                ..AnvilOptions::default()
            })
            .await
            .is_err()
        );
        Ok(())
    }
}
