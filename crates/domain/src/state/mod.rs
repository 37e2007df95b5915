//! Lifecycle of a withdrawal operation: states, actors, and the one table of
//! legal transitions with their effect on the held funds.
//!
//! [`TRANSITIONS`] is the single source of truth. Every other crate asks
//! [`check_transition`] instead of encoding its own rules. Once an operation is
//! `SIGNED`, no path leads back to `APPROVED` or `REQUESTED`: a payout that may
//! have left must never become payable again.

use std::fmt;
use std::str::FromStr;

/// Why a state or actor name, or a transition, was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The text is not the name of an operation state.
    #[error("unknown operation state")]
    UnknownState,
    /// The text is not the name of an actor.
    #[error("unknown actor")]
    UnknownActor,
}

/// Why a requested transition is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// No row of [`TRANSITIONS`] goes from `from` to `to`.
    #[error("illegal transition from {from} to {to}")]
    Illegal {
        /// Current state.
        from: OperationState,
        /// Requested state.
        to: OperationState,
    },
    /// The row exists but `actor` is not allowed to perform it.
    #[error("actor {actor} may not move an operation from {from} to {to}")]
    ActorNotAllowed {
        /// Current state.
        from: OperationState,
        /// Requested state.
        to: OperationState,
        /// Who asked.
        actor: Actor,
    },
}

macro_rules! named_enum {
    (
        $(#[$meta:meta])* $name:ident, $err:expr, $all_len:literal,
        { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }
    ) => {
        $(#[$meta])*
        #[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; $all_len] = [$($name::$variant,)+];

            /// Wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl FromStr for $name {
            type Err = StateError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err($err),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

named_enum!(
    /// State of a withdrawal operation.
    OperationState, StateError::UnknownState, 10, {
        /// Accepted from the client, awaiting approval; funds held.
        Requested => "REQUESTED",
        /// Approved, waiting for a signer.
        Approved => "APPROVED",
        /// A signer holds the lease and is signing.
        Signing => "SIGNING",
        /// A signed transaction exists; from here on it may reach the chain.
        Signed => "SIGNED",
        /// Handed to the network.
        Broadcast => "BROADCAST",
        /// Not known whether the transaction reached the chain.
        Unknown => "UNKNOWN",
        /// Seen on chain; can still be reorged back to BROADCAST.
        Confirmed => "CONFIRMED",
        /// Proven never to have been sent; funds released. Final, but for the chain watcher's
        /// reorganization check: a proof whose block is no longer canonical reopens it (UNKNOWN,
        /// funds held again).
        VerifiedNotSent => "VERIFIED_NOT_SENT",
        /// Failed in a way automation cannot resolve; an operator decides.
        FailedTerminal => "FAILED_TERMINAL",
        /// Refused before signing; funds released. Final.
        Rejected => "REJECTED",
    }
);

impl OperationState {
    /// True when nothing but a reorganization leaves this state (VERIFIED_NOT_SENT, REJECTED):
    /// no worker or person decides again on an operation in it; only the chain watcher reopens a
    /// VERIFIED_NOT_SENT one whose proof a reorganization removed. CONFIRMED is not final (its
    /// settlement is re-checked the same way, and it is the payout's normal end) and
    /// FAILED_TERMINAL is not (operator).
    pub fn is_final(self) -> bool {
        matches!(
            self,
            OperationState::VerifiedNotSent | OperationState::Rejected
        )
    }

    /// True when the outcome is not known and needs reconciliation or an operator.
    pub fn is_unresolved(self) -> bool {
        matches!(
            self,
            OperationState::Unknown | OperationState::FailedTerminal
        )
    }
}

named_enum!(
    /// Component or person that asks for a transition.
    Actor, StateError::UnknownActor, 10, {
        /// The operations API that creates operations.
        Operations => "operations",
        /// The approvals service.
        Approvals => "approvals",
        /// The risk engine.
        Risk => "risk",
        /// The signer.
        Signer => "signer",
        /// The broadcaster.
        Broadcaster => "broadcaster",
        /// The chain watcher.
        ChainWatcher => "chain_watcher",
        /// The reconciler.
        Reconciler => "reconciler",
        /// A human operator.
        Operator => "operator",
        /// The processor of inbound webhooks.
        WebhookProcessor => "webhook_processor",
        /// The custodian executor: sends an approved withdrawal to its custodian under our
        /// reference and follows the custodian's record.
        Custodian => "custodian",
    }
);

/// What a transition does to the funds held for the operation.
#[derive(Copy, Clone, Debug, Eq, PartialEq, Hash)]
pub enum HoldEffect {
    /// The hold stays as it is.
    Keep,
    /// The hold is released back to the account (nothing was paid).
    Release,
    /// The hold is consumed: the payment happened.
    Settle,
    /// A settled payment or an applied release is reopened (reorg): the hold is re-established
    /// from where it went (external for a settlement, available for a release).
    Reopen,
}

/// One legal transition and who may perform it.
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
pub struct Transition {
    /// State left.
    pub from: OperationState,
    /// State entered.
    pub to: OperationState,
    /// Actors allowed to perform it.
    pub actors: &'static [Actor],
    /// Effect on the held funds.
    pub hold: HoldEffect,
}

/// State of every new operation.
pub const INITIAL_STATE: OperationState = OperationState::Requested;
/// Actor that creates operations.
pub const CREATOR: Actor = Actor::Operations;

use Actor as A;
use HoldEffect as H;
use OperationState as S;

const fn row(from: S, to: S, actors: &'static [A], hold: H) -> Transition {
    Transition {
        from,
        to,
        actors,
        hold,
    }
}

/// The one table of legal transitions.
#[rustfmt::skip]
pub const TRANSITIONS: &[Transition] = &[
    row(S::Requested, S::Approved, &[A::Approvals], H::Keep),
    row(S::Requested, S::Rejected, &[A::Approvals, A::Risk, A::Operator, A::WebhookProcessor], H::Release),
    // The signer claims to sign; the custodian executor claims to send to its custodian.
    row(S::Approved, S::Signing, &[A::Signer, A::Custodian], H::Keep),
    // Signed bytes persisted; for a custodian, the request (body and its hash) persisted before
    // its first call: from here on it may reach the provider.
    row(S::Signing, S::Signed, &[A::Signer, A::Custodian], H::Keep),
    // Lease reclaim while nothing was signed or requested.
    row(S::Signing, S::Approved, &[A::Signer, A::Custodian], H::Keep),
    // The signer's refusal that is evidence of tampering or a configuration fault ends it.
    row(S::Approved, S::FailedTerminal, &[A::Signer, A::Custodian], H::Keep),
    // A webhook about a self-signed transfer is a hint for the watcher, never a move.
    row(S::Signed, S::Broadcast, &[A::Broadcaster, A::Custodian], H::Keep),
    row(S::Signed, S::Unknown, &[A::Broadcaster, A::Custodian], H::Keep),
    // The custodian refused the request before storing anything: an operator decides, the funds
    // stay held (a refusal is no witnessed evidence).
    row(S::Signed, S::FailedTerminal, &[A::Custodian], H::Keep),
    // The custodian executor settles its provider's transaction from chain evidence.
    row(S::Broadcast, S::Confirmed, &[A::ChainWatcher, A::Reconciler, A::Custodian], H::Settle),
    row(S::Broadcast, S::Unknown, &[A::Broadcaster, A::ChainWatcher, A::Reconciler, A::Custodian], H::Keep),
    row(S::Broadcast, S::FailedTerminal, &[A::ChainWatcher, A::Reconciler], H::Keep),
    row(S::Unknown, S::Broadcast, &[A::Reconciler, A::Operator, A::Custodian], H::Keep),
    row(S::Unknown, S::Confirmed, &[A::Reconciler, A::Operator], H::Settle),
    // For a custodian's withdrawal, only with the witness's attestation of the custodian's
    // terminal record without a transaction (the database's release rule).
    row(S::Unknown, S::VerifiedNotSent, &[A::Reconciler, A::Operator, A::Custodian], H::Release),
    row(S::Unknown, S::FailedTerminal, &[A::Reconciler, A::Custodian], H::Keep),
    // Reorg: the confirming block was dropped.
    row(S::Confirmed, S::Broadcast, &[A::ChainWatcher], H::Reopen),
    // Reorg: the block of the release's proof (our cancel at final depth) was dropped; the
    // original may be mined again, so the funds are held again while the reconciler decides.
    row(S::VerifiedNotSent, S::Unknown, &[A::ChainWatcher], H::Reopen),
    row(S::FailedTerminal, S::Broadcast, &[A::Operator], H::Keep),
    row(S::FailedTerminal, S::Confirmed, &[A::Operator], H::Settle),
    row(S::FailedTerminal, S::VerifiedNotSent, &[A::Operator], H::Release),
];

/// The row going from `from` to `to`, if any.
pub fn find_transition(from: OperationState, to: OperationState) -> Option<&'static Transition> {
    TRANSITIONS.iter().find(|t| t.from == from && t.to == to)
}

/// Checks that `actor` may move an operation from `from` to `to`, and returns
/// the effect on the hold.
pub fn check_transition(
    from: OperationState,
    to: OperationState,
    actor: Actor,
) -> Result<HoldEffect, TransitionError> {
    let row = find_transition(from, to).ok_or(TransitionError::Illegal { from, to })?;
    if row.actors.contains(&actor) {
        Ok(row.hold)
    } else {
        Err(TransitionError::ActorNotAllowed { from, to, actor })
    }
}

#[cfg(test)]
mod tests;
