//! What a `transfer.status` webhook about a self-signed withdrawal may do: be a hint.
//!
//! A webhook is one endpoint secret's word. A transfer the signer signed is settled by the chain
//! at final depth, read by the broadcaster's watcher, which records the inclusion so that the
//! reorganization check covers it. So such a webhook never moves the operation and never touches
//! its hold or its inclusions: at most it tells the watcher to look at the operation now (a row
//! of `watch_hints`). [`Verdict`] has no variant that moves anything, whatever the webhook says
//! (`broadcast` or `confirmed`: the reported status is deliberately not an input). A custodian
//! that executes a transfer itself is another matter, outside this module.
//!
//! Webhooks may name only transfer attempts (the original or a fee bump of it): a cancel consumes
//! the nonce and pays nobody, so news about it is not news about the payout. The stored kind can
//! be relied on here because the signer checks every attempt's kind against its content.
//!
//! [`decide`] is pure (what the operation is and which of its attempts the webhook names, in; a
//! verdict, out); the processor calls it inside the work item's transaction.

use opledger_domain::evidence::{AttemptKind, Role};
use opledger_domain::state::OperationState;
use opledger_store::inbox::SignedAttemptRef;

/// Which of the operation's signed attempts a webhook names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// The operation has no signed attempt yet.
    NothingSigned,
    /// The operation has attempts, and the webhook's hash is none of them.
    Foreign,
    /// One of its attempts, stored as this kind.
    Attempt(AttemptKind),
}

impl Named {
    /// Finds `tx_hash` (`0x` + hex, any case) among `attempts`.
    pub fn find(attempts: &[SignedAttemptRef], tx_hash: &str) -> Named {
        if attempts.is_empty() {
            return Named::NothingSigned;
        }
        attempts
            .iter()
            .find(|a| a.tx_hash.eq_ignore_ascii_case(tx_hash))
            .map_or(Named::Foreign, |a| Named::Attempt(a.kind))
    }
}

/// Why a `transfer.status` is a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The hash is none of the operation's signed attempts.
    TxHashMismatch,
    /// The hash is one of its cancels: not a transfer, so not news about the payout.
    NotATransferAttempt,
    /// The operation's outcome is final (REJECTED, VERIFIED_NOT_SENT) and the webhook
    /// contradicts it.
    EvidenceConflict,
}

impl Refusal {
    /// The machine code stored as the dead letter's reason.
    pub fn code(self) -> &'static str {
        match self {
            Refusal::TxHashMismatch => "TX_HASH_MISMATCH",
            Refusal::NotATransferAttempt => "NOT_A_TRANSFER_ATTEMPT",
            Refusal::EvidenceConflict => "EVIDENCE_CONFLICT",
        }
    }
}

/// What the processor does with a `transfer.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Record a watch hint for the operation; the item is done. Nothing else changes.
    Hint,
    /// Nothing is signed yet: park the item until the operation moves, then decide again.
    AwaitSignature,
    /// A dead letter for a person.
    Dead(Refusal),
}

/// The verdict on a verified, deduplicated `transfer.status` about an existing operation of the
/// endpoint's tenant, in `state`, naming `named`.
pub fn decide(state: OperationState, named: Named) -> Verdict {
    match named {
        Named::NothingSigned if state.is_final() => Verdict::Dead(Refusal::EvidenceConflict),
        Named::NothingSigned => Verdict::AwaitSignature,
        Named::Foreign => Verdict::Dead(Refusal::TxHashMismatch),
        Named::Attempt(kind) => match kind.role() {
            Role::Cancel => Verdict::Dead(Refusal::NotATransferAttempt),
            Role::Transfer if state.is_final() => Verdict::Dead(Refusal::EvidenceConflict),
            Role::Transfer => Verdict::Hint,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [AttemptKind; 3] = [
        AttemptKind::Original,
        AttemptKind::FeeBump,
        AttemptKind::Cancel,
    ];

    fn attempt(tx_hash: &str, kind: AttemptKind) -> SignedAttemptRef {
        SignedAttemptRef {
            tx_hash: tx_hash.to_owned(),
            kind,
        }
    }

    #[test]
    fn a_webhook_is_at_most_a_hint_in_every_state() {
        for state in OperationState::ALL {
            let final_state = state.is_final();
            for kind in KINDS {
                let expected = match (kind, final_state) {
                    (AttemptKind::Cancel, _) => Verdict::Dead(Refusal::NotATransferAttempt),
                    (_, true) => Verdict::Dead(Refusal::EvidenceConflict),
                    (_, false) => Verdict::Hint,
                };
                assert_eq!(
                    decide(state, Named::Attempt(kind)),
                    expected,
                    "{state} {kind:?}"
                );
            }
            assert_eq!(
                decide(state, Named::Foreign),
                Verdict::Dead(Refusal::TxHashMismatch),
                "{state}"
            );
            let unsigned = if final_state {
                Verdict::Dead(Refusal::EvidenceConflict)
            } else {
                Verdict::AwaitSignature
            };
            assert_eq!(decide(state, Named::NothingSigned), unsigned, "{state}");
        }
    }

    #[test]
    fn a_broadcast_or_confirmed_withdrawal_named_by_its_transfer_is_hinted() {
        for state in [
            OperationState::Signed,
            OperationState::Broadcast,
            OperationState::Unknown,
            OperationState::Confirmed,
            OperationState::FailedTerminal,
        ] {
            for kind in [AttemptKind::Original, AttemptKind::FeeBump] {
                assert_eq!(decide(state, Named::Attempt(kind)), Verdict::Hint);
            }
        }
    }

    #[test]
    fn the_named_attempt_is_found_by_hash_in_any_case() {
        let attempts = [
            attempt("0xaa", AttemptKind::Original),
            attempt("0xbb", AttemptKind::FeeBump),
            attempt("0xcc", AttemptKind::Cancel),
        ];
        assert_eq!(Named::find(&[], "0xaa"), Named::NothingSigned);
        assert_eq!(
            Named::find(&attempts, "0xAA"),
            Named::Attempt(AttemptKind::Original)
        );
        assert_eq!(
            Named::find(&attempts, "0xbb"),
            Named::Attempt(AttemptKind::FeeBump)
        );
        assert_eq!(
            Named::find(&attempts, "0xcc"),
            Named::Attempt(AttemptKind::Cancel)
        );
        assert_eq!(Named::find(&attempts, "0xdd"), Named::Foreign);
    }

    #[test]
    fn refusal_codes_are_upper_snake() {
        assert_eq!(
            [
                Refusal::TxHashMismatch,
                Refusal::NotATransferAttempt,
                Refusal::EvidenceConflict
            ]
            .map(Refusal::code),
            [
                "TX_HASH_MISMATCH",
                "NOT_A_TRANSFER_ATTEMPT",
                "EVIDENCE_CONFLICT"
            ]
        );
    }
}
