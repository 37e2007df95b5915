//! What a custodian's status event may do: wake the executor's lookup of the withdrawal it names,
//! nothing else.
//!
//! The event was verified with the provider's own scheme at the ingress, and deduplicated by the
//! provider's event id within the endpoint's tenant and source. Its status is not an input here,
//! on purpose: whatever it says (completed, failed, rejected), in whatever order the events come,
//! the executor's own lookup of the provider's record is the authority, and the chain decides a
//! settlement. So a [`Wake`] has no variant that moves anything: the processor records at most a
//! `custodian_hints` row, which puts the withdrawal at the head of the executor's queue at its next
//! pass instead of after `follow_every`. The inbox's database login holds no custodian move and no
//! custodian table but the hints (migration 35).
//!
//! A lookup in progress when the event is processed may have read the provider's record before
//! the event happened, and its end (the executor's `followed_at`) would make a hint recorded now
//! look already served: the event is then retried shortly, and its hint recorded once that
//! lookup is over ([`Wake::FollowInProgress`]). A lookup that starts after this check started
//! after the event arrived, so it may serve the hint.
//!
//! [`decide`] is pure (the withdrawal's executor and state, and whether an executor is following
//! it right now, in; a verdict, out); the processor calls it inside the work item's transaction,
//! after finding the withdrawal by our reference in the endpoint's tenant only (another tenant's
//! withdrawal is "not found").

use opledger_domain::operation::Executor;
use opledger_domain::state::OperationState as S;

/// What the processor does with a verified custodian status event naming a withdrawal of the
/// endpoint's tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Record a hint: the executor looks the withdrawal up at its next pass. Done.
    Hint,
    /// An executor is looking it up right now: retry shortly, then hint.
    FollowInProgress,
    /// The request is not stored (sent) yet: park until the withdrawal moves, then decide again.
    AwaitRequest,
    /// The executor no longer follows it (CONFIRMED, VERIFIED_NOT_SENT, FAILED_TERMINAL,
    /// REJECTED): nothing to wake. Done.
    NotFollowed,
    /// Our signer executes it, not a custodian: a dead letter for a person (a custodian naming a
    /// withdrawal it was never sent is a configuration or security question).
    NotCustodian,
}

impl Wake {
    /// The machine code the work item ends with.
    pub fn outcome(self) -> &'static str {
        match self {
            Wake::Hint => "WOKEN",
            Wake::FollowInProgress => "FOLLOW_IN_PROGRESS",
            Wake::AwaitRequest => "AWAITING_REQUEST",
            Wake::NotFollowed => "NOT_FOLLOWED",
            Wake::NotCustodian => "NOT_A_CUSTODIAN_WITHDRAWAL",
        }
    }
}

/// The verdict on a custodian status event about a withdrawal executed by `executor`, in `state`,
/// that an executor is (`following`) or is not following at this moment.
pub fn decide(executor: Executor, state: S, following: bool) -> Wake {
    match (executor, state) {
        (Executor::LocalSigner, _) => Wake::NotCustodian,
        (Executor::Custodian, S::Signed | S::Broadcast | S::Unknown) if following => {
            Wake::FollowInProgress
        }
        (Executor::Custodian, S::Signed | S::Broadcast | S::Unknown) => Wake::Hint,
        (Executor::Custodian, S::Requested | S::Approved | S::Signing) => Wake::AwaitRequest,
        (
            Executor::Custodian,
            S::Confirmed | S::VerifiedNotSent | S::FailedTerminal | S::Rejected,
        ) => Wake::NotFollowed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_followed_custodian_withdrawal_is_woken_and_nothing_is_ever_moved() {
        for state in S::ALL {
            let expected = match state {
                S::Signed | S::Broadcast | S::Unknown => Wake::Hint,
                S::Requested | S::Approved | S::Signing => Wake::AwaitRequest,
                _ => Wake::NotFollowed,
            };
            assert_eq!(
                decide(Executor::Custodian, state, false),
                expected,
                "{state}"
            );
            let busy = match expected {
                Wake::Hint => Wake::FollowInProgress,
                other => other,
            };
            assert_eq!(decide(Executor::Custodian, state, true), busy, "{state}");
            for following in [false, true] {
                assert_eq!(
                    decide(Executor::LocalSigner, state, following),
                    Wake::NotCustodian
                );
            }
        }
    }

    #[test]
    fn outcomes_are_upper_snake() {
        for wake in [
            Wake::Hint,
            Wake::FollowInProgress,
            Wake::AwaitRequest,
            Wake::NotFollowed,
            Wake::NotCustodian,
        ] {
            let code = wake.outcome();
            assert!(code.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'));
        }
    }
}
