//! The JSON-RPC calls of an [`Anvil`]: the raw call ([`Anvil::rpc`]) and the helpers tests use
//! (mining, the pool, snapshots, reorgs, transactions, receipts, nonces and balances).

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::json_rpc::{
    ReplyError, RpcCallError, error_chain, parse_reply, quantity, quantity_u64, truncate,
};
use super::{Anvil, POLL_INTERVAL};

/// Counts of the node's transaction pool (`txpool_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxpoolStatus {
    /// Transactions ready to be mined.
    pub pending: u64,
    /// Transactions waiting for an earlier nonce.
    pub queued: u64,
}

impl Anvil {
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
