//! What the chain says about a transaction a custodian's record names, with the evidence rules
//! of every other settlement: the executor's own endpoints, a quorum agreeing at one pinned
//! block, a canonical inclusion at final depth, and the transfer exactly as approved (it
//! succeeded, its `to` is the destination, its value the amount: `judge_deposit`, the rule the
//! witness credits deposits by). A network without endpoints is unwatched: only the custodian's
//! COMPLETED record settles there (docs/custodians.md says so plainly).

use alloy_primitives::B256;
use opledger_chain::EvidenceReader;
use opledger_domain::evidence::content::Asset;
use opledger_domain::evidence::{Address, BlockRef, Hash32};
use opledger_domain::witness::deposit::{DepositClaim, DepositVerdict, judge_deposit};
use std::collections::HashMap;

/// The executor's verdict on a custodian's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainSays {
    /// Included at final depth, paying exactly the approved transfer, in this block.
    Paid(BlockRef),
    /// Nothing to conclude yet (not at final depth, no agreement, not found): read again later.
    NotYet,
    /// The final chain shows something else than the approved transfer (reverted, another
    /// recipient or amount): a security event for an operator, never a settlement.
    Contradicted(&'static str),
    /// The network has no evidence endpoints here: the custodian's record decides alone.
    Unwatched,
}

/// The evidence readers of the networks this executor watches.
#[derive(Debug, Default)]
pub struct Chains {
    readers: HashMap<String, EvidenceReader>,
}

impl Chains {
    /// Readers by network id.
    pub fn new(readers: HashMap<String, EvidenceReader>) -> Chains {
        Chains { readers }
    }

    /// What the chain of `network` says about `tx_hash` paying `amount` of the native coin to
    /// `destination`.
    pub async fn judge(
        &self,
        network: &str,
        tx_hash: Hash32,
        destination: Address,
        amount: u128,
    ) -> ChainSays {
        let Some(reader) = self.readers.get(network) else {
            return ChainSays::Unwatched;
        };
        let Ok(pinned) = reader.pin().await else {
            return ChainSays::NotYet;
        };
        let claim = DepositClaim {
            tx_hash,
            log_index: None,
            recipient: destination,
            asset: Asset::Native,
            amount,
        };
        let observed = pinned.deposit(B256::from(tx_hash), None).await;
        match judge_deposit(
            &claim,
            observed.as_ref().map_err(|e| *e),
            pinned.final_block,
        ) {
            DepositVerdict::Confirmed { block } => ChainSays::Paid(block),
            DepositVerdict::NotYet(_) => ChainSays::NotYet,
            DepositVerdict::Contradicted(refusal) => ChainSays::Contradicted(refusal.reason_code()),
        }
    }
}
