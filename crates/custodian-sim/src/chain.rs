//! The hot wallet on the chain: EIP-1559 transfers signed here (of the native coin, or an
//! ERC-20 `transfer(to, amount)` call on a token's contract), sent and followed over plain
//! JSON-RPC. The double is the only sender of the wallet; it tracks the nonce itself.

use std::time::Duration;

use alloy_consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy_eips::eip2718::Encodable2718;
use alloy_primitives::{Address, Bytes, Signature, TxKind, U256};
use anyhow::{Context, anyhow, bail};
use k256::ecdsa::SigningKey;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::config::ChainConfig;

/// Gas of a native transfer to an account.
const TRANSFER_GAS: u64 = 21_000;
/// Gas of an ERC-20 `transfer` (about 52k when the recipient's balance is new), with room.
const TOKEN_TRANSFER_GAS: u64 = 100_000;
/// The selector of `transfer(address,uint256)`.
const TRANSFER_SELECTOR: [u8; 4] = [0xa9, 0x05, 0x9c, 0xbb];

/// What a transfer pays in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coin {
    /// The network's native coin: the transaction's value.
    Native,
    /// An ERC-20 token: a `transfer(to, amount)` call on this contract.
    Token(Address),
}

/// One payment of the hot wallet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payment {
    /// What it pays in.
    pub coin: Coin,
    /// Who it pays.
    pub to: Address,
    /// How much: wei, or the token's base units.
    pub amount: u128,
}

impl Payment {
    /// The call that makes the payment: the account called, the value sent, the input and the
    /// gas limit.
    fn call(&self) -> (Address, U256, Bytes, u64) {
        match self.coin {
            Coin::Native => (self.to, U256::from(self.amount), Bytes::new(), TRANSFER_GAS),
            Coin::Token(contract) => {
                let mut input = Vec::with_capacity(4 + 32 + 32);
                input.extend_from_slice(&TRANSFER_SELECTOR);
                input.extend_from_slice(&[0; 12]);
                input.extend_from_slice(self.to.as_slice());
                input.extend_from_slice(&U256::from(self.amount).to_be_bytes::<32>());
                (contract, U256::ZERO, Bytes::from(input), TOKEN_TRANSFER_GAS)
            }
        }
    }
}

/// A signed transaction.
#[derive(Debug, Clone)]
pub struct SignedTx {
    /// EIP-2718 bytes.
    pub raw: Vec<u8>,
    /// Its hash, lowercase `0x` hex.
    pub hash: String,
    /// Its nonce.
    pub nonce: u64,
}

/// What became of a send.
#[derive(Debug)]
pub enum Sent {
    /// The node took it (or already had it).
    Accepted(SignedTx),
    /// No answer: it may be in the pool; its nonce stays used and it is sent again until mined.
    Unknown(SignedTx),
    /// The node refused it: nothing sent, the nonce given back.
    Refused(String),
}

/// A mined transaction.
#[derive(Debug, Clone, Copy)]
pub struct Receipt {
    /// Its block.
    pub block: u64,
    /// Whether it executed.
    pub success: bool,
}

/// Why a JSON-RPC call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcFailure {
    /// The node answered with an error.
    #[error("node error: {0}")]
    Node(String),
    /// No usable answer.
    #[error("transport: {0}")]
    Transport(String),
}

/// The hot wallet and its node.
#[derive(Debug)]
pub struct Chain {
    http: reqwest::Client,
    url: String,
    chain_id: u64,
    key: SigningKey,
    address: Address,
    tip: u128,
    /// The next nonce (read from the node on first use); held while signing and sending.
    next_nonce: Mutex<Option<u64>>,
    /// Polling interval of receipts and blocks.
    pub poll: Duration,
}

impl Chain {
    /// The wallet of `config`.
    pub fn new(config: &ChainConfig) -> anyhow::Result<Chain> {
        let hex_key = config.hot_wallet_key.trim_start_matches("0x");
        let bytes = hex::decode(hex_key).context("chain.hot_wallet_key is not hex")?;
        let key = SigningKey::from_slice(&bytes)
            .map_err(|_| anyhow!("chain.hot_wallet_key is not a valid secp256k1 key"))?;
        let address = Address::from_private_key(&key);
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .context("building the JSON-RPC client")?;
        Ok(Chain {
            http,
            url: config.rpc_url.clone(),
            chain_id: config.chain_id,
            key,
            address,
            tip: config.priority_fee_wei,
            next_nonce: Mutex::new(None),
            poll: Duration::from_millis(config.poll_interval_ms.max(1)),
        })
    }

    /// The hot wallet's address, lowercase `0x` hex.
    pub fn address(&self) -> String {
        format!("{:#x}", self.address)
    }

    async fn rpc(&self, method: &str, params: Value) -> Result<Value, RpcFailure> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer: Value = self
            .http
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .map_err(|e| RpcFailure::Transport(e.to_string()))?
            .json()
            .await
            .map_err(|e| RpcFailure::Transport(e.to_string()))?;
        if let Some(error) = answer.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("");
            return Err(RpcFailure::Node(message.to_owned()));
        }
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| RpcFailure::Transport("no result".to_owned()))
    }

    async fn quantity(&self, method: &str, params: Value) -> anyhow::Result<u128> {
        let value = self.rpc(method, params).await?;
        parse_quantity(&value).with_context(|| format!("{method} answered {value}"))
    }

    /// The hot wallet's balance (latest block), wei.
    pub async fn balance(&self) -> anyhow::Result<u128> {
        self.quantity("eth_getBalance", json!([self.address(), "latest"]))
            .await
    }

    /// The latest block number.
    pub async fn block_number(&self) -> anyhow::Result<u64> {
        let number = self.quantity("eth_blockNumber", json!([])).await?;
        Ok(u64::try_from(number)?)
    }

    /// The receipt of `hash`, if mined.
    pub async fn receipt(&self, hash: &str) -> anyhow::Result<Option<Receipt>> {
        let value = self.rpc("eth_getTransactionReceipt", json!([hash])).await?;
        if value.is_null() {
            return Ok(None);
        }
        let block = value
            .get("blockNumber")
            .and_then(parse_quantity)
            .context("receipt without blockNumber")?;
        let success = value.get("status").and_then(parse_quantity) == Some(1);
        Ok(Some(Receipt {
            block: u64::try_from(block)?,
            success,
        }))
    }

    /// Sends already signed bytes again (same hash: never a second payment).
    pub async fn resend(&self, tx: &SignedTx) {
        let raw = format!("0x{}", hex::encode(&tx.raw));
        let _ = self.rpc("eth_sendRawTransaction", json!([raw])).await;
    }

    async fn fees(&self) -> anyhow::Result<(u128, u128)> {
        let block = self
            .rpc("eth_getBlockByNumber", json!(["latest", false]))
            .await?;
        let base = block
            .get("baseFeePerGas")
            .and_then(parse_quantity)
            .unwrap_or(1_000_000_000);
        Ok((base.saturating_mul(2).saturating_add(self.tip), self.tip))
    }

    fn sign(&self, nonce: u64, payment: Payment, fees: (u128, u128)) -> anyhow::Result<SignedTx> {
        let (to, value, input, gas_limit) = payment.call();
        let tx = TxEip1559 {
            chain_id: self.chain_id,
            nonce,
            gas_limit,
            max_fee_per_gas: fees.0,
            max_priority_fee_per_gas: fees.1,
            to: TxKind::Call(to),
            value,
            access_list: Default::default(),
            input,
        };
        let prehash = tx.signature_hash();
        let (signature, recovery) = self
            .key
            .sign_prehash_recoverable(prehash.as_slice())
            .map_err(|_| anyhow!("signing failed"))?;
        let signed = tx.into_signed(Signature::from((signature, recovery)));
        let hash = format!("{:#x}", signed.hash());
        let raw = TxEnvelope::from(signed).encoded_2718();
        Ok(SignedTx { raw, hash, nonce })
    }

    async fn nonce(&self, slot: &mut Option<u64>) -> anyhow::Result<u64> {
        if let Some(nonce) = *slot {
            return Ok(nonce);
        }
        let count = self
            .quantity(
                "eth_getTransactionCount",
                json!([self.address(), "pending"]),
            )
            .await?;
        let nonce = u64::try_from(count)?;
        *slot = Some(nonce);
        Ok(nonce)
    }

    async fn send_signed(&self, slot: &mut Option<u64>, tx: SignedTx) -> Sent {
        let raw = format!("0x{}", hex::encode(&tx.raw));
        match self.rpc("eth_sendRawTransaction", json!([raw])).await {
            Ok(_) => {
                *slot = Some(tx.nonce + 1);
                Sent::Accepted(tx)
            }
            Err(RpcFailure::Node(message)) if message.contains("already known") => {
                *slot = Some(tx.nonce + 1);
                Sent::Accepted(tx)
            }
            Err(RpcFailure::Node(message)) => {
                if message.contains("nonce") {
                    *slot = None;
                }
                Sent::Refused(message)
            }
            Err(RpcFailure::Transport(_)) => {
                *slot = Some(tx.nonce + 1);
                Sent::Unknown(tx)
            }
        }
    }

    /// Signs `payment` at the next nonce and sends it.
    pub async fn send(&self, payment: Payment) -> anyhow::Result<Sent> {
        let mut slot = self.next_nonce.lock().await;
        let nonce = self.nonce(&mut slot).await?;
        let tx = self.sign(nonce, payment, self.fees().await?)?;
        Ok(self.send_signed(&mut slot, tx).await)
    }

    /// Signs `payment` at the next nonce without sending it; the nonce is not used, so the
    /// next transaction takes it and this one can never be mined.
    pub async fn sign_unsent(&self, payment: Payment) -> anyhow::Result<SignedTx> {
        let mut slot = self.next_nonce.lock().await;
        let nonce = self.nonce(&mut slot).await?;
        self.sign(nonce, payment, self.fees().await?)
    }

    /// Signs `payment` at the next nonce, then a replacement at the same nonce with doubled
    /// fees, and sends only the replacement. Gives the first (never sent) and the send.
    pub async fn send_replaced(&self, payment: Payment) -> anyhow::Result<(SignedTx, Sent)> {
        let mut slot = self.next_nonce.lock().await;
        let nonce = self.nonce(&mut slot).await?;
        let (max_fee, tip) = self.fees().await?;
        let first = self.sign(nonce, payment, (max_fee, tip))?;
        let bumped = (max_fee.saturating_mul(2), tip.saturating_mul(2));
        let second = self.sign(nonce, payment, bumped)?;
        if first.hash == second.hash {
            bail!("the replacement has the same hash");
        }
        Ok((first, self.send_signed(&mut slot, second).await))
    }
}

/// A JSON-RPC quantity (`"0x1a"`).
pub fn parse_quantity(value: &Value) -> Option<u128> {
    let text = value.as_str()?.strip_prefix("0x")?;
    u128::from_str_radix(if text.is_empty() { "0" } else { text }, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_native_payment_is_the_transactions_value() {
        let to = Address::repeat_byte(0x42);
        let (called, value, input, gas) = Payment {
            coin: Coin::Native,
            to,
            amount: 1_000,
        }
        .call();
        assert_eq!(
            (called, value, input.len(), gas),
            (to, U256::from(1_000), 0, 21_000)
        );
    }

    #[test]
    fn a_token_payment_calls_transfer_on_the_contract() {
        let (to, token) = (Address::repeat_byte(0x42), Address::repeat_byte(0x70));
        let (called, value, input, gas) = Payment {
            coin: Coin::Token(token),
            to,
            amount: 1_500_000,
        }
        .call();
        assert_eq!(
            (called, value, gas),
            (token, U256::ZERO, TOKEN_TRANSFER_GAS)
        );
        let expected = format!(
            "a9059cbb{}{}{:064x}",
            "0".repeat(24),
            "42".repeat(20),
            1_500_000_u128
        );
        assert_eq!(hex::encode(&input), expected);
    }
}
