//! What the chain says about the transaction a provider's record names, as the executor's
//! `Chains::judge` (services/custodian/src/chain.rs) asks it: the domain's `judge_deposit` over
//! what the executor's endpoints agree on. The chain here is the provider's ground truth: the
//! transaction of a paid withdrawal (completed, or failed with its transaction mined) is
//! included at final depth, paying exactly the approved transfer (the foreign transaction, another
//! withdrawal's to the same destination and amount, pays the same transfer); any other is absent.
//! Reorganizations, lagging and lying endpoints are the payout model's ([`crate::endpoints`]);
//! here the endpoints agree on the truth.

use opledger_domain::evidence::content::Asset;
use opledger_domain::evidence::{Address, BlockRef, Hash32};
use opledger_domain::witness::deposit::{
    DepositClaim, DepositVerdict, ObservedDeposit, judge_deposit,
};

use super::provider::{Provider, Reference};

/// The approved destination.
const DESTINATION: Address = [0xd5; 20];
/// The approved amount.
const AMOUNT: u128 = 1_000;
/// The block the paid transaction is included in, final.
const BLOCK: BlockRef = BlockRef {
    number: 7,
    hash: [0x07; 32],
};

/// The executor's verdict on its provider's transaction (`ChainSays`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChainSays {
    /// Included at final depth, paying exactly the approved transfer.
    Paid(BlockRef),
    /// Nothing to conclude yet.
    NotYet,
    /// The final chain shows something else than the approved transfer.
    Contradicted,
    /// The network is not watched: the custodian's record decides alone.
    Unwatched,
}

/// What the chain says about `tx_hash`, the transaction a provider's record names (of
/// `reference`, or of the foreign transaction: their hashes differ), on a network the executor
/// watches or not.
pub fn judge(
    provider: &Provider,
    reference: Reference,
    tx_hash: Hash32,
    watched: bool,
) -> ChainSays {
    if !watched {
        return ChainSays::Unwatched;
    }
    let claim = DepositClaim {
        tx_hash,
        log_index: None,
        recipient: DESTINATION,
        asset: Asset::Native,
        amount: AMOUNT,
    };
    let mined = provider
        .txn(reference)
        .into_iter()
        .chain(provider.foreign)
        .find(|t| t.phase.paid() && t.record().tx_hash == Some(tx_hash));
    let observed = match mined {
        Some(_) => ObservedDeposit::Included {
            tx_hash,
            block: BLOCK,
            success: true,
            to: Some(DESTINATION),
            value: Some(AMOUNT),
            log: None,
        },
        None => ObservedDeposit::Absent,
    };
    match judge_deposit(&claim, Ok(&observed), BLOCK) {
        DepositVerdict::Confirmed { block } => ChainSays::Paid(block),
        DepositVerdict::NotYet(_) => ChainSays::NotYet,
        DepositVerdict::Contradicted(_) => ChainSays::Contradicted,
    }
}
