//! A pass: the pinned and final blocks the quorum agreed on, and every read made at them.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use alloy_primitives::{Address, B256};
use futures::future::join_all;
use opledger_domain::evidence::{
    AttemptDefect, BlockRef, EndpointReading, Inclusion, NoAgreement, Reading, Role, Verdict,
    agree, decide,
};

use super::EvidenceReader;
use super::endpoint::{Endpoint, EndpointError, ReceiptAt, SentAt};

mod absence;
mod pin;

/// Why no block could be pinned for a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// The endpoints' heads: too few answered, or they are too far apart.
    #[error("no agreement on the endpoints' heads: {0}")]
    Head(NoAgreement),
    /// The hash of the block at the pinned height.
    #[error("no agreement on the pinned block: {0}")]
    Pinned(NoAgreement),
    /// The final block's height or hash.
    #[error("no agreement on the final block: {0}")]
    Final(NoAgreement),
}

impl PinError {
    /// Why the endpoints' answers were not evidence, whichever step it was.
    pub fn no_agreement(&self) -> NoAgreement {
        match self {
            PinError::Head(e) | PinError::Pinned(e) | PinError::Final(e) => *e,
        }
    }
}

/// Calls in one JSON-RPC batch of [`Pinned::read_all`] (providers cap their batches).
pub const BATCH_CALLS: usize = 500;

/// One question of [`Pinned::read_all`]: an operation's sender, its attempts' nonce and the
/// attempts' hashes (oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// The attempts' sender.
    pub sender: Address,
    /// The attempts' nonce.
    pub nonce: u64,
    /// The attempts' hashes, oldest first.
    pub attempts: Vec<B256>,
}

/// One pass of reads at an agreed pinned block. Cheap to clone; every read of the pass shares
/// the endpoints' canonical block hashes looked up so far.
#[derive(Clone)]
pub struct Pinned {
    /// The block every read of the pass is made at: the lowest head that answered, its hash
    /// named identically by every endpoint of the pass.
    pub pinned: BlockRef,
    /// The newest block the network's finality counts final, at or below `pinned`. When the chain
    /// is shorter than the confirmation depth, this is the genesis block: nothing after it is
    /// final yet.
    pub final_block: BlockRef,
    pass: Arc<Pass>,
}

struct Pass {
    reader: EvidenceReader,
    /// One entry per configured endpoint; `None`: it is not part of this pass (it did not answer
    /// while pinning), so it answers nothing in it.
    endpoints: Vec<Option<EndpointPass>>,
}

struct EndpointPass {
    /// Its head when the pass was pinned.
    head: u64,
    /// Its canonical block hashes by number, at or below the pinned block.
    hashes: Mutex<HashMap<u64, B256>>,
    /// What the proofs of absence of this pass read: senders' counts by block number, and
    /// blocks' transactions (hash, transactions), so that many operations of one sender cost one
    /// search and one block read, not one each.
    counts: Mutex<HashMap<(Address, u64), u64>>,
    blocks: Mutex<HashMap<u64, Arc<BlockSent>>>,
}

/// A block's hash and what it says of each of its transactions.
type BlockSent = (B256, Vec<SentAt>);

impl EndpointPass {
    fn cached(&self, number: u64) -> Option<B256> {
        self.hashes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&number)
            .copied()
    }

    fn remember(&self, found: HashMap<u64, B256>) {
        self.hashes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(found);
    }
}

impl fmt::Debug for Pinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pinned")
            .field("pinned", &self.pinned.number)
            .field("final_block", &self.final_block.number)
            .field(
                "endpoints",
                &self.pass.endpoints.iter().filter(|e| e.is_some()).count(),
            )
            .finish_non_exhaustive()
    }
}

fn to_block_ref(number: u64, hash: B256) -> BlockRef {
    BlockRef {
        number,
        hash: hash.0,
    }
}

fn log_silent(endpoint: usize, step: &'static str, error: &EndpointError) {
    tracing::debug!(
        endpoint,
        step,
        error = error.kind(),
        code = error.code(),
        "evidence endpoint did not answer"
    );
}

/// The one value every answer names, if at least `quorum` answered and all agree.
fn agreed<T: PartialEq + Copy>(answers: &[Option<T>], quorum: usize) -> Result<T, NoAgreement> {
    let answered: Vec<T> = answers.iter().flatten().copied().collect();
    let Some(&first) = answered.first() else {
        return Err(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum,
        });
    };
    if answered.len() < quorum {
        return Err(NoAgreement::TooFewAnswers {
            answered: answered.len(),
            quorum,
        });
    }
    if answered.iter().any(|a| *a != first) {
        return Err(NoAgreement::Disagreement);
    }
    Ok(first)
}

/// A pass's pins, one per network, made on first use: every operation of a network examined in
/// one pass is read at the same block (the reconciler's and the witness's passes).
#[derive(Debug, Default)]
pub struct Pins {
    pinned: HashMap<String, Result<Pinned, NoAgreement>>,
}

impl Pins {
    /// `network`'s pin of this pass, pinned now through `reader` on first use; `None` when there
    /// is no reader for it.
    pub async fn get(
        &mut self,
        network: &str,
        reader: Option<&EvidenceReader>,
    ) -> Option<Result<Pinned, NoAgreement>> {
        if let Some(pinned) = self.pinned.get(network) {
            return Some(pinned.clone());
        }
        let pinned = reader?.pin().await.map_err(|e| e.no_agreement());
        self.pinned.insert(network.to_owned(), pinned.clone());
        Some(pinned)
    }
}

impl Pinned {
    /// Every attempt's inclusion (oldest first) and the sender's nonce at the pinned and the final
    /// block, read from every endpoint of the pass and combined by
    /// [`opledger_domain::evidence::agree`]. An inclusion counts only in a block at or below the
    /// pinned one that is the endpoint's canonical block at its height; nonces are read by block
    /// hash (EIP-1898, canonical required). An endpoint that fails in any way did not answer.
    ///
    /// `nonce` is the attempts' nonce. When no attempt is included and the nonce was consumed by
    /// the final block, that absence must be proven, not assumed: the endpoint's block that
    /// consumed the nonce is found and must hold none of the attempts (a node whose receipt index
    /// lags its blocks would otherwise make our own mined transfer look like a foreign one).
    pub async fn read(
        &self,
        sender: Address,
        nonce: u64,
        attempts: &[B256],
    ) -> Result<Reading, NoAgreement> {
        let query = Query {
            sender,
            nonce,
            attempts: attempts.to_vec(),
        };
        self.read_all(std::slice::from_ref(&query))
            .await
            .pop()
            .unwrap_or(Err(NoAgreement::Disagreement))
    }

    /// The verdict on one operation's attempts at this pass: what the reconciler and the witness
    /// each decide from their own endpoints. `roles`, `sender` and `hashes` come from the
    /// attempts' bytes (`opledger_evm::evidence::judge`); an undecodable original (no sender)
    /// makes every role a defect whatever the chain says, so it reads nothing.
    pub async fn verdict(
        &self,
        roles: &[Result<Role, AttemptDefect>],
        sender: Option<Address>,
        nonce: u64,
        hashes: &[B256],
    ) -> Verdict {
        let reading = match sender {
            Some(sender) => self.read(sender, nonce, hashes).await,
            None => Err(NoAgreement::Disagreement),
        };
        decide(roles, nonce, &reading)
    }

    /// [`Pinned::read`] for many operations at once, in the same order: each endpoint is asked
    /// for every receipt and every distinct sender's nonces in a few batched requests (at most
    /// [`BATCH_CALLS`] calls each) instead of one request per operation. An endpoint whose
    /// batch fails answers none of the queries; one whose answer to one query fails (an
    /// unproven absence) answers the others.
    pub async fn read_all(&self, queries: &[Query]) -> Vec<Result<Reading, NoAgreement>> {
        let inner = &self.pass.reader.inner;
        let per_endpoint: Vec<Option<Vec<Result<Reading, EndpointError>>>> =
            join_all(inner.endpoints.iter().zip(&self.pass.endpoints).map(
                |(e, pass)| async move {
                    let pass = pass.as_ref()?;
                    match self.read_one(e, pass, queries).await {
                        Ok(readings) => Some(readings),
                        Err(error) => {
                            log_silent(e.index, "read", &error);
                            None
                        }
                    }
                },
            ))
            .await;
        (0..queries.len())
            .map(|i| {
                let answers: Vec<Option<EndpointReading>> = per_endpoint
                    .iter()
                    .zip(&self.pass.endpoints)
                    .zip(&inner.endpoints)
                    .map(|((readings, pass), e)| {
                        let (readings, pass) = (readings.as_ref()?, pass.as_ref()?);
                        match readings.get(i)? {
                            Ok(reading) => Some(EndpointReading {
                                head: pass.head,
                                reading: reading.clone(),
                            }),
                            Err(error) => {
                                log_silent(e.index, "read", error);
                                None
                            }
                        }
                    })
                    .collect();
                agree(&answers, inner.quorum, inner.max_lag)
            })
            .collect()
    }

    async fn read_one(
        &self,
        endpoint: &Endpoint,
        pass: &EndpointPass,
        queries: &[Query],
    ) -> Result<Vec<Result<Reading, EndpointError>>, EndpointError> {
        let pinned = B256::from(self.pinned.hash);
        let final_hash = B256::from(self.final_block.hash);
        let at: &[B256] = if final_hash == pinned {
            &[pinned]
        } else {
            &[pinned, final_hash]
        };
        let hashes: Vec<B256> = queries
            .iter()
            .flat_map(|q| q.attempts.iter().copied())
            .collect();
        let mut senders: Vec<Address> = queries.iter().map(|q| q.sender).collect();
        senders.sort_unstable();
        senders.dedup();
        let (receipts, nonces) = endpoint
            .receipts_and_nonces(&hashes, &senders, at, BATCH_CALLS)
            .await?;
        let mut nonce_of: HashMap<Address, (u64, u64)> = HashMap::with_capacity(senders.len());
        for (sender, counts) in senders.iter().zip(nonces) {
            let pair = match counts[..] {
                [both] => (both, both),
                [pinned, last] => (pinned, last),
                _ => return Err(EndpointError::Inconsistent),
            };
            nonce_of.insert(*sender, pair);
        }
        let mut numbers: Vec<u64> = receipts
            .iter()
            .flatten()
            .map(|r| r.number)
            .filter(|n| *n <= self.pinned.number)
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        let canonical = self.canonical_hashes(endpoint, pass, &numbers).await?;
        let mut receipts = receipts.into_iter();
        let mut readings = Vec::with_capacity(queries.len());
        for query in queries {
            let inclusions: Vec<Option<Inclusion>> = receipts
                .by_ref()
                .take(query.attempts.len())
                .map(|receipt| {
                    let ReceiptAt {
                        number,
                        hash,
                        succeeded,
                    } = receipt?;
                    // Above the pinned block, or in a block that is not canonical: not included.
                    (canonical.get(&number) == Some(&hash)).then_some(Inclusion {
                        block: to_block_ref(number, hash),
                        succeeded,
                    })
                })
                .collect();
            let Some(&(nonce_at_pinned, nonce_at_final)) = nonce_of.get(&query.sender) else {
                return Err(EndpointError::Inconsistent);
            };
            let proven = if inclusions.iter().all(Option::is_none) && nonce_at_final > query.nonce {
                self.prove_absent(endpoint, pass, query).await
            } else {
                Ok(())
            };
            readings.push(proven.map(|()| Reading {
                pinned: self.pinned,
                final_block: self.final_block,
                inclusions,
                nonce_at_pinned,
                nonce_at_final,
            }));
        }
        Ok(readings)
    }

    /// The endpoint's canonical hashes at `numbers` (at or below the pinned block), from the
    /// pass's cache or, for the missing ones, in one request.
    async fn canonical_hashes(
        &self,
        endpoint: &Endpoint,
        pass: &EndpointPass,
        numbers: &[u64],
    ) -> Result<HashMap<u64, B256>, EndpointError> {
        let mut known = HashMap::with_capacity(numbers.len());
        let mut missing = Vec::new();
        for &number in numbers {
            match pass.cached(number) {
                Some(hash) => {
                    known.insert(number, hash);
                }
                None => missing.push(number),
            }
        }
        if !missing.is_empty() {
            let pinned = (self.pinned.number, B256::from(self.pinned.hash));
            let found = endpoint.hashes(&missing, pinned).await?;
            known.extend(found.iter().map(|(n, h)| (*n, *h)));
            pass.remember(found);
        }
        Ok(known)
    }

    /// Whether `block` (number and hash) is canonical as of the pinned block, agreed by the
    /// quorum of the pass: `Ok(true)` or `Ok(false)` when at least `quorum` endpoints answered and
    /// all agree, [`NoAgreement`] otherwise. A block above the pinned one is not canonical as of
    /// it.
    pub async fn canonical(&self, block: BlockRef) -> Result<bool, NoAgreement> {
        self.canonical_all(std::slice::from_ref(&block))
            .await
            .pop()
            .unwrap_or(Err(NoAgreement::Disagreement))
    }

    /// [`Pinned::canonical`] for many blocks at once, in the same order: each endpoint is asked
    /// for the hashes it has not named in this pass yet in one batched request, instead of one
    /// request per block.
    pub async fn canonical_all(&self, blocks: &[BlockRef]) -> Vec<Result<bool, NoAgreement>> {
        let inner = &self.pass.reader.inner;
        let mut numbers: Vec<u64> = blocks
            .iter()
            .map(|b| b.number)
            .filter(|n| *n <= self.pinned.number)
            .collect();
        numbers.sort_unstable();
        numbers.dedup();
        let per_endpoint: Vec<Option<HashMap<u64, B256>>> = join_all(
            inner
                .endpoints
                .iter()
                .zip(&self.pass.endpoints)
                .map(|(e, pass)| {
                    let numbers = &numbers;
                    async move {
                        let pass = pass.as_ref()?;
                        match self.canonical_hashes(e, pass, numbers).await {
                            Ok(found) => Some(found),
                            Err(error) => {
                                log_silent(e.index, "canonical", &error);
                                None
                            }
                        }
                    }
                }),
        )
        .await;
        blocks
            .iter()
            .map(|block| {
                if block.number > self.pinned.number {
                    return Ok(false);
                }
                let answers: Vec<Option<bool>> = per_endpoint
                    .iter()
                    .map(|found| {
                        found
                            .as_ref()
                            .map(|f| f.get(&block.number) == Some(&B256::from(block.hash)))
                    })
                    .collect();
                agreed(&answers, inner.quorum)
            })
            .collect()
    }
}

impl Pinned {
    /// The reader of this pass and, for each of its endpoints (in configuration order), whether
    /// it takes part in the pass: for the reads that live beside this module (a deposit's,
    /// `super::deposit`), which ask exactly the endpoints every other read of the pass asks.
    pub(super) fn members(&self) -> (&EvidenceReader, Vec<bool>) {
        (
            &self.pass.reader,
            self.pass.endpoints.iter().map(Option::is_some).collect(),
        )
    }
}
