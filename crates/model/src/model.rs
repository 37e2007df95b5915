//! The state, the actions, and the stateright [`Model`] that explores them.
//!
//! Layered so that every dependency points one way: [`state`] and [`action`] hold the types
//! every other module reads, [`payout`] the model's configuration and memos; the workers'
//! decisions and commits ([`crate::workers`]), the witness ([`crate::witness`]) and the
//! compromised principal ([`crate::rogue`]) build on them; [`enabled`] and [`next`] assemble the
//! actions and their steps; the [`Model`] implementation here ties in the properties and the
//! report on top.

use stateright::{Model, Property};

pub mod action;
pub mod enabled;
pub mod next;
pub mod payout;
pub mod state;

pub use action::{Action, Refill, Submission};
pub use payout::PayoutModel;
pub use state::{
    CANCEL_AFTER_SECS, Clock, ESCALATE_AFTER_SECS, Ghost, Plan, Planned, State, Task, Worker,
    violation,
};

impl Model for PayoutModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.enabled_actions(state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        self.successor(state, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::properties::for_config(&self.config)
    }

    fn format_action(&self, action: &Action) -> String {
        crate::report::describe(action)
    }
}
