//! A custodian's ERC-20 payout, settled from chain evidence only.
//!
//! A withdrawal of a token routed to a custodian names, through the provider's record, the
//! transaction that paid it; the provider does not say which log of it moved the tokens. The
//! custodian executor reads that transaction from its own endpoints with the quorum rules of
//! every other evidence read (one pinned block, agreed by a quorum, canonical inclusions only),
//! with every log of its receipt, and [`judge_token_payout`] decides:
//! - [`PayoutVerdict::Paid`] only when the transaction is final, succeeded, and holds exactly one
//!   `Transfer` log of the token's contract to the destination, and that log moves exactly the
//!   amount (the rule of each log is the witness's deposit rule,
//!   [`crate::witness::deposit::judge_deposit`], with the log's index as the claimed one);
//! - [`PayoutVerdict::NotYet`] when nothing can be concluded now (no agreement, not included at
//!   or below the pinned block, not final, an observation that is not of this transaction);
//! - [`PayoutVerdict::Contradicted`] when the final chain shows something else: reverted, no
//!   transfer of the token at all (another token, the native coin, nothing), transfers of it to
//!   other addresses only, another amount to the destination, or more than one transfer of it to
//!   the destination. A single transaction paying the destination twice is two payments of one
//!   approval: never a settlement, always an operator's decision.
//!
//! Not bound, as for a token deposit: the transaction's own `to` and value (a custodian may pay
//! through a batch or a forwarder contract), and transfers of the token to other addresses in
//! the same transaction (a provider's fee, another payout). The sender is the executor's to
//! check ([`sent_by`]: the `Transfer`'s `from`, or the native transaction's sender, among the
//! network's custodian payout addresses).
//!
//! Pure: no I/O, no clock. `Debug` never shows an address or a hash.

use crate::evidence::content::Asset;
use crate::evidence::{Address, BlockRef, Hash32, NoAgreement};
use crate::witness::deposit::{
    DepositClaim, DepositRefusal, DepositVerdict, ERC20_TRANSFER_TOPIC, NotYet, ObservedDeposit,
    ObservedLog, judge_deposit,
};
use std::fmt;

/// The approved transfer a custodian's transaction must have paid.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenPayout {
    /// The transaction the provider's record names.
    pub tx_hash: Hash32,
    /// The token's contract, from the executor's own configuration of the network.
    pub contract: Address,
    /// The approved destination.
    pub recipient: Address,
    /// The approved amount, in the token's minimal units.
    pub amount: u128,
}

impl fmt::Debug for TokenPayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenPayout")
            .field("amount", &self.amount)
            .finish_non_exhaustive()
    }
}

/// What the endpoints agreed on, at the pinned block, about one transaction and its receipt's
/// logs.
#[derive(Clone, PartialEq, Eq)]
pub enum ObservedReceipt {
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
        /// The transaction's sender.
        from: Option<Address>,
        /// The called account; `None` for a contract creation.
        to: Option<Address>,
        /// The native value sent, or `None` when it does not fit 128 bits.
        value: Option<u128>,
        /// Every log of the receipt, by ascending `logIndex`.
        logs: Vec<ObservedLog>,
    },
}

impl ObservedReceipt {
    /// The same observation as a deposit read without a log: what the native coin's rule
    /// ([`judge_deposit`]) judges.
    pub fn as_deposit(&self) -> ObservedDeposit {
        match self {
            ObservedReceipt::Absent => ObservedDeposit::Absent,
            ObservedReceipt::Included {
                tx_hash,
                block,
                success,
                to,
                value,
                ..
            } => ObservedDeposit::Included {
                tx_hash: *tx_hash,
                block: *block,
                success: *success,
                to: *to,
                value: *value,
                log: None,
            },
        }
    }
}

/// Whether the payout `observed` was sent from one of `senders` (the addresses the network's
/// custodian payouts come from, `[payout_assets.<network>] senders`): for the native coin
/// (`log_index` `None`) the transaction's sender; for a token, the `from` of its `Transfer` log
/// at `log_index`. A transfer of the same asset and amount to the same destination sent by
/// anyone else (a third party's, another client's of the provider) is no payout of ours.
pub fn sent_by(observed: &ObservedReceipt, log_index: Option<u32>, senders: &[Address]) -> bool {
    let ObservedReceipt::Included { from, logs, .. } = observed else {
        return false;
    };
    let sender = match log_index {
        None => *from,
        Some(index) => logs
            .iter()
            .find(|log| log.index == index)
            .and_then(|log| log.topics.get(1))
            .filter(|topic| topic[..12].iter().all(|b| *b == 0))
            .map(|topic| {
                let mut address = [0_u8; 20];
                address.copy_from_slice(&topic[12..]);
                address
            }),
    };
    sender.is_some_and(|sender| senders.contains(&sender))
}

/// The chain as the executor's own evidence showed it just before a custodian request was
/// stored (migration 41): a payout of that request can only be included after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBound {
    /// The newest block the network's finality counted final then.
    pub final_block: u64,
    /// The pinned head then, by number and hash.
    pub head: BlockRef,
}

/// Where a payout's including block stands against its request's [`RequestBound`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinceRequest {
    /// Above the head pinned at the request: included after it.
    After,
    /// At or below the block final at the request: a final block never changes, so the transfer
    /// was made before the request (an earlier transfer of the same asset and amount to the same
    /// destination from the custodian's wallet, named by the provider as ours).
    Before,
    /// Between the two: before the request if the head pinned then is still canonical (the
    /// blocks up to it are the ones that existed then), after it if that head was replaced by a
    /// reorganization (the payout may be in one of the new blocks).
    BeforeUnlessHeadReplaced,
}

/// Where a payout included in block `included` stands against `bound`.
pub fn since_request(included: u64, bound: &RequestBound) -> SinceRequest {
    if included <= bound.final_block {
        SinceRequest::Before
    } else if included > bound.head.number {
        SinceRequest::After
    } else {
        SinceRequest::BeforeUnlessHeadReplaced
    }
}

impl fmt::Debug for ObservedReceipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObservedReceipt::Absent => f.write_str("Absent"),
            ObservedReceipt::Included {
                block,
                success,
                logs,
                ..
            } => f
                .debug_struct("Included")
                .field("block", &block.number)
                .field("success", success)
                .field("logs", &logs.len())
                .finish_non_exhaustive(),
        }
    }
}

/// How the final chain contradicts the approved payout: never settled, an operator decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum PayoutRefusal {
    /// The transaction reverted: it moved nothing.
    #[error("the payout transaction reverted")]
    Reverted,
    /// The transaction has no `Transfer` log of the token's contract (another token, the native
    /// coin, or no transfer at all).
    #[error("the payout transaction moved none of the token")]
    NoTokenTransfer,
    /// The transaction moved the token, to other addresses only.
    #[error("the payout transaction paid the token to another address")]
    RecipientMismatch,
    /// The transaction's one transfer of the token to the destination moved another amount.
    #[error("the payout transaction paid another amount")]
    AmountMismatch,
    /// The transaction transfers the token to the destination more than once: two payments of
    /// one approval, whatever their amounts.
    #[error("the payout transaction pays the destination more than once")]
    MoreThanOneTransfer,
    /// The token's contract emitted a `Transfer`-signed log that is no standard transfer (a
    /// fourth topic, padding that is not zero, data that is not one word): what it moved cannot
    /// be read, so nothing is settled on it.
    #[error("the payout transaction holds a malformed transfer of the token")]
    MalformedTransfer,
    /// The transfer was not sent from one of the network's custodian payout addresses
    /// ([`sent_by`]): someone else's transfer, never ours.
    #[error("the payout was not sent from one of the custodian's addresses")]
    SenderMismatch,
    /// The transfer was included in a block that existed when the executor stored the request
    /// ([`since_request`]): made before we asked, never this request's payout.
    #[error("the payout was included before the request was made")]
    BeforeRequest,
}

impl PayoutRefusal {
    /// A stable reason code (UPPER_SNAKE) for the security event, errors and logs.
    pub fn reason_code(self) -> &'static str {
        match self {
            PayoutRefusal::Reverted => "PAYOUT_REVERTED",
            PayoutRefusal::NoTokenTransfer => "PAYOUT_NO_TOKEN_TRANSFER",
            PayoutRefusal::RecipientMismatch => "PAYOUT_RECIPIENT_MISMATCH",
            PayoutRefusal::AmountMismatch => "PAYOUT_AMOUNT_MISMATCH",
            PayoutRefusal::MoreThanOneTransfer => "PAYOUT_MORE_THAN_ONE_TRANSFER",
            PayoutRefusal::SenderMismatch => "PAYOUT_SENDER_MISMATCH",
            PayoutRefusal::MalformedTransfer => "PAYOUT_MALFORMED_TRANSFER",
            PayoutRefusal::BeforeRequest => "PAYOUT_BEFORE_REQUEST",
        }
    }
}

/// The verdict on a custodian's token payout.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PayoutVerdict {
    /// The final chain shows exactly the approved transfer, once.
    Paid {
        /// The including block (at or below the final one).
        block: BlockRef,
        /// The `logIndex` of the transfer.
        log_index: u32,
    },
    /// Nothing can be concluded now: read again later.
    NotYet(NotYet),
    /// The final chain shows something else than the approved transfer.
    Contradicted(PayoutRefusal),
}

impl fmt::Debug for PayoutVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PayoutVerdict::Paid { block, log_index } => f
                .debug_struct("Paid")
                .field("block", &block.number)
                .field("log_index", log_index)
                .finish_non_exhaustive(),
            PayoutVerdict::NotYet(why) => f.debug_tuple("NotYet").field(why).finish(),
            PayoutVerdict::Contradicted(why) => f.debug_tuple("Contradicted").field(why).finish(),
        }
    }
}

/// The verdict on `payout` from what the endpoints agreed on (`observed`, or why they did not),
/// with `final_block` the pass's final block.
///
/// The transaction is judged first, as [`judge_deposit`] judges a token claim without its log
/// (up to the log):
/// no agreement, absence, an observation of another transaction and an inclusion above the
/// final block are [`PayoutVerdict::NotYet`]; a reverted one is contradicted. Then each log is
/// judged as the claimed log of a deposit of the amount to the destination, and the logs that
/// are transfers of the token to the destination are counted (see the module documentation).
pub fn judge_token_payout(
    payout: &TokenPayout,
    observed: Result<&ObservedReceipt, NoAgreement>,
    final_block: BlockRef,
) -> PayoutVerdict {
    let (tx_hash, block, success, logs) = match observed {
        Err(no) => return PayoutVerdict::NotYet(NotYet::NoAgreement(no)),
        Ok(ObservedReceipt::Absent) => return PayoutVerdict::NotYet(NotYet::Absent),
        Ok(ObservedReceipt::Included {
            tx_hash,
            block,
            success,
            logs,
            ..
        }) => (*tx_hash, *block, *success, logs),
    };
    let judge = |log: Option<&ObservedLog>| {
        let claim = DepositClaim {
            tx_hash: payout.tx_hash,
            log_index: Some(log.map_or(0, |l| l.index)),
            recipient: payout.recipient,
            asset: Asset::Token(payout.contract),
            amount: payout.amount,
        };
        let seen = ObservedDeposit::Included {
            tx_hash,
            block,
            success,
            to: None,
            value: None,
            log: log.cloned(),
        };
        judge_deposit(&claim, Ok(&seen), final_block)
    };
    match judge(None) {
        DepositVerdict::NotYet(why) => return PayoutVerdict::NotYet(why),
        DepositVerdict::Contradicted(DepositRefusal::Reverted) => {
            return PayoutVerdict::Contradicted(PayoutRefusal::Reverted);
        }
        DepositVerdict::Contradicted(DepositRefusal::LogMissing) => {}
        // Not what the rule gives a token claim without its log: no evidence about this payout.
        DepositVerdict::Confirmed { .. }
        | DepositVerdict::Contradicted(
            DepositRefusal::RecipientMismatch
            | DepositRefusal::AmountMismatch
            | DepositRefusal::AssetMismatch
            | DepositRefusal::NotATransfer,
        ) => return PayoutVerdict::NotYet(NotYet::Inconsistent),
    }
    let mut paid = None;
    let (mut to_recipient, mut elsewhere) = (0_usize, 0_usize);
    for log in logs {
        match what_log(payout, log, judge(Some(log))) {
            Ok(Log::Paid) => {
                paid = Some(log.index);
                to_recipient += 1;
            }
            Ok(Log::OtherAmount) => to_recipient += 1,
            Ok(Log::Elsewhere) => elsewhere += 1,
            Ok(Log::Unrelated) => {}
            Err(verdict) => return verdict,
        }
    }
    let refusal = match (to_recipient, paid) {
        (1, Some(log_index)) => return PayoutVerdict::Paid { block, log_index },
        (2.., _) => PayoutRefusal::MoreThanOneTransfer,
        (1, None) => PayoutRefusal::AmountMismatch,
        (0, _) if elsewhere > 0 => PayoutRefusal::RecipientMismatch,
        (0, _) => PayoutRefusal::NoTokenTransfer,
    };
    PayoutVerdict::Contradicted(refusal)
}

/// What one log of a final, successful payout transaction is.
enum Log {
    /// The approved transfer.
    Paid,
    /// A transfer of the token to the destination, of another amount.
    OtherAmount,
    /// A transfer of the token to another address.
    Elsewhere,
    /// Another contract's log, or another event of the token (an approval).
    Unrelated,
}

/// What `log` is, from the deposit rule's verdict on it as the claimed log; a verdict on the
/// whole payout when it decides alone.
fn what_log(
    payout: &TokenPayout,
    log: &ObservedLog,
    verdict: DepositVerdict,
) -> Result<Log, PayoutVerdict> {
    match verdict {
        DepositVerdict::Confirmed { .. } => Ok(Log::Paid),
        DepositVerdict::Contradicted(DepositRefusal::AmountMismatch) => Ok(Log::OtherAmount),
        DepositVerdict::Contradicted(DepositRefusal::RecipientMismatch) => Ok(Log::Elsewhere),
        // A `Transfer`-signed log of the token that does not decode: unreadable, never paid.
        DepositVerdict::Contradicted(DepositRefusal::NotATransfer)
            if log.address == payout.contract
                && log.topics.first() == Some(&ERC20_TRANSFER_TOPIC) =>
        {
            Err(PayoutVerdict::Contradicted(
                PayoutRefusal::MalformedTransfer,
            ))
        }
        DepositVerdict::Contradicted(
            DepositRefusal::AssetMismatch | DepositRefusal::NotATransfer,
        ) => Ok(Log::Unrelated),
        // The transaction was judged final and successful: a log cannot change that.
        DepositVerdict::NotYet(_)
        | DepositVerdict::Contradicted(DepositRefusal::Reverted | DepositRefusal::LogMissing) => {
            Err(PayoutVerdict::NotYet(NotYet::Inconsistent))
        }
    }
}

#[cfg(test)]
mod tests;
