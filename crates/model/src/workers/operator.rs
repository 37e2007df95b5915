//! The operator's resolutions of UNKNOWN and FAILED_TERMINAL operations: allowed only when
//! `resolution_allowed` says the evidence read now supports the outcome, a release recorded as
//! the operator's proposal before the move.

use opledger_domain::evidence::{Resolution, decide, resolution_allowed};
use opledger_domain::state::{Actor, OperationState};
use opledger_domain::witness::{Principal, ReleaseEvidence};

use super::ledger::Move;
use super::release_evidence;
use crate::PayoutModel;
use crate::chain::NONCE;
use crate::endpoints::Evidence;
use crate::model::{Planned, State};
use crate::store::Confirmation;

/// An operator's resolution the evidence allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resolved {
    from: OperationState,
    to: OperationState,
    settled: Option<Confirmation>,
    /// The operator's proposal of a release, recorded before the move.
    proposal: Option<ReleaseEvidence>,
    supported: bool,
}

impl PayoutModel {
    /// The operator's resolution, if `resolution_allowed` says `evidence` supports `outcome`.
    pub fn resolve(
        &self,
        state: &State,
        outcome: Resolution,
        evidence: &Evidence,
    ) -> Option<Resolved> {
        let from = state.store.state;
        if !self.config.operator
            || !matches!(
                from,
                OperationState::Unknown | OperationState::FailedTerminal
            )
        {
            return None;
        }
        let verdict = decide(&state.store.roles(), NONCE, evidence);
        if !resolution_allowed(verdict, outcome) {
            return None;
        }
        let (to, step) = match outcome {
            Resolution::Confirmed => {
                let step = match verdict {
                    opledger_domain::evidence::Verdict::Settled { attempt, inclusion } => {
                        u8::try_from(attempt)
                            .ok()
                            .map(|attempt| Planned::Confirm { attempt, inclusion })
                    }
                    _ => None,
                };
                (OperationState::Confirmed, step)
            }
            Resolution::VerifiedNotSent => {
                let step = release_evidence(state, verdict).map(Planned::Release);
                (OperationState::VerifiedNotSent, step)
            }
            Resolution::Broadcast => (
                OperationState::Broadcast,
                Some(Planned::Move(OperationState::Broadcast)),
            ),
        };
        let settled = match step {
            Some(Planned::Confirm { attempt, inclusion }) => {
                Some(Confirmation { attempt, inclusion })
            }
            _ => None,
        };
        let proposal = match step {
            Some(Planned::Release(evidence)) => Some(evidence),
            _ => None,
        };
        if proposal.is_some_and(|e| state.store.proposal(&e).is_some())
            && !self.release_permitted(&state.store)
        {
            // Proposed already, not yet witnessed: asking again changes nothing.
            return None;
        }
        Some(Resolved {
            from,
            to,
            settled,
            proposal,
            supported: step.is_some_and(|s| self.supported(state, &s)),
        })
    }

    /// Applies an operator's resolution: records the operator's proposal of a release (through
    /// the reconciler's operator API), then asks for the move.
    pub(crate) fn apply_resolution(&self, state: &mut State, resolved: Resolved) {
        if let Some(evidence) = resolved.proposal {
            state.store.propose(Principal::Operator, evidence);
        }
        self.transition(
            state,
            Move {
                from: resolved.from,
                to: resolved.to,
                actor: Actor::Operator,
                supported: resolved.supported,
                settled: resolved.settled,
                escalation: None,
            },
        );
    }
}
