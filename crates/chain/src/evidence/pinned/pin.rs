//! Pinning a pass ([`EvidenceReader::pin`]): the endpoints' heads, the agreed pinned block and
//! the agreed final block, step by step.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use alloy_primitives::B256;
use futures::future::join_all;
use opledger_domain::evidence::NoAgreement;

use super::{EndpointPass, Pass, PinError, Pinned, agreed, log_silent, to_block_ref};
use crate::evidence::endpoint::EndpointError;
use crate::evidence::{EvidenceReader, Finality};

/// What an endpoint answered at the pinned height: the block's hash and, with the `finalized`
/// tag, the number of its `finalized` block.
type AtPinned = Option<(B256, Option<u64>)>;

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

        let latest = self.latest_heads().await;
        let heads: Vec<Option<u64>> = latest.iter().map(|l| l.map(|(n, _)| n)).collect();
        let lowest = lowest_head(&heads, quorum, inner.max_lag)?;

        let at_pinned = self.at_pinned(&latest, lowest).await;
        let hashes: Vec<Option<B256>> = at_pinned.iter().map(|a| a.map(|(h, _)| h)).collect();
        let pinned_hash = agreed(&hashes, quorum).map_err(PinError::Pinned)?;

        let final_number = final_number(inner.finality, lowest, &at_pinned);
        let finals = self
            .final_hashes(&hashes, (lowest, pinned_hash), final_number)
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

    /// Each endpoint's head block, number and hash in one call: when the endpoints stand at the
    /// same height (the usual case), that already names the pinned block's hash.
    async fn latest_heads(&self) -> Vec<Option<(u64, B256)>> {
        let chain_id = self.inner.chain_id;
        join_all(self.inner.endpoints.iter().map(|e| async move {
            e.latest(chain_id)
                .await
                .map_err(|error| match error {
                    EndpointError::WrongChain => tracing::error!(
                        endpoint = e.index,
                        chain_id,
                        "evidence endpoint serves another chain: left out of the pass"
                    ),
                    error => log_silent(e.index, "head", &error),
                })
                .ok()
        }))
        .await
    }

    /// Each endpoint's hash of the block at `lowest` (and, with the `finalized` tag, its
    /// `finalized` block's number); `None` for an endpoint without a head or that failed.
    async fn at_pinned(&self, latest: &[Option<(u64, B256)>], lowest: u64) -> Vec<AtPinned> {
        let tag = self.inner.finality == Finality::FinalizedTag;
        join_all(
            self.inner
                .endpoints
                .iter()
                .zip(latest)
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
        .await
    }

    /// Each endpoint's hash of the final block `final_number`, on the chain of the pinned block
    /// `(lowest, pinned_hash)`; `None` for an endpoint that named no pinned hash or that failed.
    async fn final_hashes(
        &self,
        hashes: &[Option<B256>],
        (lowest, pinned_hash): (u64, B256),
        final_number: u64,
    ) -> Vec<Option<B256>> {
        join_all(
            self.inner
                .endpoints
                .iter()
                .zip(hashes)
                .map(|(e, hash)| async move {
                    hash.as_ref()?;
                    if final_number == lowest {
                        return Some(pinned_hash);
                    }
                    e.hashes(&[final_number], (lowest, pinned_hash))
                        .await
                        .map_err(|error| log_silent(e.index, "final block", &error))
                        .ok()
                        .and_then(|found| found.get(&final_number).copied())
                }),
        )
        .await
    }
}

/// The lowest head that answered, when at least `quorum` answered within `max_lag` blocks of
/// each other.
fn lowest_head(heads: &[Option<u64>], quorum: usize, max_lag: u64) -> Result<u64, PinError> {
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
    if highest - lowest > max_lag {
        return Err(PinError::Head(NoAgreement::Lag {
            blocks: highest - lowest,
            max_lag,
        }));
    }
    Ok(lowest)
}

/// The final block's number by the network's finality, at or below the pinned `lowest`.
fn final_number(finality: Finality, lowest: u64, at_pinned: &[AtPinned]) -> u64 {
    match finality {
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
    }
}
