//! The benchmark's EVM node: anvil spawned with interval mining on a free loopback port, driven
//! over plain JSON-RPC. Killed when dropped.

use anyhow::Context;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long anvil may take to answer after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long funding transfers may take to be mined.
const FUNDING_TIMEOUT: Duration = Duration::from_secs(30);

/// A running anvil node.
#[derive(Debug)]
pub struct Node {
    child: Child,
    url: String,
    http: reqwest::Client,
    home: PathBuf,
    log: PathBuf,
    next_id: AtomicU64,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.home);
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Node {
    /// Starts `bin` mining a block every `block_time` seconds and waits until it answers.
    pub async fn start(bin: &Path, block_time: u64) -> anyhow::Result<Node> {
        anyhow::ensure!(
            bin.is_file(),
            "{} is not a file: `bash scripts/anvil.sh install` prints the anvil binary",
            bin.display()
        );
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            l.local_addr()?.port()
        };
        let name = format!("opledger-bench-anvil-{}", std::process::id());
        let home = std::env::temp_dir().join(format!("{name}-home"));
        let log = std::env::temp_dir().join(format!("{name}.log"));
        std::fs::create_dir_all(&home)?;
        let out = std::fs::File::create(&log)?;
        let err = out.try_clone()?;
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--block-time", &block_time.to_string()])
            .args([
                "--chain-id",
                "31337",
                "--accounts",
                "1",
                "--balance",
                "100000",
            ])
            // anvil keeps state caches under $HOME: keep them out of the user's home.
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()?;
        let mut node = Node {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http,
            home,
            log,
            next_id: AtomicU64::new(1),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = node.child.try_wait()? {
                let tail = std::fs::read_to_string(&node.log).unwrap_or_default();
                anyhow::bail!("anvil exited during startup with {status}:\n{tail}");
            }
            match node.call("eth_chainId", json!([])).await {
                Ok(id) if id == json!("0x7a69") => return Ok(node),
                Ok(other) => anyhow::bail!("anvil reports chain id {other}, expected 31337"),
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(e.context("anvil did not answer within 20 s")),
            }
        }
    }

    /// Its JSON-RPC URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One JSON-RPC call: its result, or an error carrying the node's message.
    pub async fn call(&self, method: &str, params: Value) -> anyhow::Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let reply: Value = self
            .http
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .with_context(|| method.to_owned())?
            .json()
            .await
            .with_context(|| format!("{method}: reply"))?;
        if let Some(error) = reply.get("error").filter(|e| !e.is_null()) {
            anyhow::bail!("{method}: {error}");
        }
        reply
            .get("result")
            .cloned()
            .with_context(|| format!("{method}: no result"))
    }

    /// `eth_sendRawTransaction`: accepted, or the node's refusal as an error.
    pub async fn send_raw(&self, raw: &[u8]) -> anyhow::Result<()> {
        self.call(
            "eth_sendRawTransaction",
            json!([format!("0x{}", hex::encode(raw))]),
        )
        .await
        .map(|_| ())
    }

    /// The number of transactions `address` has sent as of the head block (its next nonce).
    pub async fn nonce(&self, address: &str) -> anyhow::Result<u64> {
        let value = self
            .call("eth_getTransactionCount", json!([address, "latest"]))
            .await?;
        quantity(&value)
    }

    /// Sends `wei` to each address from the node's first (unlocked) dev account and waits until
    /// every transfer is mined.
    pub async fn fund(&self, addresses: &[String], wei: u128) -> anyhow::Result<()> {
        let accounts = self.call("eth_accounts", json!([])).await?;
        let from = accounts
            .get(0)
            .and_then(Value::as_str)
            .context("anvil has no dev account")?
            .to_owned();
        let start = self.nonce(&from).await?;
        for to in addresses {
            self.call(
                "eth_sendTransaction",
                json!([{ "from": from, "to": to, "value": format!("{wei:#x}") }]),
            )
            .await?;
        }
        let target = start + addresses.len() as u64;
        let deadline = Instant::now() + FUNDING_TIMEOUT;
        while self.nonce(&from).await? < target {
            anyhow::ensure!(
                Instant::now() < deadline,
                "funding transfers not mined within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Waits until `address` has sent `count` mined transactions; returns false on timeout.
    pub async fn wait_nonce(
        &self,
        address: &str,
        count: u64,
        timeout: Duration,
    ) -> anyhow::Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.nonce(address).await? >= count {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn quantity(value: &Value) -> anyhow::Result<u64> {
    let text = value.as_str().context("expected a hex quantity")?;
    let digits = text.strip_prefix("0x").context("expected 0x")?;
    Ok(u64::from_str_radix(digits, 16)?)
}
