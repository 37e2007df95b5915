//! The state, the actions, and the stateright [`Model`] that explores them.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use opledger_domain::evidence::{
    Escalation, Inclusion, ReplacementRequest, Resolution, Timing, Verdict, decide,
};
use opledger_domain::state::OperationState;
use opledger_domain::witness::ReleaseEvidence;
use stateright::{Model, Property};

use crate::chain::{Chain, Mined, NONCE, Tx};
use crate::config::{Config, Rotation, Side, Webhooks};
use crate::endpoints::{self, Evidence};
use crate::properties;
use crate::rogue::Rogue;
use crate::store::{MAX_ATTEMPTS, Store, Wallets};
use crate::truth;

/// Seconds after which an attempt not included gets a cancel (the reconciler's policy).
pub const CANCEL_AFTER_SECS: u64 = 300;
/// Seconds after which an UNKNOWN operation without a verdict is escalated.
pub const ESCALATE_AFTER_SECS: u64 = 3_600;

/// Bits of [`Ghost::violations`]: each records that a committed step broke a rule, so that an
/// `always` property names the first state where it happened.
pub mod violation {
    /// A hold was settled without our transfer, succeeded, at final depth where recorded.
    pub const SETTLED_WITHOUT_FINAL_TRANSFER: u16 = 1 << 0;
    /// A hold was released without our cancel or a reverted attempt of ours at final depth.
    pub const RELEASED_WITHOUT_EVIDENCE: u16 = 1 << 1;
    /// UNKNOWN was left on a step the honest chain did not support when it was decided.
    pub const LEFT_UNKNOWN_WITHOUT_EVIDENCE: u16 = 1 << 2;
    /// A worker asked the store for a move the transition table refuses to its actor.
    pub const ILLEGAL_TRANSITION: u16 = 1 << 3;
    /// A worker's decision function returned a step that is not that worker's to take.
    pub const UNEXPECTED_STEP: u16 = 1 << 4;
    /// A hold effect was applied to a hold in the wrong state.
    pub const HOLD_EFFECT_ON_WRONG_HOLD: u16 = 1 << 5;
    /// An escalation named a cause the chain and the store do not show.
    pub const ESCALATED_WITHOUT_CAUSE: u16 = 1 << 6;
    /// A hold was released with no evidence both proposed and attested but proofs marked
    /// reorganized away.
    pub const RELEASED_ON_MARKED_PROOF: u16 = 1 << 7;
}

/// Facts about the run's history that no real component stores, kept for the properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ghost {
    /// The [`violation`] bits set so far.
    pub violations: u16,
    /// Attempts (bit set) that were value-moving at final depth at some point of the run.
    pub final_moves: u8,
    /// True once a confirmation was reopened by the reorganization check.
    pub reopened: bool,
    /// True once an applied release was reopened by the reorganization check (VERIFIED_NOT_SENT
    /// -> UNKNOWN, the hold held again).
    pub release_reopened: bool,
    /// Steps a compromised principal took so far (bounded by [`Config::rogue_steps`]).
    pub rogue_steps: u8,
}

/// A step a worker decided and has not committed yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Planned {
    /// To CONFIRMED, the hold settled, this inclusion recorded.
    Confirm {
        /// The settling attempt.
        attempt: u8,
        /// Where the evidence says it is.
        inclusion: Inclusion,
    },
    /// Record a proposal of this evidence, then move one step towards VERIFIED_NOT_SENT: from
    /// BROADCAST to UNKNOWN, from UNKNOWN to VERIFIED_NOT_SENT with the hold released when the
    /// release rule allows it (otherwise nothing moves, and a later evaluation tries again).
    Release(ReleaseEvidence),
    /// A move that keeps the hold.
    Move(OperationState),
    /// To FAILED_TERMINAL with this escalation, the hold kept.
    Escalate(Escalation),
    /// Ask the signer for a cancel (the signer persists it, or crashes first).
    SignCancel,
    /// Submit the stored bytes of the latest attempt (a cancel) again.
    Resubmit,
    /// CONFIRMED back to BROADCAST: the recorded inclusion is gone (the reorganization check).
    Reopen,
    /// `opledger_reopen_release` on this proof of an applied release, whose block is gone (the
    /// reorganization check of a VERIFIED_NOT_SENT operation): mark the proof, then, unless
    /// another witnessed proof stands, VERIFIED_NOT_SENT -> UNKNOWN with the hold held again.
    ReopenRelease(ReleaseEvidence),
}

/// A decided step with what it was decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The state the worker read (the store refuses the move if the state changed since).
    pub from: OperationState,
    /// The step.
    pub step: Planned,
    /// True when the honest chain supported the step when the worker decided it.
    pub supported: bool,
}

/// A worker's progress through one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// Not evaluating.
    Idle,
    /// Read this many attempts from the store, not yet the endpoints (with
    /// [`Config::split_read`]).
    StoreRead {
        /// How many attempts it read.
        attempts: u8,
    },
    /// Decided, not committed.
    Planned(Plan),
}

/// The whole modelled system.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The canonical chain.
    pub chain: Chain,
    /// The operation's rows.
    pub store: Store,
    /// The tenant's wallets.
    pub wallets: Wallets,
    /// The broadcaster's chain watcher.
    pub watcher: Task,
    /// The reconciler.
    pub reconciler: Task,
    /// History for the properties.
    pub ghost: Ghost,
}

impl State {
    /// A worker's task.
    pub fn task(&self, worker: Worker) -> Task {
        match worker {
            Worker::Watcher => self.watcher,
            Worker::Reconciler => self.reconciler,
        }
    }

    pub(crate) fn task_mut(&mut self, worker: Worker) -> &mut Task {
        match worker {
            Worker::Watcher => &mut self.watcher,
            Worker::Reconciler => &mut self.reconciler,
        }
    }
}

/// A worker with an evaluation cycle (read evidence, decide, commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Worker {
    /// The broadcaster's chain watcher (BROADCAST operations, and the reorganization check of
    /// CONFIRMED ones and of the proofs of VERIFIED_NOT_SENT ones).
    Watcher,
    /// The reconciler (UNKNOWN operations, and BROADCAST ones gone stale).
    Reconciler,
}

impl Worker {
    /// Every worker with an evaluation cycle (the witness reads and records in one step:
    /// [`Action::Attest`]).
    pub const ALL: [Worker; 2] = [Worker::Watcher, Worker::Reconciler];
}

/// Time as the reconciler sees it, abstracted to whether each window has elapsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Clock {
    /// The latest attempt is older than the cancel window.
    pub cancel_window_elapsed: bool,
    /// The operation has not changed state for longer than the escalation window.
    pub escalation_window_elapsed: bool,
}

impl Clock {
    /// Every combination.
    pub const ALL: [Clock; 4] = [
        Clock {
            cancel_window_elapsed: false,
            escalation_window_elapsed: false,
        },
        Clock {
            cancel_window_elapsed: true,
            escalation_window_elapsed: false,
        },
        Clock {
            cancel_window_elapsed: false,
            escalation_window_elapsed: true,
        },
        Clock {
            cancel_window_elapsed: true,
            escalation_window_elapsed: true,
        },
    ];

    /// The `Timing` the domain's `next_step` takes.
    pub fn timing(self, latest_role: opledger_domain::evidence::Role) -> Timing {
        Timing {
            latest_attempt_age_secs: if self.cancel_window_elapsed {
                CANCEL_AFTER_SECS
            } else {
                0
            },
            latest_role,
            unchanged_secs: if self.escalation_window_elapsed {
                ESCALATE_AFTER_SECS
            } else {
                0
            },
            cancel_after_secs: CANCEL_AFTER_SECS,
            escalate_after_secs: ESCALATE_AFTER_SECS,
        }
    }
}

/// What became of the broadcaster's first submission of a SIGNED operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Submission {
    /// The node accepted it: BROADCAST.
    Accepted,
    /// The answer was lost: UNKNOWN. `reached` tells whether the bytes reached the network.
    AnswerLost {
        /// The bytes reached the network.
        reached: bool,
    },
    /// Submitted, then the broadcaster crashed before its commit: still SIGNED.
    CrashedAfterSubmit,
}

/// A reorganization's new fork includes this transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refill {
    /// The transaction.
    pub tx: Tx,
    /// Its receipt status.
    pub succeeded: bool,
    /// Its block: the lowest new block plus this.
    pub offset: u8,
}

/// One step of the system.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The broadcaster submits a SIGNED operation's original attempt.
    Broadcast(Submission),
    /// The stored bytes of an attempt reach the network (whoever submits them: a worker, a
    /// rebroadcast, or anyone who read them).
    Publish(u8),
    /// A block including a transaction at the nonce.
    Mine {
        /// The transaction.
        tx: Tx,
        /// Its receipt status.
        succeeded: bool,
    },
    /// A block including nothing of ours.
    MineEmpty,
    /// The top `depth` blocks are replaced.
    Reorg {
        /// How many blocks.
        depth: u8,
        /// What the new fork includes at the nonce, if anything.
        refill: Option<Refill>,
    },
    /// The tenant's current wallet becomes B.
    Rotate {
        /// The signer keeps A's key to finish its nonces.
        keep_retired_key: bool,
    },
    /// The broadcaster asks the signer for a fee bump, which it persists (a crash before the
    /// commit is a step that changes nothing).
    Bump,
    /// A worker reads the operation's attempts, before asking the endpoints (with
    /// [`Config::split_read`]).
    ReadStore(Worker),
    /// A worker reads the endpoints' evidence and decides.
    Evaluate {
        /// Who.
        worker: Worker,
        /// What `agree` made of the answers.
        evidence: Evidence,
        /// How much time passed (the reconciler's `Timing`).
        clock: Clock,
    },
    /// The witness reads its own endpoints about a proposal in its queue, decides, and records
    /// its attestation or its refusal (or nothing, to read again later).
    Attest {
        /// The proposal's place in the store.
        proposal: u8,
        /// What `agree` made of the witness's endpoints' answers.
        evidence: Evidence,
    },
    /// A step of the compromised principal ([`crate::rogue`]).
    Rogue(Rogue),
    /// A webhook about the operation arrives (any claim, duplicated, reordered or forged: it is a
    /// hint) and triggers a watcher evaluation.
    Webhook {
        /// What the watcher's evaluation read.
        evidence: Evidence,
    },
    /// The old, trusting webhook processor: a claimed confirmation of this attempt moves the
    /// operation to CONFIRMED.
    TrustedWebhook {
        /// The attempt the webhook claims confirmed.
        attempt: u8,
    },
    /// A worker commits its decided step (its answer may be lost afterwards, which changes
    /// nothing: it reads the store again on its next evaluation).
    Commit(Worker),
    /// A worker crashes before committing its decided step.
    Crash(Worker),
    /// An operator asks for an outcome; applied only if `resolution_allowed` says the evidence
    /// read now supports it.
    Resolve {
        /// The outcome asked for.
        outcome: Resolution,
        /// What the operator's evaluation read.
        evidence: Evidence,
    },
}

type EvidenceKey = (Side, u8, Option<Mined>, Option<Mined>, usize);

/// The model: a configuration, and memos of pure computations (the endpoints' possible evidence
/// for a chain, and the liveness verdict of a state).
pub struct PayoutModel {
    /// What this run explores.
    pub config: Config,
    evidence: Mutex<HashMap<EvidenceKey, Arc<Vec<Evidence>>>>,
    pub(crate) liveness: Mutex<HashMap<(u64, crate::liveness::Goal), bool>>,
}

impl fmt::Debug for PayoutModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PayoutModel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PayoutModel {
    /// A model of `config`.
    pub fn new(config: Config) -> PayoutModel {
        PayoutModel {
            config,
            evidence: Mutex::new(HashMap::new()),
            liveness: Mutex::new(HashMap::new()),
        }
    }

    /// The initial state: a SIGNED operation with its original attempt, nothing submitted.
    pub fn initial(&self) -> State {
        State {
            chain: Chain::genesis(self.config.reorgs),
            store: Store::signed(),
            wallets: Wallets {
                rotated: false,
                a_key: true,
            },
            watcher: Task::Idle,
            reconciler: Task::Idle,
            ghost: Ghost::default(),
        }
    }

    /// How many states the liveness check has judged.
    pub fn liveness_states(&self) -> usize {
        self.liveness.lock().map_or(0, |memo| memo.len())
    }

    /// Every evidence a worker may hold after asking `side`'s endpoints in `state`.
    pub fn evidence(&self, state: &State, side: Side) -> Arc<Vec<Evidence>> {
        let key = (
            side,
            state.chain.height,
            state.chain.a,
            state.chain.b,
            state.store.attempts.len(),
        );
        if let Ok(memo) = self.evidence.lock()
            && let Some(found) = memo.get(&key)
        {
            return Arc::clone(found);
        }
        let computed = Arc::new(endpoints::outcomes(
            &self.config,
            side,
            &state.chain,
            state.store.attempts.len(),
        ));
        if let Ok(mut memo) = self.evidence.lock() {
            memo.insert(key, Arc::clone(&computed));
        }
        computed
    }

    /// What `worker` knows of `state` when it asks the endpoints, if it is ready to: the state
    /// itself, or with [`Config::split_read`] the state with only the attempts it read.
    pub fn view(&self, state: &State, worker: Worker) -> Option<State> {
        match (state.task(worker), self.config.split_read) {
            (Task::Idle, false) => Some(state.clone()),
            (Task::StoreRead { attempts }, true) => {
                let mut view = state.clone();
                view.store.attempts.truncate(usize::from(attempts));
                Some(view)
            }
            _ => None,
        }
    }

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
        if let Some(view) = self.view(state, Worker::Watcher)
            && watching
        {
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
                if decision != crate::workers::Decision::Nothing && !seen.contains(&decision) {
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
        if let Some(view) = self.view(state, Worker::Reconciler)
            && reconciling
        {
            let mut seen = Vec::new();
            let evidence = self.evidence(&view, Side::Workers);
            for e in by_verdict(&view, &evidence) {
                for clock in Clock::ALL {
                    let decision = self.reconciler_decision(&view, e, clock);
                    if decision != crate::workers::Decision::Nothing && !seen.contains(&decision) {
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
        let unresolved = matches!(
            state.store.state,
            OperationState::Unknown | OperationState::FailedTerminal
        );
        if self.config.operator && unresolved {
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
        let queue: Vec<usize> = state.store.unwitnessed().map(|(i, _)| i).collect();
        if !queue.is_empty() {
            let evidence = self.evidence(state, Side::Witness);
            let distinct = by_verdict(state, &evidence);
            for i in queue {
                let Ok(proposal) = u8::try_from(i) else {
                    continue;
                };
                let mut seen = Vec::new();
                for e in distinct.iter().copied() {
                    let decision = self.witness_decision(state, i, e);
                    if decision != crate::witness::Decision::Nothing && !seen.contains(&decision) {
                        seen.push(decision);
                        actions.push(Action::Attest {
                            proposal,
                            evidence: e.clone(),
                        });
                    }
                }
            }
        }
    }

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

impl Model for PayoutModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
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

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match action {
            Action::Broadcast(submission) => self.broadcast(&mut next, submission)?,
            Action::Publish(i) => next.chain.public |= 1 << i,
            Action::Mine { tx, succeeded } => {
                next.chain.mine(Some((tx, succeeded)), &next.store.attempts);
            }
            Action::MineEmpty => next.chain.mine(None, &next.store.attempts),
            Action::Reorg { depth, refill } => {
                let attempts = next.store.attempts.clone();
                next.chain.reorganize(
                    depth,
                    refill.map(|r| (r.tx, r.succeeded, r.offset)),
                    &attempts,
                    |m| truth::is_value_move(m, &attempts),
                );
            }
            Action::Rotate { keep_retired_key } => {
                next.wallets.rotated = true;
                next.wallets.a_key = keep_retired_key;
            }
            Action::Bump => {
                if !self.sign_replacement(&mut next, ReplacementRequest::FeeBump) {
                    return None;
                }
            }
            Action::ReadStore(worker) => {
                let attempts = u8::try_from(next.store.attempts.len()).ok()?;
                *next.task_mut(worker) = Task::StoreRead { attempts };
            }
            Action::Evaluate {
                worker,
                evidence,
                clock,
            } => self.evaluate(&mut next, worker, &evidence, clock)?,
            Action::Webhook { evidence } => {
                self.evaluate(&mut next, Worker::Watcher, &evidence, Clock::ALL[0])?;
            }
            Action::TrustedWebhook { attempt } => self.trust_webhook(&mut next, attempt)?,
            Action::Attest { proposal, evidence } => {
                self.witness(&mut next, usize::from(proposal), &evidence)?;
            }
            Action::Rogue(step) => self.rogue(&mut next, step)?,
            Action::Commit(worker) => self.commit(&mut next, worker),
            Action::Crash(worker) => *next.task_mut(worker) = Task::Idle,
            Action::Resolve { outcome, evidence } => {
                let resolved = self.resolve(state, outcome, &evidence)?;
                self.apply_resolution(&mut next, resolved);
            }
        }
        next.ghost.final_moves |=
            truth::final_value_moves(&next.chain, &next.store.attempts, self.config.confirmations);
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::for_config(&self.config)
    }

    fn format_action(&self, action: &Action) -> String {
        crate::report::describe(action)
    }
}
