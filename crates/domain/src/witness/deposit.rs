//! A deposit credited from chain evidence, never from a webhook's word.
//!
//! A deposit is a *proposal*: a claim that one transaction (and, for a token, one log of it) paid
//! an amount of an asset to a recipient. The witness re-reads that transaction from its own
//! endpoints with the quorum rules of every other evidence read (one pinned block, agreed by a
//! quorum, canonical inclusions only) and [`judge_deposit`] decides from what they agreed on:
//! - [`DepositVerdict::Confirmed`] only when the chain shows exactly the claimed transfer, at
//!   final depth;
//! - [`DepositVerdict::NotYet`] when nothing can be concluded now (no agreement, no inclusion at
//!   or below the pinned block, an inclusion above the final block, an observation that is not of
//!   this claim): the witness reads again later. Absence of evidence never credits and never
//!   refuses for good: the witness's endpoints may lag the proposer's;
//! - [`DepositVerdict::Contradicted`] when the final chain shows something else than the claim
//!   (reverted, another recipient, another amount, another asset, no such log, a log that is no
//!   transfer): refused for good, with a stable reason code. An honest proposer never makes such
//!   a claim, so a refusal is a security signal.
//!
//! What is bound, and what is deliberately not:
//! - a native deposit is the transaction itself: it succeeded, its `to` is the recipient and its
//!   value is the amount (value moved by a contract's internal call is not recognised: it is not
//!   a top-level transfer, and the claim is contradicted rather than guessed at);
//! - a token deposit is one `Transfer(address,address,uint256)` log of the transaction, named by
//!   its `logIndex`: emitted by the token's contract, to the recipient, of the amount, with exactly
//!   the standard event's shape (three topics, a 32-byte amount, address topics that are
//!   addresses). The transaction's own `to` and value are not bound: a token deposit may come
//!   through a router or a batch contract, and the log is what moved the tokens. The sender
//!   (`from` topic) is not bound either: anyone may pay a deposit address;
//! - the including block is reported in the verdict; that it is canonical as of the pinned block
//!   is the chain reader's check (`opledger_chain::evidence::Pinned::deposit`), that it is at or
//!   below the final block is checked here.
//!
//! Pure: no I/O, no clock. `Debug` never shows an address or a hash (only block numbers, log
//! indexes and amounts).

use crate::evidence::content::Asset;
use crate::evidence::{Address, BlockRef, Hash32, NoAgreement};
use std::fmt;

/// `topics[0]` of the ERC-20 `Transfer(address,address,uint256)` event:
/// keccak256 of that signature (checked against keccak in `opledger-chain`'s tests).
pub const ERC20_TRANSFER_TOPIC: Hash32 = [
    0xdd, 0xf2, 0x52, 0xad, 0x1b, 0xe2, 0xc8, 0x9b, 0x69, 0xc2, 0xb0, 0x68, 0xfc, 0x37, 0x8d, 0xaa,
    0x95, 0x2b, 0xa7, 0xf1, 0x63, 0xc4, 0xa1, 0x16, 0x28, 0xf5, 0x5a, 0x4d, 0xf5, 0x23, 0xb3, 0xef,
];

/// What a deposit proposal claims the chain shows.
#[derive(Clone, PartialEq, Eq)]
pub struct DepositClaim {
    /// The transaction that paid the deposit.
    pub tx_hash: Hash32,
    /// For a token deposit, the `logIndex` (in its block) of the `Transfer` log that paid it;
    /// `None` for a native deposit.
    pub log_index: Option<u32>,
    /// The deposit address credited.
    pub recipient: Address,
    /// The asset, resolved against the witness's own configuration of the network.
    pub asset: Asset,
    /// The amount, in minimal units.
    pub amount: u128,
}

impl fmt::Debug for DepositClaim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DepositClaim")
            .field("log_index", &self.log_index)
            .field("asset", &AssetKind(self.asset))
            .field("amount", &self.amount)
            .finish_non_exhaustive()
    }
}

/// What the endpoints agreed on, at the pinned block, about one transaction.
#[derive(Clone, PartialEq, Eq)]
pub enum ObservedDeposit {
    /// No receipt in a canonical block at or below the pinned one.
    Absent,
    /// The transaction is included in a canonical block at or below the pinned one.
    Included {
        /// The transaction's hash, as the receipt and the transaction name it.
        tx_hash: Hash32,
        /// The including block.
        block: BlockRef,
        /// Receipt status 1.
        success: bool,
        /// The called account; `None` for a contract creation.
        to: Option<Address>,
        /// The native value sent, or `None` when it does not fit 128 bits.
        value: Option<u128>,
        /// The receipt's log whose `logIndex` is the one asked for, when one was asked for and
        /// the receipt has it; `None` otherwise.
        log: Option<ObservedLog>,
    },
}

impl fmt::Debug for ObservedDeposit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObservedDeposit::Absent => f.write_str("Absent"),
            ObservedDeposit::Included {
                block,
                success,
                value,
                log,
                ..
            } => f
                .debug_struct("Included")
                .field("block", &block.number)
                .field("success", success)
                .field("value", value)
                .field("log", log)
                .finish_non_exhaustive(),
        }
    }
}

/// One log of a receipt, raw: the judge decodes it, so that what the endpoints must agree on is
/// the whole log, and a log that only looks like a transfer is told apart from one that is.
#[derive(Clone, PartialEq, Eq)]
pub struct ObservedLog {
    /// Its `logIndex` in the block (the one asked for).
    pub index: u32,
    /// The contract that emitted it.
    pub address: Address,
    /// Its topics, in order.
    pub topics: Vec<Hash32>,
    /// Its data.
    pub data: Vec<u8>,
}

impl fmt::Debug for ObservedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObservedLog")
            .field("index", &self.index)
            .field("topics", &self.topics.len())
            .field("data_len", &self.data.len())
            .finish_non_exhaustive()
    }
}

/// Why nothing can be concluded yet: the witness reads again later.
#[derive(Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotYet {
    /// The endpoints' answers are not evidence.
    #[error("no agreement among the endpoints: {0}")]
    NoAgreement(NoAgreement),
    /// No receipt in a canonical block at or below the pinned one (the transaction may be
    /// pending, or the witness's endpoints may lag the proposer's).
    #[error("the transaction is not included at or below the pinned block")]
    Absent,
    /// Included, above the final block.
    #[error("the transaction is included but not at final depth")]
    NotFinal {
        /// The including block.
        block: BlockRef,
    },
    /// The observation is not of this claim (another transaction or log), or contradicts the
    /// final block it is judged against: a caller's or a node's fault, never the proposal's.
    #[error("the observation is inconsistent with the claim or the final block")]
    Inconsistent,
}

impl NotYet {
    /// A stable reason code (UPPER_SNAKE) for logs and metrics.
    pub fn reason_code(self) -> &'static str {
        match self {
            NotYet::NoAgreement(_) => "DEPOSIT_NO_AGREEMENT",
            NotYet::Absent => "DEPOSIT_NOT_FOUND",
            NotYet::NotFinal { .. } => "DEPOSIT_NOT_FINAL",
            NotYet::Inconsistent => "DEPOSIT_OBSERVATION_INCONSISTENT",
        }
    }
}

impl fmt::Debug for NotYet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotYet::NoAgreement(no) => f.debug_tuple("NoAgreement").field(no).finish(),
            NotYet::Absent => f.write_str("Absent"),
            NotYet::NotFinal { block } => f
                .debug_struct("NotFinal")
                .field("block", &block.number)
                .finish_non_exhaustive(),
            NotYet::Inconsistent => f.write_str("Inconsistent"),
        }
    }
}

/// How the final chain contradicts a deposit claim: refused for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DepositRefusal {
    /// The transaction reverted: it moved nothing.
    #[error("the deposit transaction reverted")]
    Reverted,
    /// The transfer paid another account (a native transaction to another address or a contract
    /// creation; a token log to another address).
    #[error("the deposit paid another recipient")]
    RecipientMismatch,
    /// The transfer moved another amount.
    #[error("the deposit moved another amount")]
    AmountMismatch,
    /// Another asset: the log was emitted by another contract than the token's, or a native claim
    /// names a log, or a token claim names none.
    #[error("the deposit moved another asset")]
    AssetMismatch,
    /// The transaction has no log at the claimed index.
    #[error("the deposit transaction has no log at the claimed index")]
    LogMissing,
    /// The log at the claimed index is not an ERC-20 `Transfer` event.
    #[error("the claimed log is not an erc-20 transfer")]
    NotATransfer,
}

impl DepositRefusal {
    /// A stable reason code (UPPER_SNAKE) for the refusal record, errors and metrics.
    pub fn reason_code(self) -> &'static str {
        match self {
            DepositRefusal::Reverted => "DEPOSIT_REVERTED",
            DepositRefusal::RecipientMismatch => "DEPOSIT_RECIPIENT_MISMATCH",
            DepositRefusal::AmountMismatch => "DEPOSIT_AMOUNT_MISMATCH",
            DepositRefusal::AssetMismatch => "DEPOSIT_ASSET_MISMATCH",
            DepositRefusal::LogMissing => "DEPOSIT_LOG_MISSING",
            DepositRefusal::NotATransfer => "DEPOSIT_NOT_A_TRANSFER",
        }
    }
}

/// The witness's verdict on a deposit claim.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum DepositVerdict {
    /// The final chain shows exactly the claimed transfer: attest it.
    Confirmed {
        /// The including block (at or below the final one).
        block: BlockRef,
    },
    /// Nothing can be concluded now: read again later.
    NotYet(NotYet),
    /// The final chain contradicts the claim: refuse it for good.
    Contradicted(DepositRefusal),
}

impl fmt::Debug for DepositVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DepositVerdict::Confirmed { block } => f
                .debug_struct("Confirmed")
                .field("block", &block.number)
                .finish_non_exhaustive(),
            DepositVerdict::NotYet(why) => f.debug_tuple("NotYet").field(why).finish(),
            DepositVerdict::Contradicted(why) => f.debug_tuple("Contradicted").field(why).finish(),
        }
    }
}

/// The verdict on `claim` from what the endpoints agreed on (`observed`, or why they did not),
/// with `final_block` the pass's final block (`Pinned::final_block`).
///
/// Order of the checks: no agreement, absence, an observation of another transaction or log,
/// and an inclusion above the final block give [`DepositVerdict::NotYet`]; then, for a final
/// inclusion, the claim's shape against its asset (a log index for a token only), the status,
/// and the transfer itself (see the module documentation).
pub fn judge_deposit(
    claim: &DepositClaim,
    observed: Result<&ObservedDeposit, NoAgreement>,
    final_block: BlockRef,
) -> DepositVerdict {
    let observed = match observed {
        Ok(observed) => observed,
        Err(no) => return DepositVerdict::NotYet(NotYet::NoAgreement(no)),
    };
    let (tx_hash, block, success, to, value, log) = match observed {
        ObservedDeposit::Absent => return DepositVerdict::NotYet(NotYet::Absent),
        ObservedDeposit::Included {
            tx_hash,
            block,
            success,
            to,
            value,
            log,
        } => (tx_hash, *block, *success, to, value, log),
    };
    // The chain reader is asked for the claim's transaction and log: anything else is a wiring
    // or a node fault, never evidence about this claim.
    let log_of_claim = log.as_ref().map(|l| l.index) == claim.log_index || log.is_none();
    if *tx_hash != claim.tx_hash || !log_of_claim {
        return DepositVerdict::NotYet(NotYet::Inconsistent);
    }
    if block.number > final_block.number {
        return DepositVerdict::NotYet(NotYet::NotFinal { block });
    }
    if block.number == final_block.number && block.hash != final_block.hash {
        return DepositVerdict::NotYet(NotYet::Inconsistent);
    }
    let checked = match claim.asset {
        Asset::Native => native(claim, success, *to, *value),
        Asset::Token(contract) => token(claim, contract, success, log.as_ref()),
    };
    match checked {
        Ok(()) => DepositVerdict::Confirmed { block },
        Err(refusal) => DepositVerdict::Contradicted(refusal),
    }
}

/// A native deposit: no log named, succeeded, to the recipient, of the amount.
fn native(
    claim: &DepositClaim,
    success: bool,
    to: Option<Address>,
    value: Option<u128>,
) -> Result<(), DepositRefusal> {
    if claim.log_index.is_some() {
        return Err(DepositRefusal::AssetMismatch);
    }
    if !success {
        return Err(DepositRefusal::Reverted);
    }
    if to != Some(claim.recipient) {
        return Err(DepositRefusal::RecipientMismatch);
    }
    if value != Some(claim.amount) {
        return Err(DepositRefusal::AmountMismatch);
    }
    Ok(())
}

/// A token deposit: a log named, succeeded, that log a standard `Transfer` of the token's
/// contract, to the recipient, of the amount.
fn token(
    claim: &DepositClaim,
    contract: Address,
    success: bool,
    log: Option<&ObservedLog>,
) -> Result<(), DepositRefusal> {
    if claim.log_index.is_none() {
        return Err(DepositRefusal::AssetMismatch);
    }
    if !success {
        return Err(DepositRefusal::Reverted);
    }
    let log = log.ok_or(DepositRefusal::LogMissing)?;
    if log.address != contract {
        return Err(DepositRefusal::AssetMismatch);
    }
    let transfer = Transfer::decode(log).ok_or(DepositRefusal::NotATransfer)?;
    if transfer.to != claim.recipient {
        return Err(DepositRefusal::RecipientMismatch);
    }
    if transfer.amount != Some(claim.amount) {
        return Err(DepositRefusal::AmountMismatch);
    }
    Ok(())
}

/// The parts of an ERC-20 `Transfer` event the claim binds.
struct Transfer {
    to: Address,
    /// `None` when the amount does not fit 128 bits.
    amount: Option<u128>,
}

impl Transfer {
    /// The event, if `log` has exactly its shape: the signature topic, two address topics (12
    /// zero bytes, then the address) and a 32-byte big-endian amount.
    fn decode(log: &ObservedLog) -> Option<Transfer> {
        let [signature, from, to] = log.topics.as_slice() else {
            return None;
        };
        if *signature != ERC20_TRANSFER_TOPIC {
            return None;
        }
        let _from = topic_address(from)?;
        let to = topic_address(to)?;
        let data: &[u8; 32] = log.data.as_slice().try_into().ok()?;
        let (high, low) = data.split_at(16);
        let amount = if high.iter().all(|b| *b == 0) {
            let low: [u8; 16] = low.try_into().ok()?;
            Some(u128::from_be_bytes(low))
        } else {
            None
        };
        Some(Transfer { to, amount })
    }
}

/// The address an indexed `address` topic holds, if its first 12 bytes are zero.
fn topic_address(topic: &Hash32) -> Option<Address> {
    let (padding, address) = topic.split_at(12);
    if padding.iter().any(|b| *b != 0) {
        return None;
    }
    address.try_into().ok()
}

/// `Debug` of an asset without its contract address.
struct AssetKind(Asset);

impl fmt::Debug for AssetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Asset::Native => f.write_str("Native"),
            Asset::Token(_) => f.write_str("Token(..)"),
        }
    }
}

#[cfg(test)]
mod tests;
