//! The workers' evaluations and commits. Every decision comes from the domain's functions
//! (`decide`, `watcher_step`, `next_step`, `resolution_allowed`, `replacement_kind`,
//! `replacement_sender`), or from [`crate::legacy`] when the configuration asks for the old
//! ones; every state move is checked by `check_transition` and applies its hold effect, and a
//! release of the hold of a signed operation applies only when the ledger's release rule allows
//! it ([`PayoutModel::release_permitted`]).

use opledger_domain::evidence::{
    Escalation, Inclusion, ReplacementRequest, Resolution, Role, Step, Verdict, decide,
    replacement_kind, replacement_sender, resolution_allowed, watcher_step,
};
use opledger_domain::state::{Actor, HoldEffect, OperationState, check_transition};
use opledger_domain::witness::{Principal, ReleaseEvidence};

use crate::PayoutModel;
use crate::chain::NONCE;
use crate::config::{Decisions, ReleaseRule, ReplacementRule};
use crate::endpoints::Evidence;
use crate::legacy;
use crate::model::{Clock, Plan, Planned, State, Submission, Task, Worker, violation};
use crate::store::{Attempt, Confirmation, Hold, MAX_ATTEMPTS, Wallets, address};
use crate::truth;

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

/// A state move asked of the store.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Move {
    pub(crate) from: OperationState,
    pub(crate) to: OperationState,
    pub(crate) actor: Actor,
    pub(crate) supported: bool,
    pub(crate) settled: Option<Confirmation>,
    pub(crate) escalation: Option<Escalation>,
}

fn actor(worker: Worker) -> Actor {
    match worker {
        Worker::Watcher => Actor::ChainWatcher,
        Worker::Reconciler => Actor::Reconciler,
    }
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

    /// A worker commits its decided step.
    pub(crate) fn commit(&self, state: &mut State, worker: Worker) {
        let task = state.task(worker);
        *state.task_mut(worker) = Task::Idle;
        let actor = actor(worker);
        let plan = match task {
            Task::Idle | Task::StoreRead { .. } => return,
            Task::Planned(plan) => plan,
        };
        let base = Move {
            from: plan.from,
            to: plan.from,
            actor,
            supported: plan.supported,
            settled: None,
            escalation: None,
        };
        match plan.step {
            Planned::Confirm { attempt, inclusion } => {
                self.transition(
                    state,
                    Move {
                        to: OperationState::Confirmed,
                        settled: Some(Confirmation { attempt, inclusion }),
                        ..base
                    },
                );
            }
            Planned::Move(to) => {
                self.transition(state, Move { to, ..base });
            }
            Planned::Escalate(escalation) => {
                self.transition(
                    state,
                    Move {
                        to: OperationState::FailedTerminal,
                        escalation: Some(escalation),
                        ..base
                    },
                );
            }
            Planned::Release(evidence) => {
                // The proposal first, in its own statement (a move refused for want of the
                // witness rolls back only itself), then one move: BROADCAST -> UNKNOWN, or
                // UNKNOWN -> VERIFIED_NOT_SENT, which the store refuses until the release rule
                // allows it. A later evaluation takes the next step.
                state.store.propose(Principal::Reconciler, evidence);
                let to = match plan.from {
                    OperationState::Broadcast => OperationState::Unknown,
                    _ => OperationState::VerifiedNotSent,
                };
                self.transition(state, Move { to, ..base });
            }
            Planned::SignCancel => {
                self.sign_replacement(state, ReplacementRequest::Cancel);
            }
            Planned::Resubmit => {
                let latest = state.store.attempts.len().saturating_sub(1);
                state.chain.public |= 1 << latest;
            }
            Planned::Reopen => {
                let to = OperationState::Broadcast;
                self.transition(state, Move { to, ..base });
            }
            Planned::ReopenRelease(proof) => self.reopen_release(state, proof, base),
        }
    }

    /// `opledger_reopen_release` (migration 31), in one transaction: nothing when the proof is
    /// marked already (ALREADY), or the operation is not VERIFIED_NOT_SENT with its hold
    /// released, or no attestation names the proof (the function raises); otherwise the proof is
    /// marked, and unless the release rule still allows the release on another proof
    /// (PROOF_MARKED), the chain watcher's move VERIFIED_NOT_SENT -> UNKNOWN goes through
    /// `check_transition` and its hold effect (Reopen: the hold held again).
    fn reopen_release(&self, state: &mut State, proof: ReleaseEvidence, base: Move) {
        let store = &mut state.store;
        if store.is_marked(&proof)
            || store.state != OperationState::VerifiedNotSent
            || store.hold != Hold::Released
            || !store.mark_reorged(proof)
        {
            return;
        }
        if self.release_permitted(&state.store) {
            return;
        }
        self.transition(
            state,
            Move {
                from: OperationState::VerifiedNotSent,
                to: OperationState::Unknown,
                ..base
            },
        );
    }

    /// The ledger's release rule over the store's records: the domain's
    /// (`opledger_domain::witness::release_allowed`, [`Store::release_permitted`]), or the mutant
    /// that releases on a proposal alone.
    pub fn release_permitted(&self, store: &crate::store::Store) -> bool {
        match self.config.release_rule {
            ReleaseRule::Witnessed => store.release_permitted(),
            ReleaseRule::CountsMarkedProofs => store.release_permitted_over(&[]),
            ReleaseRule::ProposalAlone => {
                legacy::release_on_proposal(&store.attempt_hashes(), &store.proposals)
            }
        }
    }

    /// The store applies a move: refused when the state changed since it was read (another
    /// worker moved first), when the transition table refuses it to the actor, or when it
    /// releases the hold and the release rule does not allow it (the move and its ledger effect
    /// are one transaction); otherwise the state changes and the hold effect applies, each
    /// checked against [`truth`].
    pub(crate) fn transition(&self, state: &mut State, m: Move) -> bool {
        if state.store.state != m.from {
            return false;
        }
        let effect = match check_transition(m.from, m.to, m.actor) {
            Ok(effect) => effect,
            Err(_) => {
                state.ghost.violations |= violation::ILLEGAL_TRANSITION;
                return false;
            }
        };
        if effect == HoldEffect::Release && !self.release_permitted(&state.store) {
            return false;
        }
        let confirmations = self.config.confirmations;
        let ghost = &mut state.ghost;
        match effect {
            HoldEffect::Keep => {}
            HoldEffect::Settle => {
                if state.store.hold != Hold::Held {
                    ghost.violations |= violation::HOLD_EFFECT_ON_WRONG_HOLD;
                }
                state.store.hold = Hold::Settled;
                let backed = m.settled.is_some_and(|c| {
                    truth::settlement_backed(&state.chain, &state.store.attempts, &c, confirmations)
                });
                if !backed {
                    ghost.violations |= violation::SETTLED_WITHOUT_FINAL_TRANSFER;
                }
                state.store.confirmed = m.settled;
            }
            HoldEffect::Release => {
                if state.store.hold != Hold::Held {
                    ghost.violations |= violation::HOLD_EFFECT_ON_WRONG_HOLD;
                }
                state.store.hold = Hold::Released;
                if !truth::release_backed(&state.chain, &state.store.attempts, confirmations) {
                    ghost.violations |= violation::RELEASED_WITHOUT_EVIDENCE;
                }
                if !state.store.witnessed_unmarked() {
                    ghost.violations |= violation::RELEASED_ON_MARKED_PROOF;
                }
            }
            HoldEffect::Reopen => {
                // The hold is re-established from where it went (`opledger_guard_hold`: SETTLED
                // or RELEASED -> OPEN).
                match state.store.hold {
                    Hold::Settled => ghost.reopened = true,
                    Hold::Released => ghost.release_reopened = true,
                    Hold::Held => ghost.violations |= violation::HOLD_EFFECT_ON_WRONG_HOLD,
                }
                state.store.hold = Hold::Held;
                state.store.confirmed = None;
            }
        }
        if m.from == OperationState::Unknown && m.to != OperationState::Unknown && !m.supported {
            ghost.violations |= violation::LEFT_UNKNOWN_WITHOUT_EVIDENCE;
        }
        if m.to == OperationState::FailedTerminal {
            if m.escalation.is_some() && !m.supported {
                ghost.violations |= violation::ESCALATED_WITHOUT_CAUSE;
            }
            state.store.escalation = m.escalation;
        } else {
            state.store.escalation = None;
        }
        state.store.state = m.to;
        true
    }

    /// The signer persists a replacement of the latest attempt, under its guards (a fee bump of
    /// a BROADCAST operation, a cancel of an UNKNOWN one, within the model's bound on attempts),
    /// signed by the account the replacement rule names; false when it refuses.
    pub(crate) fn sign_replacement(&self, state: &mut State, request: ReplacementRequest) -> bool {
        let (guard, budget) = match request {
            ReplacementRequest::FeeBump => (OperationState::Broadcast, !state.store.bumped),
            ReplacementRequest::Cancel => (OperationState::Unknown, true),
        };
        if state.store.state != guard || !budget || state.store.attempts.len() >= MAX_ATTEMPTS {
            return false;
        }
        let Some(original) = state.store.attempts.first().map(|a| a.sender) else {
            return false;
        };
        let available = state.wallets.available();
        let signer = match self.config.replacement {
            ReplacementRule::OriginalSender => replacement_sender(address(original), &available),
            ReplacementRule::CurrentWallet => {
                legacy::replacement_sender(address(state.wallets.current()), &available)
            }
        };
        let Some(sender) = signer.ok().and_then(Wallets::wallet_of) else {
            return false;
        };
        let latest = state.store.latest_role();
        let content = match request {
            // A fee bump re-signs the latest attempt's content with higher fees.
            ReplacementRequest::FeeBump => latest,
            ReplacementRequest::Cancel => Role::Cancel,
        };
        state.store.attempts.push(Attempt {
            kind: replacement_kind(request, latest),
            sender,
            content,
            requested: Some(request),
            after_rotation: state.wallets.rotated,
        });
        if request == ReplacementRequest::FeeBump {
            state.store.bumped = true;
        }
        true
    }

    /// The broadcaster's first submission of a SIGNED operation.
    pub(crate) fn broadcast(&self, state: &mut State, submission: Submission) -> Option<()> {
        if state.store.state != OperationState::Signed {
            return None;
        }
        let to = match submission {
            Submission::Accepted => {
                state.chain.public |= 1;
                OperationState::Broadcast
            }
            Submission::AnswerLost { reached } => {
                if reached {
                    state.chain.public |= 1;
                }
                OperationState::Unknown
            }
            Submission::CrashedAfterSubmit => {
                state.chain.public |= 1;
                return Some(());
            }
        };
        self.transition(
            state,
            Move {
                from: OperationState::Signed,
                to,
                actor: Actor::Broadcaster,
                supported: true,
                settled: None,
                escalation: None,
            },
        );
        Some(())
    }

    /// The old, trusting webhook processor: the claim moves the operation to CONFIRMED (the
    /// transition table lets the webhook processor do it), recording the claimed inclusion.
    pub(crate) fn trust_webhook(&self, state: &mut State, attempt: u8) -> Option<()> {
        if state.store.state != OperationState::Broadcast {
            return None;
        }
        let claimed = Confirmation {
            attempt,
            inclusion: Inclusion {
                block: state.chain.block(state.chain.height),
                succeeded: true,
            },
        };
        let moved = self.transition(
            state,
            Move {
                from: OperationState::Broadcast,
                to: OperationState::Confirmed,
                actor: Actor::WebhookProcessor,
                supported: false,
                settled: Some(claimed),
                escalation: None,
            },
        );
        moved.then_some(())
    }

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
