//! The state the model explores: the chain, the store, the wallets, each worker's progress
//! through its evaluation, time as the reconciler sees it, and the ghost history the properties
//! read. Nothing here decides anything; every layer above reads these types.

use opledger_domain::evidence::{Escalation, Inclusion, Timing};
use opledger_domain::state::OperationState;
use opledger_domain::witness::ReleaseEvidence;

use crate::chain::Chain;
use crate::store::{Store, Wallets};

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
    /// Steps a compromised principal took so far (bounded by
    /// [`Config::rogue_steps`](crate::Config::rogue_steps)).
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
    /// [`Config::split_read`](crate::Config::split_read)).
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
    /// [`Action::Attest`](super::Action::Attest)).
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
