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

use super::endpoint::{Endpoint, EndpointError, ReceiptAt, SentAt};
use super::{EvidenceReader, Finality};

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

    /// The sender's count after block `number`, read once per pass.
    async fn nonce_at(
        &self,
        endpoint: &Endpoint,
        sender: Address,
        number: u64,
    ) -> Result<u64, EndpointError> {
        let key = (sender, number);
        if let Some(count) = self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Ok(*count);
        }
        let count = endpoint.nonce_at(sender, number).await?;
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, count);
        Ok(count)
    }

    /// The block at `number` with its transactions, read once per pass.
    async fn transactions_at(
        &self,
        endpoint: &Endpoint,
        number: u64,
    ) -> Result<Arc<BlockSent>, EndpointError> {
        if let Some(block) = self
            .blocks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&number)
        {
            return Ok(block.clone());
        }
        let block = Arc::new(endpoint.transactions_at(number).await?);
        self.blocks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(number, block.clone());
        Ok(block)
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

impl EvidenceReader {
    /// Pins a pass: every endpoint's head (at least `quorum` must answer, within
    /// `max_lag_blocks` of each other), the lowest of them pinned, its hash named by every
    /// endpoint that answered (all equal); then the final block by the network's finality
    /// (`Confirmations(n)`: `n - 1` below the pinned, or genesis on a shorter chain;
    /// `FinalizedTag`: the lowest `finalized` block named, never above the pinned), its hash
    /// agreed likewise. An endpoint that fails any step takes no part in the pass.
    pub async fn pin(&self) -> Result<Pinned, PinError> {
        let inner = &self.inner;
        let quorum = inner.quorum;

        // Each endpoint's head block, number and hash in one call: when the endpoints stand at
        // the same height (the usual case), that already names the pinned block's hash.
        let latest: Vec<Option<(u64, B256)>> =
            join_all(inner.endpoints.iter().map(|e| async move {
                e.latest()
                    .await
                    .map_err(|error| log_silent(e.index, "head", &error))
                    .ok()
            }))
            .await;
        let heads: Vec<Option<u64>> = latest.iter().map(|l| l.map(|(n, _)| n)).collect();
        let answered: Vec<u64> = heads.iter().flatten().copied().collect();
        if answered.len() < quorum {
            return Err(PinError::Head(NoAgreement::TooFewAnswers {
                answered: answered.len(),
                quorum,
            }));
        }
        let (Some(&lowest), Some(&highest)) = (answered.iter().min(), answered.iter().max()) else {
            return Err(PinError::Head(NoAgreement::TooFewAnswers {
                answered: 0,
                quorum,
            }));
        };
        if highest - lowest > inner.max_lag {
            return Err(PinError::Head(NoAgreement::Lag {
                blocks: highest - lowest,
                max_lag: inner.max_lag,
            }));
        }

        let tag = inner.finality == Finality::FinalizedTag;
        let at_pinned: Vec<Option<(B256, Option<u64>)>> = join_all(
            inner
                .endpoints
                .iter()
                .zip(&latest)
                .map(|(e, head)| async move {
                    let (number, hash) = (*head)?;
                    if number == lowest && !tag {
                        return Some((hash, None));
                    }
                    e.block_and_finalized(lowest, tag)
                        .await
                        .map_err(|error| log_silent(e.index, "pinned block", &error))
                        .ok()
                }),
        )
        .await;
        let hashes: Vec<Option<B256>> = at_pinned.iter().map(|a| a.map(|(h, _)| h)).collect();
        let pinned_hash = agreed(&hashes, quorum).map_err(PinError::Pinned)?;

        let final_number = match inner.finality {
            // The including block counts: `n` confirmations reach `n - 1` blocks below the
            // pinned one. A chain shorter than that has nothing final but its genesis.
            Finality::Confirmations(n) => (lowest + 1).saturating_sub(n),
            Finality::FinalizedTag => at_pinned
                .iter()
                .flatten()
                .filter_map(|(_, finalized)| *finalized)
                .min()
                .unwrap_or(0)
                .min(lowest),
        };

        let finals: Vec<Option<B256>> = join_all(inner.endpoints.iter().zip(&hashes).map(
            |(e, hash)| async move {
                hash.as_ref()?;
                if final_number == lowest {
                    return Some(pinned_hash);
                }
                e.hashes(&[final_number], (lowest, pinned_hash))
                    .await
                    .map_err(|error| log_silent(e.index, "final block", &error))
                    .ok()
                    .and_then(|found| found.get(&final_number).copied())
            },
        ))
        .await;
        let final_hash = agreed(&finals, quorum).map_err(PinError::Final)?;

        let endpoints = heads
            .iter()
            .zip(&finals)
            .map(|(head, fin)| match (head, fin) {
                (Some(head), Some(_)) => Some(EndpointPass {
                    head: *head,
                    hashes: Mutex::new(HashMap::from([
                        (lowest, pinned_hash),
                        (final_number, final_hash),
                    ])),
                    counts: Mutex::default(),
                    blocks: Mutex::default(),
                }),
                _ => None,
            })
            .collect();
        Ok(Pinned {
            pinned: to_block_ref(lowest, pinned_hash),
            final_block: to_block_ref(final_number, final_hash),
            pass: Arc::new(Pass {
                reader: self.clone(),
                endpoints,
            }),
        })
    }
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

    /// Finds the endpoint's canonical block that consumed `nonce` of `sender` (at or below the
    /// final block, whose count is past it) and the transaction in it that did: the reading
    /// stands only if that transaction is none of `attempts` (a missing receipt is then evidence
    /// of absence); if it is one of ours, or the block holds no transaction of the sender at that
    /// nonce, this endpoint gave no answer. Searches back from the
    /// final block in doubling steps, then halves the interval: a handful of requests for a
    /// nonce consumed recently, at most about twice log2(height) otherwise (this path is rare).
    async fn prove_absent(
        &self,
        endpoint: &Endpoint,
        pass: &EndpointPass,
        query: &Query,
    ) -> Result<(), EndpointError> {
        let Query {
            sender,
            nonce,
            ref attempts,
        } = *query;
        // `past` has the nonce consumed; `before` (when Some) does not.
        let mut past = self.final_block.number;
        let mut step = 1_u64;
        let mut before = None;
        while past > 0 {
            let probe = past.saturating_sub(step);
            if pass.nonce_at(endpoint, sender, probe).await? > nonce {
                past = probe;
                step = step.saturating_mul(2);
            } else {
                before = Some(probe);
                break;
            }
        }
        if let Some(mut low) = before {
            while past - low > 1 {
                let mid = low + (past - low) / 2;
                if pass.nonce_at(endpoint, sender, mid).await? > nonce {
                    past = mid;
                } else {
                    low = mid;
                }
            }
        }
        let block = pass.transactions_at(endpoint, past).await?;
        let (hash, transactions) = (block.0, &block.1);
        // The block read by number must be the pinned chain's (the check re-reads the pinned
        // block too, so nothing here comes from another fork).
        if self
            .canonical_hashes(endpoint, pass, &[past])
            .await?
            .get(&past)
            != Some(&hash)
        {
            return Err(EndpointError::Inconsistent);
        }
        // The block must hold the very transaction that consumed the nonce: a node whose state
        // ran ahead of its blocks (a nonce read as consumed before the including block is served)
        // names no such transaction, and its reading is no evidence.
        let consumer = transactions
            .iter()
            .find(|tx| tx.from == sender && tx.nonce == nonce)
            .ok_or(EndpointError::Inconsistent)?;
        if attempts.contains(&consumer.hash) {
            return Err(EndpointError::ReceiptMissing);
        }
        Ok(())
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
