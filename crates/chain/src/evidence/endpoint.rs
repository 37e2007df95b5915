//! One evidence endpoint: alloy's root provider over the shared reqwest client, and the few
//! typed reads a pass needs, each batched into one HTTP request where it can be.

use std::collections::HashMap;
use std::fmt;

use alloy_primitives::{Address, B256, U64, U256};
use alloy_provider::transport::{RpcError, TransportError, TransportErrorKind};
use alloy_provider::{Provider, RootProvider};
use alloy_rpc_client::RpcClient;
use alloy_rpc_types_eth::{BlockId, BlockNumberOrTag, Header, TransactionReceipt};

/// Why one endpoint's answer is left out (it "did not answer"). Never shown with a URL, a hash
/// or an address; logged by [`EndpointError::kind`] only, and without `Debug` on purpose (alloy's
/// transport errors carry the URL and the node's text).
pub(super) enum EndpointError {
    /// The call failed: transport, HTTP status, JSON-RPC error or a malformed answer.
    Rpc(TransportError),
    /// The endpoint has no block at a height at or below its own head.
    MissingBlock,
    /// The answer contradicts the question (another block number, another transaction).
    Inconsistent,
    /// The pinned block is no longer the endpoint's canonical block at its height.
    PinnedReplaced,
    /// A block that consumed the sender's nonce holds one of our attempts whose receipt the
    /// endpoint did not give (its receipt index lags its blocks): its "no receipt" is no evidence.
    ReceiptMissing,
    /// The endpoint serves another chain than the network's (its `eth_chainId`): nothing it
    /// says is evidence for this network.
    WrongChain,
}

impl From<TransportError> for EndpointError {
    fn from(e: TransportError) -> Self {
        EndpointError::Rpc(e)
    }
}

impl EndpointError {
    /// A fixed word for logs: no URL, hash, address or node text.
    pub(super) fn kind(&self) -> &'static str {
        match self {
            EndpointError::Rpc(RpcError::ErrorResp(_)) => "json-rpc error",
            EndpointError::Rpc(RpcError::NullResp) => "null response",
            EndpointError::Rpc(RpcError::UnsupportedFeature(_)) => "unsupported",
            EndpointError::Rpc(RpcError::LocalUsageError(_)) => "local usage",
            EndpointError::Rpc(RpcError::SerError(_)) => "request serialization",
            EndpointError::Rpc(RpcError::DeserError { .. }) => "malformed response",
            EndpointError::Rpc(RpcError::Transport(kind)) => match kind {
                TransportErrorKind::HttpError(_)
                | TransportErrorKind::HttpErrorWithRetryAfter { .. } => "http status",
                TransportErrorKind::MissingBatchResponse(_) => "missing batch response",
                _ => "transport",
            },
            EndpointError::MissingBlock => "missing block",
            EndpointError::Inconsistent => "inconsistent answer",
            EndpointError::PinnedReplaced => "pinned block replaced",
            EndpointError::ReceiptMissing => "receipt missing for an included attempt",
            EndpointError::WrongChain => "another chain id",
        }
    }

    /// The JSON-RPC error code, when the node answered with one.
    pub(super) fn code(&self) -> Option<i64> {
        match self {
            EndpointError::Rpc(RpcError::ErrorResp(payload)) => Some(payload.code),
            _ => None,
        }
    }
}

pub(super) type Result<T, E = EndpointError> = std::result::Result<T, E>;

/// What one endpoint says about one attempt hash: its receipt's block and status, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReceiptAt {
    /// The including block's number.
    pub number: u64,
    /// The including block's hash.
    pub hash: B256,
    /// Receipt status 1.
    pub succeeded: bool,
}

/// One configured endpoint.
#[derive(Clone)]
pub(super) struct Endpoint {
    /// Its position in the configuration, the only name it has in logs.
    pub index: usize,
    client: RpcClient,
    provider: RootProvider,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    pub(super) fn new(index: usize, http: reqwest::Client, url: reqwest::Url) -> Endpoint {
        let client = RpcClient::new_http_with_client(http, url);
        let provider = RootProvider::new(client.clone());
        Endpoint {
            index,
            client,
            provider,
        }
    }

    /// The endpoint's head block, its number and hash, and its chain id, in one request
    /// (`eth_chainId`, `eth_getBlockByNumber` `latest`): an endpoint of another chain than
    /// `chain_id` gives no head.
    pub(super) async fn latest(&self, chain_id: u64) -> Result<(u64, B256)> {
        let mut batch = self.client.new_batch();
        let id = batch.add_call::<_, U64>("eth_chainId", &())?;
        let head = batch.add_call::<_, Option<Header>>(
            "eth_getBlockByNumber",
            &(BlockNumberOrTag::Latest, false),
        )?;
        batch.send().await?;
        if id.await? != U64::from(chain_id) {
            return Err(EndpointError::WrongChain);
        }
        let header = head.await?.ok_or(EndpointError::MissingBlock)?;
        Ok((header.number, header.hash))
    }

    /// The hash of the canonical block at `number`, and, when `finalized` is asked, the number of
    /// the endpoint's `finalized` block, in one request.
    pub(super) async fn block_and_finalized(
        &self,
        number: u64,
        finalized: bool,
    ) -> Result<(B256, Option<u64>)> {
        let mut batch = self.client.new_batch();
        let at = batch.add_call::<_, Option<Header>>(
            "eth_getBlockByNumber",
            &(BlockNumberOrTag::Number(number), false),
        )?;
        let tag = if finalized {
            Some(batch.add_call::<_, Option<Header>>(
                "eth_getBlockByNumber",
                &(BlockNumberOrTag::Finalized, false),
            )?)
        } else {
            None
        };
        batch.send().await?;
        let hash = header_hash(number, at.await?)?;
        let finalized = match tag {
            None => None,
            // No finalized block is no answer: the node does not support the tag (yet).
            Some(tag) => Some(tag.await?.ok_or(EndpointError::MissingBlock)?.number),
        };
        Ok((hash, finalized))
    }

    /// The canonical hashes at `numbers` (each at or below `pinned`), and in the same request the
    /// pinned block's height again: the pinned block must still be canonical, so that no hash is
    /// read from another chain than the pinned one.
    pub(super) async fn hashes(
        &self,
        numbers: &[u64],
        pinned: (u64, B256),
    ) -> Result<HashMap<u64, B256>> {
        let mut batch = self.client.new_batch();
        let mut waiters = Vec::with_capacity(numbers.len());
        for &number in numbers {
            let waiter = batch.add_call::<_, Option<Header>>(
                "eth_getBlockByNumber",
                &(BlockNumberOrTag::Number(number), false),
            )?;
            waiters.push((number, waiter));
        }
        let recheck = batch.add_call::<_, Option<Header>>(
            "eth_getBlockByNumber",
            &(BlockNumberOrTag::Number(pinned.0), false),
        )?;
        batch.send().await?;
        let mut found = HashMap::with_capacity(numbers.len());
        for (number, waiter) in waiters {
            found.insert(number, header_hash(number, waiter.await?)?);
        }
        if header_hash(pinned.0, recheck.await?)? != pinned.1 {
            return Err(EndpointError::PinnedReplaced);
        }
        Ok(found)
    }

    /// The receipts of `attempts` and each sender's transaction count at each block of `at`
    /// (by hash, EIP-1898, required canonical), in batched requests of at most `batch_calls`
    /// calls each (sent one after the other).
    pub(super) async fn receipts_and_nonces(
        &self,
        attempts: &[B256],
        senders: &[Address],
        at: &[B256],
        batch_calls: usize,
    ) -> Result<(Vec<Option<ReceiptAt>>, Vec<Vec<u64>>)> {
        enum Call {
            Receipt(B256),
            Count(Address, B256),
        }
        let calls: Vec<Call> = attempts
            .iter()
            .map(|hash| Call::Receipt(*hash))
            .chain(
                senders
                    .iter()
                    .flat_map(|sender| at.iter().map(move |block| Call::Count(*sender, *block))),
            )
            .collect();
        let mut found = Vec::with_capacity(attempts.len());
        let mut counts = Vec::with_capacity(senders.len() * at.len());
        // One request when everything fits (the usual case); receipts first, in order.
        for chunk in calls.chunks(batch_calls.max(1)) {
            let mut batch = self.client.new_batch();
            let mut receipts = Vec::new();
            let mut waiters = Vec::new();
            for call in chunk {
                match call {
                    Call::Receipt(hash) => receipts.push((
                        *hash,
                        batch.add_call::<_, Option<TransactionReceipt>>(
                            "eth_getTransactionReceipt",
                            &(*hash,),
                        )?,
                    )),
                    Call::Count(sender, block) => waiters.push(batch.add_call::<_, U64>(
                        "eth_getTransactionCount",
                        &(*sender, BlockId::hash_canonical(*block)),
                    )?),
                }
            }
            batch.send().await?;
            for (hash, waiter) in receipts {
                found.push(receipt_at(hash, waiter.await?)?);
            }
            for waiter in waiters {
                counts.push(waiter.await?.to::<u64>());
            }
        }
        let nonces = counts
            .chunks(at.len().max(1))
            .map(<[u64]>::to_vec)
            .collect();
        Ok((found, nonces))
    }
}

impl Endpoint {
    /// The sender's transaction count after the canonical block at `number`.
    pub(super) async fn nonce_at(&self, sender: Address, number: u64) -> Result<u64> {
        Ok(self
            .provider
            .get_transaction_count(sender)
            .block_id(BlockId::number(number))
            .await?)
    }

    /// The canonical block at `number`: its hash and, of each of its transactions, the hash,
    /// the sender and the nonce.
    pub(super) async fn transactions_at(&self, number: u64) -> Result<(B256, Vec<SentAt>)> {
        let block: Option<BlockTransactions> = self
            .client
            .request(
                "eth_getBlockByNumber",
                (BlockNumberOrTag::Number(number), true),
            )
            .await?;
        let block = block.ok_or(EndpointError::MissingBlock)?;
        if block.number.to::<u64>() != number {
            return Err(EndpointError::Inconsistent);
        }
        let sent = block
            .transactions
            .into_iter()
            .map(|tx| SentAt {
                hash: tx.hash,
                from: tx.from,
                nonce: tx.nonce.to::<u64>(),
            })
            .collect();
        Ok((block.hash, sent))
    }
}

impl Endpoint {
    /// The receipt and the transaction of `tx_hash` (`eth_getTransactionReceipt`,
    /// `eth_getTransactionByHash`) and, in the same request, the canonical block at the pinned
    /// height, which must still be the pinned block: an endpoint that left the pinned chain says
    /// nothing about it, not even "no receipt".
    pub(super) async fn receipt_and_transaction(
        &self,
        tx_hash: B256,
        pinned: (u64, B256),
    ) -> Result<(Option<TransactionReceipt>, Option<TransactionPaid>)> {
        let mut batch = self.client.new_batch();
        let receipt = batch
            .add_call::<_, Option<TransactionReceipt>>("eth_getTransactionReceipt", &(tx_hash,))?;
        let transaction = batch
            .add_call::<_, Option<TransactionPaid>>("eth_getTransactionByHash", &(tx_hash,))?;
        let recheck = batch.add_call::<_, Option<Header>>(
            "eth_getBlockByNumber",
            &(BlockNumberOrTag::Number(pinned.0), false),
        )?;
        batch.send().await?;
        let (receipt, transaction) = (receipt.await?, transaction.await?);
        if header_hash(pinned.0, recheck.await?)? != pinned.1 {
            return Err(EndpointError::PinnedReplaced);
        }
        Ok((receipt, transaction))
    }
}

/// The fields of a transaction (`eth_getTransactionByHash`) that a deposit read uses, and only
/// those: a transaction type that alloy's envelope does not know still answers.
#[derive(Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TransactionPaid {
    /// Its hash.
    pub hash: B256,
    /// The including block's hash; `None` while pending.
    #[serde(default)]
    pub block_hash: Option<B256>,
    /// The including block's number; `None` while pending.
    #[serde(default)]
    pub block_number: Option<U64>,
    /// The called account; `None` for a contract creation.
    #[serde(default)]
    pub to: Option<Address>,
    /// The native value sent.
    pub value: U256,
    /// Its sender.
    #[serde(default)]
    pub from: Option<Address>,
}

impl fmt::Debug for TransactionPaid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionPaid")
            .field("block_number", &self.block_number)
            .finish_non_exhaustive()
    }
}

/// What a block says of one of its transactions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SentAt {
    /// The transaction's hash.
    pub hash: B256,
    /// Its sender.
    pub from: Address,
    /// Its nonce.
    pub nonce: u64,
}

/// The parts of a block with full transactions that the proof of absence reads.
#[derive(Debug, serde::Deserialize)]
struct BlockTransactions {
    number: U64,
    hash: B256,
    transactions: Vec<TransactionSent>,
}

#[derive(Debug, serde::Deserialize)]
struct TransactionSent {
    hash: B256,
    from: Address,
    nonce: U64,
}

/// The hash of a block asked for by `number`: it must exist and be at that height.
fn header_hash(number: u64, header: Option<Header>) -> Result<B256> {
    let header = header.ok_or(EndpointError::MissingBlock)?;
    if header.number != number {
        return Err(EndpointError::Inconsistent);
    }
    Ok(header.hash)
}

/// The including block of a receipt, if it names one; a receipt of another transaction is a
/// contradiction.
fn receipt_at(asked: B256, receipt: Option<TransactionReceipt>) -> Result<Option<ReceiptAt>> {
    let Some(receipt) = receipt else {
        return Ok(None);
    };
    if receipt.transaction_hash != asked {
        return Err(EndpointError::Inconsistent);
    }
    match (receipt.block_number, receipt.block_hash) {
        (Some(number), Some(hash)) => Ok(Some(ReceiptAt {
            number,
            hash,
            succeeded: receipt.status(),
        })),
        // A receipt of a pending transaction names no block: not included.
        (None, None) => Ok(None),
        _ => Err(EndpointError::Inconsistent),
    }
}
