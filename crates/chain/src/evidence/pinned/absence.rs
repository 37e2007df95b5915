//! Proofs of absence of a pass's reads (`Pinned::prove_absent`): the block that consumed a
//! nonce, found by the sender's counts, and the transaction in it that did, each read once per
//! endpoint and pass.

use std::sync::{Arc, PoisonError};

use alloy_primitives::Address;

use super::{BlockSent, EndpointPass, Pinned, Query};
use crate::evidence::endpoint::{Endpoint, EndpointError};

impl EndpointPass {
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
}

impl Pinned {
    /// Finds the endpoint's canonical block that consumed `nonce` of `sender` (at or below the
    /// final block, whose count is past it) and the transaction in it that did: the reading
    /// stands only if that transaction is none of `attempts` (a missing receipt is then evidence
    /// of absence); if it is one of ours, or the block holds no transaction of the sender at that
    /// nonce, this endpoint gave no answer. Searches back from the
    /// final block in doubling steps, then halves the interval: a handful of requests for a
    /// nonce consumed recently, at most about twice log2(height) otherwise (this path is rare).
    pub(super) async fn prove_absent(
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
}
