//! The workers' evaluations and commits. Every decision comes from the domain's functions
//! (`decide`, `watcher_step`, `next_step`, `resolution_allowed`, `replacement_kind`,
//! `replacement_sender`), or from [`crate::legacy`] when the configuration asks for the old
//! ones; every state move is checked by `check_transition` and applies its hold effect, and a
//! release of the hold of a signed operation applies only when the ledger's release rule allows
//! it ([`PayoutModel::release_permitted`]).
//!
//! This module holds the decisions; the store's side of a move (the transition table, the hold
//! effects, the release rule) is in [`ledger`], the commits of decided steps and the signer's and
//! the broadcaster's steps in [`commit`], the operator's resolutions in [`operator`].

use opledger_domain::evidence::{Step, Verdict, decide, watcher_step};
use opledger_domain::state::OperationState;
use opledger_domain::witness::ReleaseEvidence;

use crate::PayoutModel;
use crate::chain::NONCE;
use crate::config::Decisions;
use crate::endpoints::Evidence;
use crate::legacy;
use crate::model::{Clock, Plan, Planned, State, Task, Worker, violation};
use crate::store::Confirmation;
use crate::truth;

pub mod commit;
pub mod ledger;
pub mod operator;

pub(crate) use ledger::Move;
pub use operator::Resolved;

/// What an evaluation decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to do (the step was `Wait`, or changes nothing).
    Nothing,
    /// A step to commit.
    Plan(Plan),
    /// The decision function returned a step that is not this worker's.
    Unexpected,
}

/// The evidence a release rests on, from the verdict that allowed it: the attempt (by its hash)
/// and the block that includes it. `None` for a verdict that names no such inclusion.
pub fn release_evidence(state: &State, verdict: Verdict) -> Option<ReleaseEvidence> {
    let (attempt, inclusion) = match verdict {
        Verdict::Cancelled { attempt, inclusion }
        | Verdict::Reverted {
            attempt, inclusion, ..
        } => (attempt, inclusion),
        _ => return None,
    };
    let tx_hash = state.store.attempt_hashes().get(attempt).copied()?;
    Some(ReleaseEvidence {
        tx_hash,
        block: inclusion.block,
    })
}

impl PayoutModel {
    pub(crate) fn plan(&self, state: &State, step: Planned) -> Decision {
        Decision::Plan(Plan {
            from: state.store.state,
            step,
            supported: self.supported(state, &step),
        })
    }

    /// The watcher's decision on `evidence`: `decide` then `watcher_step` for a BROADCAST
    /// operation; for a CONFIRMED one, the reorganization check (the recorded inclusion is no
    /// longer where the agreed reading, pinned at or above it, says the attempt is); for a
    /// VERIFIED_NOT_SENT one, the same check of each proof of its applied release (the first, in
    /// the store's order, whose attempt the agreed reading, pinned at or above its block, no
    /// longer shows in that block, by number and hash: with the model's block hashes, that block
    /// is no longer canonical).
    pub fn watcher_decision(&self, state: &State, evidence: &Evidence) -> Decision {
        match state.store.state {
            OperationState::Broadcast => {
                let verdict = decide(&state.store.roles(), NONCE, evidence);
                let step = match self.config.decisions {
                    Decisions::Domain | Decisions::NeverEscalateWithoutVerdict => {
                        watcher_step(verdict)
                    }
                    Decisions::CancelCountsAsPayout => legacy::watcher_step(verdict),
                };
                match step {
                    Step::Wait => Decision::Nothing,
                    Step::Confirm { attempt, inclusion } => match u8::try_from(attempt) {
                        Ok(attempt) => self.plan(state, Planned::Confirm { attempt, inclusion }),
                        Err(_) => Decision::Unexpected,
                    },
                    Step::Move(to) => self.plan(state, Planned::Move(to)),
                    Step::Escalate(escalation) => self.plan(state, Planned::Escalate(escalation)),
                    Step::Release | Step::SignCancel | Step::ResubmitCancel => Decision::Unexpected,
                }
            }
            OperationState::Confirmed => {
                let (Some(recorded), Ok(reading)) = (state.store.confirmed, evidence) else {
                    return Decision::Nothing;
                };
                let covered = recorded.inclusion.block.number <= reading.pinned.number;
                let now = reading
                    .inclusions
                    .get(usize::from(recorded.attempt))
                    .copied()
                    .flatten();
                if covered && now != Some(recorded.inclusion) {
                    self.plan(state, Planned::Reopen)
                } else {
                    Decision::Nothing
                }
            }
            OperationState::VerifiedNotSent => {
                let Ok(reading) = evidence else {
                    return Decision::Nothing;
                };
                let hashes = state.store.attempt_hashes();
                let gone = state.store.applied_proofs().find(|proof| {
                    let Some(attempt) = hashes.iter().position(|h| *h == proof.tx_hash) else {
                        // Not one of the operation's attempts: the store refuses the reopening.
                        return false;
                    };
                    let covered = proof.block.number <= reading.pinned.number;
                    let now = reading.inclusions.get(attempt).copied().flatten();
                    covered && now.is_none_or(|i| i.block != proof.block)
                });
                match gone {
                    Some(proof) => self.plan(state, Planned::ReopenRelease(*proof)),
                    None => Decision::Nothing,
                }
            }
            _ => Decision::Nothing,
        }
    }

    /// The reconciler's decision on `evidence` at `clock`: `decide` then `next_step`.
    pub fn reconciler_decision(
        &self,
        state: &State,
        evidence: &Evidence,
        clock: Clock,
    ) -> Decision {
        let op = state.store.state;
        if !matches!(op, OperationState::Broadcast | OperationState::Unknown) {
            return Decision::Nothing;
        }
        let verdict = decide(&state.store.roles(), NONCE, evidence);
        let timing = clock.timing(state.store.latest_role());
        let step = match self.config.decisions {
            Decisions::Domain => opledger_domain::evidence::next_step(op, verdict, timing),
            Decisions::CancelCountsAsPayout => legacy::next_step(op, verdict, timing),
            Decisions::NeverEscalateWithoutVerdict => {
                legacy::next_step_without_escalation(op, verdict, timing)
            }
        };
        match step {
            Step::Wait => Decision::Nothing,
            Step::Confirm { attempt, inclusion } => match u8::try_from(attempt) {
                Ok(attempt) => self.plan(state, Planned::Confirm { attempt, inclusion }),
                Err(_) => Decision::Unexpected,
            },
            Step::Release => match release_evidence(state, verdict) {
                Some(evidence)
                    if op == OperationState::Unknown
                        && state.store.proposal(&evidence).is_some()
                        && !self.release_permitted(&state.store) =>
                {
                    // Proposed already, not yet witnessed: the commit would change nothing.
                    Decision::Nothing
                }
                Some(evidence) => self.plan(state, Planned::Release(evidence)),
                None => Decision::Unexpected,
            },
            Step::Move(to) => self.plan(state, Planned::Move(to)),
            Step::Escalate(escalation) => self.plan(state, Planned::Escalate(escalation)),
            Step::SignCancel => self.plan(state, Planned::SignCancel),
            Step::ResubmitCancel => {
                let latest = state.store.attempts.len().saturating_sub(1);
                if state.chain.public & (1 << latest) != 0 {
                    // Its bytes are out already: submitting them again changes nothing here.
                    Decision::Nothing
                } else {
                    self.plan(state, Planned::Resubmit)
                }
            }
        }
    }

    /// True when the honest chain (and store) supported `step` in `state`, judged by
    /// [`truth`], not by the domain's decisions.
    pub fn supported(&self, state: &State, step: &Planned) -> bool {
        let (chain, attempts) = (&state.chain, &state.store.attempts);
        let confirmations = self.config.confirmations;
        match step {
            Planned::Confirm { attempt, inclusion } => truth::settlement_backed(
                chain,
                attempts,
                &Confirmation {
                    attempt: *attempt,
                    inclusion: *inclusion,
                },
                confirmations,
            ),
            Planned::Release(_) => truth::release_backed(chain, attempts, confirmations),
            Planned::Move(OperationState::Broadcast) => truth::transfer_included(chain, attempts),
            Planned::Move(_) | Planned::SignCancel | Planned::Resubmit => true,
            Planned::Escalate(escalation) => {
                truth::escalation_backed(*escalation, chain, attempts, confirmations)
            }
            Planned::Reopen => state
                .store
                .confirmed
                .is_none_or(|c| !truth::confirmation_present(chain, &c)),
            Planned::ReopenRelease(proof) => !truth::proof_present(chain, proof),
        }
    }

    /// A worker evaluates what it knows ([`PayoutModel::view`]): `None` when it is busy or
    /// decides nothing.
    pub(crate) fn evaluate(
        &self,
        state: &mut State,
        worker: Worker,
        evidence: &Evidence,
        clock: Clock,
    ) -> Option<()> {
        let view = self.view(state, worker)?;
        let decision = match worker {
            Worker::Watcher => self.watcher_decision(&view, evidence),
            Worker::Reconciler => self.reconciler_decision(&view, evidence, clock),
        };
        match decision {
            Decision::Nothing => None,
            Decision::Plan(plan) => {
                *state.task_mut(worker) = Task::Planned(plan);
                Some(())
            }
            Decision::Unexpected => {
                state.ghost.violations |= violation::UNEXPECTED_STEP;
                Some(())
            }
        }
    }
}
