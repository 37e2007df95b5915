//! Commits: a worker's decided step applied to the store (or the signer, or the network), the
//! watcher's reopening of a release, and the other principals' steps that move the operation:
//! the signer's replacements, the broadcaster's first submission and the old trusting webhook
//! processor.

use opledger_domain::evidence::{
    Inclusion, ReplacementRequest, Role, replacement_kind, replacement_sender,
};
use opledger_domain::state::{Actor, OperationState};
use opledger_domain::witness::{Principal, ReleaseEvidence};

use super::ledger::Move;
use crate::PayoutModel;
use crate::config::ReplacementRule;
use crate::legacy;
use crate::model::{Planned, State, Submission, Task, Worker};
use crate::store::{Attempt, Confirmation, Hold, MAX_ATTEMPTS, Wallets, address};

fn actor(worker: Worker) -> Actor {
    match worker {
        Worker::Watcher => Actor::ChainWatcher,
        Worker::Reconciler => Actor::Reconciler,
    }
}

impl PayoutModel {
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
}
