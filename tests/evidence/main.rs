//! The evidence reader (`opledger_chain::evidence`) against a real anvil node behind JSON-RPC
//! proxies that play the adversaries of the threat model: a lagging node, a node hiding
//! receipts, a node rewriting nonces, a node that is down, a reorganization, and clear-text or
//! under-quorum configurations. Each test asserts the exact reading or the exact reason there is
//! none.

mod adversaries;
mod config;
mod deposits;
mod finality;

use std::time::Duration;

use anyhow::{Context, anyhow};
use opledger_chain::evidence::{Address, B256, BlockRef, EvidenceConfig, EvidenceReader, Finality};
use opledger_testkit::{Anvil, DEV_KEYS, RpcProxy};
use serde_json::{Value, json};

const RECEIPT_TIMEOUT: Duration = Duration::from_secs(10);

/// A real anvil node (automine) and `n` honest proxies in front of it: `n` "independent"
/// endpoints, each of which a test can turn into an adversary.
struct World {
    anvil: Anvil,
    proxies: Vec<RpcProxy>,
}

impl World {
    async fn start(endpoints: usize) -> anyhow::Result<World> {
        let anvil = Anvil::start().await?;
        let mut proxies = Vec::with_capacity(endpoints);
        for _ in 0..endpoints {
            proxies.push(RpcProxy::start(&anvil.rpc_url()).await?);
        }
        Ok(World { anvil, proxies })
    }

    /// A reader of every proxy.
    fn reader(
        &self,
        quorum: usize,
        finality: Finality,
        max_lag_blocks: u64,
    ) -> anyhow::Result<EvidenceReader> {
        Ok(EvidenceReader::new(&config(
            self.proxies.iter().map(RpcProxy::url).collect(),
            quorum,
            finality,
            max_lag_blocks,
        ))?)
    }

    /// Sends 1 wei from anvil's first dev account to its second (mined at once) and returns the
    /// transaction hash and its including block.
    async fn send(&self) -> anyhow::Result<(B256, BlockRef)> {
        let (from, _) = DEV_KEYS[0];
        let (to, _) = DEV_KEYS[1];
        let hash = self
            .anvil
            .send_transaction(json!({ "from": from, "to": to, "value": "0x1" }))
            .await?;
        let receipt = self.anvil.wait_receipt(&hash, RECEIPT_TIMEOUT).await?;
        let block = BlockRef {
            number: quantity(&receipt["blockNumber"])?,
            hash: b256(&receipt["blockHash"])?.0,
        };
        Ok((hash.parse().context("transaction hash")?, block))
    }

    /// The canonical block at `number`, as anvil says.
    async fn block(&self, number: u64) -> anyhow::Result<BlockRef> {
        let block = self
            .anvil
            .rpc(
                "eth_getBlockByNumber",
                json!([format!("{number:#x}"), false]),
            )
            .await?;
        Ok(BlockRef {
            number: quantity(&block["number"])?,
            hash: b256(&block["hash"])?.0,
        })
    }
}

/// A configuration of `urls` with a short timeout, no CA and no headers.
fn config(
    urls: Vec<String>,
    quorum: usize,
    finality: Finality,
    max_lag_blocks: u64,
) -> EvidenceConfig {
    EvidenceConfig {
        urls,
        chain_id: 31337,
        quorum,
        finality,
        max_lag_blocks,
        timeout: Duration::from_secs(5),
        ca_file: None,
        headers: Vec::new(),
        allow_clear_text: false,
    }
}

/// Anvil's first dev account: the sender of every test transaction.
fn sender() -> anyhow::Result<Address> {
    Ok(DEV_KEYS[0].0.parse()?)
}

fn quantity(value: &Value) -> anyhow::Result<u64> {
    let text = value
        .as_str()
        .and_then(|s| s.strip_prefix("0x"))
        .ok_or_else(|| anyhow!("{value} is not a quantity"))?;
    Ok(u64::from_str_radix(text, 16)?)
}

fn b256(value: &Value) -> anyhow::Result<B256> {
    value
        .as_str()
        .ok_or_else(|| anyhow!("{value} is not a hash"))?
        .parse()
        .context("parsing a 32-byte hash")
}
