//! The actions enabled in a state: the broadcaster's, the chain's, the wallets', the workers'
//! evaluations (one per distinct decision), the operator's resolutions, the witness's judgments,
//! the compromised principal's steps, and each worker's commit or crash.

use opledger_domain::evidence::{Resolution, Verdict, decide};
use opledger_domain::state::OperationState;

use super::action::{Action, Refill, Submission};
use super::payout::PayoutModel;
use super::state::{Clock, State, Task, Worker};
use crate::chain::NONCE;
use crate::config::{Rotation, Side, Webhooks};
use crate::endpoints::Evidence;
use crate::store::MAX_ATTEMPTS;
use crate::{witness, workers};

impl PayoutModel {
    /// Every action the model explores from `state`, in the order the checker takes them.
    pub(crate) fn enabled_actions(&self, state: &State, actions: &mut Vec<Action>) {
        let store = &state.store;
        if store.state == OperationState::Signed {
            actions.push(Action::Broadcast(Submission::Accepted));
            actions.push(Action::Broadcast(Submission::AnswerLost { reached: true }));
            actions.push(Action::Broadcast(Submission::AnswerLost { reached: false }));
            if state.chain.public & 1 == 0 {
                actions.push(Action::Broadcast(Submission::CrashedAfterSubmit));
            }
        }
        for i in 0..store.attempts.len() {
            if let Ok(i) = u8::try_from(i)
                && state.chain.public & (1 << i) == 0
            {
                actions.push(Action::Publish(i));
            }
        }
        self.push_chain_actions(state, actions);
        if self.config.rotation != Rotation::Never && !state.wallets.rotated {
            actions.push(Action::Rotate {
                keep_retired_key: true,
            });
            if self.config.rotation == Rotation::MayDropRetiredKey {
                actions.push(Action::Rotate {
                    keep_retired_key: false,
                });
            }
        }
        if store.state == OperationState::Broadcast
            && !store.bumped
            && store.attempts.len() < MAX_ATTEMPTS
        {
            actions.push(Action::Bump);
        }
        self.push_evaluations(state, actions);
        if self.config.webhooks == Webhooks::TrustClaims && store.state == OperationState::Broadcast
        {
            for i in 0..store.attempts.len() {
                if let Ok(attempt) = u8::try_from(i) {
                    actions.push(Action::TrustedWebhook { attempt });
                }
            }
        }
        self.push_rogue_actions(state, actions);
        for worker in Worker::ALL {
            match state.task(worker) {
                Task::Idle => {}
                Task::StoreRead { .. } => actions.push(Action::Crash(worker)),
                Task::Planned(_) => {
                    actions.push(Action::Commit(worker));
                    actions.push(Action::Crash(worker));
                }
            }
        }
    }

    /// The workers' evaluations, the operator's resolutions and the witness's judgments that
    /// can change something.
    fn push_evaluations(&self, state: &State, actions: &mut Vec<Action>) {
        let watching = matches!(
            state.store.state,
            OperationState::Broadcast | OperationState::Confirmed
        ) || state.store.applied_proofs().next().is_some();
        let reconciling = matches!(
            state.store.state,
            OperationState::Broadcast | OperationState::Unknown
        );
        for (worker, applies) in [
            (Worker::Watcher, watching),
            (Worker::Reconciler, reconciling),
        ] {
            if applies && self.config.split_read && state.task(worker) == Task::Idle {
                actions.push(Action::ReadStore(worker));
            }
        }
        if watching {
            self.push_watcher_evaluations(state, actions);
        }
        if reconciling {
            self.push_reconciler_evaluations(state, actions);
        }
        self.push_resolutions(state, actions);
        self.push_attestations(state, actions);
    }

    /// The watcher's evaluations, one per distinct decision (each with a webhook that triggers
    /// it, with [`Webhooks::Hints`]).
    fn push_watcher_evaluations(&self, state: &State, actions: &mut Vec<Action>) {
        let Some(view) = self.view(state, Worker::Watcher) else {
            return;
        };
        let mut seen = Vec::new();
        let evidence = self.evidence(&view, Side::Workers);
        // The reorganization checks of a CONFIRMED or VERIFIED_NOT_SENT operation read the
        // reading itself.
        let distinct = if view.store.state != OperationState::Broadcast {
            evidence.iter().collect()
        } else {
            by_verdict(&view, &evidence)
        };
        for e in distinct {
            let decision = self.watcher_decision(&view, e);
            if decision != workers::Decision::Nothing && !seen.contains(&decision) {
                seen.push(decision);
                actions.push(Action::Evaluate {
                    worker: Worker::Watcher,
                    evidence: e.clone(),
                    clock: Clock::ALL[0],
                });
                if self.config.webhooks == Webhooks::Hints
                    && !self.config.split_read
                    && state.store.state == OperationState::Broadcast
                {
                    actions.push(Action::Webhook {
                        evidence: e.clone(),
                    });
                }
            }
        }
    }

    /// The reconciler's evaluations, one per distinct decision over every clock.
    fn push_reconciler_evaluations(&self, state: &State, actions: &mut Vec<Action>) {
        let Some(view) = self.view(state, Worker::Reconciler) else {
            return;
        };
        let mut seen = Vec::new();
        let evidence = self.evidence(&view, Side::Workers);
        for e in by_verdict(&view, &evidence) {
            for clock in Clock::ALL {
                let decision = self.reconciler_decision(&view, e, clock);
                if decision != workers::Decision::Nothing && !seen.contains(&decision) {
                    seen.push(decision);
                    actions.push(Action::Evaluate {
                        worker: Worker::Reconciler,
                        evidence: e.clone(),
                        clock,
                    });
                }
            }
        }
    }

    /// The operator's resolutions of an UNKNOWN or FAILED_TERMINAL operation the evidence
    /// allows, one per distinct resolution.
    fn push_resolutions(&self, state: &State, actions: &mut Vec<Action>) {
        let unresolved = matches!(
            state.store.state,
            OperationState::Unknown | OperationState::FailedTerminal
        );
        if !self.config.operator || !unresolved {
            return;
        }
        let mut seen = Vec::new();
        let evidence = self.evidence(state, Side::Workers);
        for e in by_verdict(state, &evidence) {
            for outcome in [
                Resolution::Confirmed,
                Resolution::VerifiedNotSent,
                Resolution::Broadcast,
            ] {
                if let Some(resolved) = self.resolve(state, outcome, e)
                    && !seen.contains(&resolved)
                {
                    seen.push(resolved);
                    actions.push(Action::Resolve {
                        outcome,
                        evidence: e.clone(),
                    });
                }
            }
        }
    }

    /// The witness's judgments of each proposal in its queue, one per distinct decision.
    fn push_attestations(&self, state: &State, actions: &mut Vec<Action>) {
        let queue: Vec<usize> = state.store.unwitnessed().map(|(i, _)| i).collect();
        if queue.is_empty() {
            return;
        }
        let evidence = self.evidence(state, Side::Witness);
        let distinct = by_verdict(state, &evidence);
        for i in queue {
            let Ok(proposal) = u8::try_from(i) else {
                continue;
            };
            let mut seen = Vec::new();
            for e in distinct.iter().copied() {
                let decision = self.witness_decision(state, i, e);
                if decision != witness::Decision::Nothing && !seen.contains(&decision) {
                    seen.push(decision);
                    actions.push(Action::Attest {
                        proposal,
                        evidence: e.clone(),
                    });
                }
            }
        }
    }

    /// Mining (a transaction at the nonce, or nothing) and reorganizations.
    fn push_chain_actions(&self, state: &State, actions: &mut Vec<Action>) {
        let chain = &state.chain;
        let attempts = &state.store.attempts;
        let mineable = chain.mineable(attempts, self.config.compromised_key);
        let statuses: &[bool] = if self.config.reverts {
            &[true, false]
        } else {
            &[true]
        };
        if chain.height < self.config.max_height {
            actions.push(Action::MineEmpty);
            for tx in &mineable {
                for succeeded in statuses {
                    actions.push(Action::Mine {
                        tx: *tx,
                        succeeded: *succeeded,
                    });
                }
            }
        }
        if chain.reorgs_left == 0 {
            return;
        }
        for depth in 1..=self.config.reorg_depth.min(chain.height) {
            let lowest = chain.height + 1 - depth;
            if !chain.mined().any(|m| m.block >= lowest) {
                // Replacing blocks that include nothing of ours changes nothing we can observe.
                continue;
            }
            let mut removed = chain.clone();
            removed.reorganize(depth, None, attempts, |_| false);
            actions.push(Action::Reorg {
                depth,
                refill: None,
            });
            for tx in removed.mineable(attempts, self.config.compromised_key) {
                for succeeded in statuses {
                    for offset in 0..depth {
                        let refill = Refill {
                            tx,
                            succeeded: *succeeded,
                            offset,
                        };
                        let mut refilled = chain.clone();
                        refilled.reorganize(
                            depth,
                            Some((tx, *succeeded, offset)),
                            attempts,
                            |_| false,
                        );
                        if (refilled.a, refilled.b) != (chain.a, chain.b) {
                            actions.push(Action::Reorg {
                                depth,
                                refill: Some(refill),
                            });
                        }
                    }
                }
            }
        }
    }
}

/// The first of `evidence` for each distinct verdict `decide` gives on `view`'s attempts: every
/// decision but the watcher's reorganization check depends on the evidence through its verdict
/// alone, so these are all the evaluations that can differ.
fn by_verdict<'a>(view: &State, evidence: &'a [Evidence]) -> Vec<&'a Evidence> {
    let roles = view.store.roles();
    let mut verdicts: Vec<Verdict> = Vec::new();
    let mut distinct = Vec::new();
    for e in evidence {
        let verdict = decide(&roles, NONCE, e);
        if !verdicts.contains(&verdict) {
            verdicts.push(verdict);
            distinct.push(e);
        }
    }
    distinct
}
