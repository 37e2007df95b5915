//! The decisions the domain replaced, kept here (never in the domain crate) so a test can show
//! that the model finds what they got wrong.
//!
//! - [`watcher_step`]: the old watcher confirmed any attempt included with the required
//!   confirmations whose receipt succeeded, whatever its content: an included cancel counted as
//!   the payout, settling the hold of a withdrawal that never paid.
//! - [`next_step`]: the old reconciler sent an UNKNOWN operation whose included attempt was not
//!   yet final back to BROADCAST for the watcher, a cancel included.
//! - [`replacement_sender`]: replacements were signed with the tenant's current wallet; after a
//!   rotation, that is another account, whose transaction at that nonce replaces nothing and can
//!   be mined besides the original.
//!
//! And two mutants no version had: [`next_step_without_escalation`], to show the liveness check
//! catches a reconciler that waits forever, and [`release_on_proposal`], a ledger that releases
//! the hold of a signed withdrawal on a proposal alone (what one login could do before the
//! two-witness rule), to show the rule is load-bearing. A third mutant, a release rule that still
//! counts proofs marked reorganized away, is migration 28's rule itself
//! ([`crate::config::ReleaseRule::CountsMarkedProofs`], `Store::release_permitted_over(&[])`).

use opledger_domain::evidence::{
    self, Address, Hash32, Role, Step, Timing, Verdict, next_step as domain_next_step,
};
use opledger_domain::state::OperationState;
use opledger_domain::witness::Record;

/// The old watcher: every attempt that succeeded at final depth confirms the operation, and an
/// attempt not yet final concludes nothing; everything else as the domain decides.
pub fn watcher_step(verdict: Verdict) -> Step {
    match verdict {
        Verdict::Cancelled { attempt, inclusion } => Step::Confirm { attempt, inclusion },
        Verdict::Pending { .. } => Step::Wait,
        other => evidence::watcher_step(other),
    }
}

/// The old reconciler: an included attempt not yet final, cancel or not, goes back to the
/// watcher; everything else as the domain decides.
pub fn next_step(state: OperationState, verdict: Verdict, timing: Timing) -> Step {
    match verdict {
        Verdict::Pending {
            role: Role::Cancel, ..
        } if state == OperationState::Unknown => Step::Move(OperationState::Broadcast),
        other => domain_next_step(state, other, timing),
    }
}

/// A mutant, not an old decision: the domain's `next_step`, except that an operation without a
/// verdict is never escalated when the window elapses (the reconciler waits instead).
pub fn next_step_without_escalation(
    state: OperationState,
    verdict: Verdict,
    timing: Timing,
) -> Step {
    let never = Timing {
        unchanged_secs: 0,
        ..timing
    };
    domain_next_step(state, verdict, never)
}

/// The old signer: replacements signed by the tenant's current wallet.
pub fn replacement_sender(
    current: Address,
    available: &[Address],
) -> Result<Address, evidence::NoKeyForSender> {
    if available.contains(&current) {
        Ok(current)
    } else {
        Err(evidence::NoKeyForSender)
    }
}

/// A mutant ledger: the hold of a withdrawal with signed attempts (`attempts`, their hashes) is
/// released once any proposer's proposal is recorded, whatever the witness says (one never
/// signed, always).
pub fn release_on_proposal(attempts: &[Hash32], proposals: &[Record]) -> bool {
    attempts.is_empty() || proposals.iter().any(|p| p.principal.proposes())
}
