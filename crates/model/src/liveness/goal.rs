//! The goals of the liveness search ([`crate::liveness`]): what every fair continuation must
//! reach, and whether a state has reached it, can no longer reach it, or leaves it to its
//! continuations.

use opledger_domain::state::OperationState;

use crate::model::State;
use crate::store::Hold;

/// What every fair continuation must reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Goal {
    /// The operation ends: CONFIRMED, VERIFIED_NOT_SENT, or FAILED_TERMINAL with an escalation.
    Ends,
    /// The hold is released.
    Released,
    /// A reopened release is decided again: CONFIRMED, VERIFIED_NOT_SENT resting on evidence
    /// not marked reorganized away, or FAILED_TERMINAL with an escalation.
    Redecided,
}

impl Goal {
    /// `Some(true)` when `state` reaches the goal, `Some(false)` when it can no longer reach it,
    /// `None` when its continuations decide.
    pub(crate) fn reached(self, state: &State) -> Option<bool> {
        match self {
            Goal::Ends => state.store.has_ended().then_some(true),
            Goal::Released if state.store.hold == Hold::Released => Some(true),
            Goal::Released => {
                (state.store.has_ended() || state.store.hold != Hold::Held).then_some(false)
            }
            Goal::Redecided if state.store.state == OperationState::VerifiedNotSent => {
                Some(state.store.witnessed_unmarked())
            }
            Goal::Redecided => state.store.has_ended().then_some(true),
        }
    }
}
