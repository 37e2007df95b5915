//! From agreed evidence to a verdict, and from a verdict to the one step a worker may take.
//!
//! [`decide`] reads the agreed [`Reading`] against the operation's attempts: a settlement needs
//! a transfer attempt that succeeded at final depth; a release needs our own cancel at final depth
//! (an included attempt that reverted at final depth moved no value either, but it goes to an
//! owner first, who may release it through an evidence-checked resolution). A consumed nonce with
//! none of our attempts included is an anomaly, never a release. [`next_step`] (the reconciler),
//! [`watcher_step`] (the broadcaster's watcher) and [`resolution_allowed`] (an operator's
//! resolution) turn the verdict into a step.

use super::Inclusion;
use super::content::{ContentMismatch, KindMismatch, Role};
use super::quorum::{NoAgreement, Reading};
use crate::state::OperationState;

/// Why an attempt cannot be trusted to be what it is stored as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttemptDefect {
    /// Its content is neither the approved transfer nor a cancel of it.
    #[error(transparent)]
    Content(#[from] ContentMismatch),
    /// Its stored kind contradicts its content.
    #[error(transparent)]
    Kind(#[from] KindMismatch),
}

/// Why the evidence allows no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoVerdict {
    /// The endpoints' answers are not evidence.
    #[error(transparent)]
    NoAgreement(#[from] NoAgreement),
    /// The agreed reading contradicts itself or the attempts (two of our attempts included, an
    /// inclusion without the nonce consumed, a reading of another number of attempts).
    #[error("the reading is inconsistent")]
    Inconsistent,
    /// The nonce is consumed at the pinned block, none of our attempts is included, and the
    /// consuming block is not yet final.
    #[error("the nonce moved but not at final depth")]
    NonceMovedNotFinal,
}

/// What the evidence establishes about one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing can be concluded: nothing moves.
    NoVerdict(NoVerdict),
    /// An attempt is not what it is stored as: security owns the operation, the hold stays.
    Tampered {
        /// Index of the first defective attempt (oldest first).
        attempt: usize,
        /// What is wrong with it.
        defect: AttemptDefect,
    },
    /// A transfer attempt succeeded at final depth: the payout happened.
    Settled {
        /// Index of the attempt.
        attempt: usize,
        /// Where.
        inclusion: Inclusion,
    },
    /// An attempt is included but not yet final.
    Pending {
        /// Index of the attempt.
        attempt: usize,
        /// What it is.
        role: Role,
    },
    /// Our own cancel succeeded at final depth: the transfer can no longer happen.
    Cancelled {
        /// Index of the cancel.
        attempt: usize,
        /// Where.
        inclusion: Inclusion,
    },
    /// An attempt of ours is included at final depth and reverted: it moved no value, and an owner
    /// must look at why before anything is released.
    Reverted {
        /// Index of the attempt.
        attempt: usize,
        /// What it was.
        role: Role,
        /// Where.
        inclusion: Inclusion,
    },
    /// The sender's nonce is consumed at final depth and none of our attempts is included: the
    /// hot wallet's key signed something we did not persist, or the nodes are inconsistent.
    NonceMovedWithoutUs,
    /// None of our attempts is included and the nonce is unconsumed at the pinned block.
    NotIncluded,
    /// The operation has no signed attempt at all: nothing of it can ever reach the chain once it
    /// has left APPROVED and SIGNING (no path leads back), whatever the chain says.
    NeverSigned,
}

/// The verdict on an operation whose attempts (oldest first) have the roles `attempts` (or a
/// defect), whose nonce is `nonce`, given what the endpoints agreed on (or why they did not).
pub fn decide(
    attempts: &[Result<Role, AttemptDefect>],
    nonce: u64,
    reading: &Result<Reading, NoAgreement>,
) -> Verdict {
    if attempts.is_empty() {
        return Verdict::NeverSigned;
    }
    let mut roles = Vec::with_capacity(attempts.len());
    for (attempt, role) in attempts.iter().enumerate() {
        match role {
            Ok(role) => roles.push(*role),
            Err(defect) => {
                return Verdict::Tampered {
                    attempt,
                    defect: *defect,
                };
            }
        }
    }
    let reading = match reading {
        Ok(reading) => reading,
        Err(no) => return Verdict::NoVerdict(NoVerdict::NoAgreement(*no)),
    };
    let inconsistent = Verdict::NoVerdict(NoVerdict::Inconsistent);
    if reading.inclusions.len() != roles.len() {
        return inconsistent;
    }
    let mut included = reading
        .inclusions
        .iter()
        .enumerate()
        .filter_map(|(i, inc)| inc.map(|inc| (i, inc)));
    let first = included.next();
    if included.next().is_some() {
        // One nonce, one mined transaction: two of ours included is a node's lie.
        return inconsistent;
    }
    let Some((attempt, inclusion)) = first else {
        if reading.nonce_at_final > nonce {
            return Verdict::NonceMovedWithoutUs;
        }
        if reading.nonce_at_pinned > nonce {
            return Verdict::NoVerdict(NoVerdict::NonceMovedNotFinal);
        }
        return Verdict::NotIncluded;
    };
    let role = roles[attempt];
    if inclusion.block.number > reading.pinned.number || reading.nonce_at_pinned <= nonce {
        return inconsistent;
    }
    let is_final = inclusion.block.number <= reading.final_block.number;
    if !is_final {
        return Verdict::Pending { attempt, role };
    }
    if reading.nonce_at_final <= nonce {
        return inconsistent;
    }
    match (inclusion.succeeded, role) {
        (false, role) => Verdict::Reverted {
            attempt,
            role,
            inclusion,
        },
        (true, Role::Transfer) => Verdict::Settled { attempt, inclusion },
        (true, Role::Cancel) => Verdict::Cancelled { attempt, inclusion },
    }
}

/// Who owns an escalated operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EscalationOwner {
    /// The team that runs payouts (the reconciler's configured owner).
    Operations,
    /// The security team: evidence of tampering or of a compromised key.
    Security,
}

/// An escalation: FAILED_TERMINAL with an owner and a reason code, hold kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Escalation {
    /// Who takes over.
    pub owner: EscalationOwner,
    /// The stable reason code recorded on the escalation.
    pub reason_code: &'static str,
}

impl Escalation {
    /// An attempt reverted at final depth.
    pub const REVERTED: Escalation = Escalation {
        owner: EscalationOwner::Operations,
        reason_code: "REVERTED",
    };
    /// The nonce moved at final depth with none of our attempts included.
    pub const NONCE_MOVED: Escalation = Escalation {
        owner: EscalationOwner::Security,
        reason_code: "NONCE_MOVED_WITHOUT_OUR_ATTEMPT",
    };
    /// An attempt's content contradicts the payload or its stored kind.
    pub const TAMPERED: Escalation = Escalation {
        owner: EscalationOwner::Security,
        reason_code: "ATTEMPT_CONTENT_MISMATCH",
    };
    /// No verdict within the reconciliation window.
    pub const NO_VERDICT: Escalation = Escalation {
        owner: EscalationOwner::Operations,
        reason_code: "NO_VERDICT_WITHIN_WINDOW",
    };
}

/// The one step a worker takes on an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing, for now.
    Wait,
    /// To CONFIRMED, the hold settled, the inclusion recorded (so the reorganization check
    /// covers it).
    Confirm {
        /// The settling attempt.
        attempt: usize,
        /// Where it was included.
        inclusion: Inclusion,
    },
    /// To VERIFIED_NOT_SENT (through UNKNOWN), the hold released.
    Release,
    /// A move that keeps the hold (UNKNOWN -> BROADCAST for the watcher, BROADCAST -> UNKNOWN for
    /// the reconciler).
    Move(OperationState),
    /// To FAILED_TERMINAL with an owner and a reason code, the hold kept.
    Escalate(Escalation),
    /// Ask the signer for a cancel at the same nonce and submit its stored bytes.
    SignCancel,
    /// Submit the stored bytes of the latest attempt (a cancel) again.
    ResubmitCancel,
}

/// What the reconciler knows about time, from the database clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Seconds since the latest attempt was persisted.
    pub latest_attempt_age_secs: u64,
    /// The role of the latest attempt.
    pub latest_role: Role,
    /// Seconds since the operation last changed state.
    pub unchanged_secs: u64,
    /// An attempt not included with its nonce unconsumed for this long gets a cancel.
    pub cancel_after_secs: u64,
    /// An UNKNOWN operation without a verdict for this long is escalated.
    pub escalate_after_secs: u64,
}

/// The reconciler's step for an operation in `state` (UNKNOWN, or BROADCAST gone stale). An
/// operation left without a verdict for `escalate_after_secs` is escalated from either state.
pub fn next_step(state: OperationState, verdict: Verdict, timing: Timing) -> Step {
    let broadcast = state == OperationState::Broadcast;
    let unknown = state == OperationState::Unknown;
    if !broadcast && !unknown {
        return Step::Wait;
    }
    let step = match verdict {
        Verdict::Settled { attempt, inclusion } => return Step::Confirm { attempt, inclusion },
        Verdict::Cancelled { .. } => return Step::Release,
        Verdict::Reverted { .. } => return Step::Escalate(Escalation::REVERTED),
        Verdict::NonceMovedWithoutUs => return Step::Escalate(Escalation::NONCE_MOVED),
        Verdict::Tampered { .. } => return Step::Escalate(Escalation::TAMPERED),
        // The watcher follows an included transfer to its final depth.
        Verdict::Pending {
            role: Role::Transfer,
            ..
        } if unknown => return Step::Move(OperationState::Broadcast),
        Verdict::Pending {
            role: Role::Transfer,
            ..
        } => Step::Wait,
        // An included cancel is the reconciler's to follow: it never goes back to BROADCAST.
        Verdict::Pending {
            role: Role::Cancel, ..
        } if broadcast => return Step::Move(OperationState::Unknown),
        Verdict::Pending {
            role: Role::Cancel, ..
        } => Step::Wait,
        Verdict::NotIncluded if broadcast => return Step::Move(OperationState::Unknown),
        Verdict::NotIncluded if timing.latest_attempt_age_secs < timing.cancel_after_secs => {
            Step::Wait
        }
        Verdict::NotIncluded => match timing.latest_role {
            Role::Cancel => Step::ResubmitCancel,
            Role::Transfer => Step::SignCancel,
        },
        Verdict::NoVerdict(_) | Verdict::NeverSigned => Step::Wait,
    };
    // Without a verdict for the whole window (a node that keeps lying or lagging blocks every
    // verdict, whether the operation is UNKNOWN or BROADCAST): an owner takes over, hold kept.
    if timing.unchanged_secs >= timing.escalate_after_secs {
        return Step::Escalate(Escalation::NO_VERDICT);
    }
    step
}

/// The watcher's step for a BROADCAST operation when the head moved.
pub fn watcher_step(verdict: Verdict) -> Step {
    match verdict {
        Verdict::Settled { attempt, inclusion } => Step::Confirm { attempt, inclusion },
        // A cancel, included or final, is the reconciler's: it alone may release.
        Verdict::Cancelled { .. }
        | Verdict::Pending {
            role: Role::Cancel, ..
        } => Step::Move(OperationState::Unknown),
        Verdict::Reverted { .. } => Step::Escalate(Escalation::REVERTED),
        Verdict::NonceMovedWithoutUs => Step::Escalate(Escalation::NONCE_MOVED),
        Verdict::Tampered { .. } => Step::Escalate(Escalation::TAMPERED),
        Verdict::Pending {
            role: Role::Transfer,
            ..
        }
        | Verdict::NotIncluded
        | Verdict::NoVerdict(_)
        | Verdict::NeverSigned => Step::Wait,
    }
}

/// An outcome an operator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resolution {
    /// The payout happened.
    Confirmed,
    /// The payout cannot happen.
    VerifiedNotSent,
    /// An included transfer the watcher should follow.
    Broadcast,
}

/// True when the verdict, established now, supports the operator's requested outcome. A consumed
/// nonce without our attempt supports none: that is for security, with evidence from outside. An
/// operation that was never signed (the signer ended it before signing) may be released: no
/// signed bytes exist, and none can be made for it any more.
pub fn resolution_allowed(verdict: Verdict, outcome: Resolution) -> bool {
    matches!(
        (verdict, outcome),
        (Verdict::Settled { .. }, Resolution::Confirmed)
            | (
                Verdict::Cancelled { .. } | Verdict::Reverted { .. } | Verdict::NeverSigned,
                Resolution::VerifiedNotSent
            )
            | (
                Verdict::Pending {
                    role: Role::Transfer,
                    ..
                },
                Resolution::Broadcast
            )
    )
}
