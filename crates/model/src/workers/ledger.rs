//! The store's side of a move: the ledger's release rule, and the transition itself (the
//! compare-and-set on the state, the transition table, the hold effect), each checked against
//! [`truth`].

use opledger_domain::evidence::Escalation;
use opledger_domain::state::{Actor, HoldEffect, OperationState, check_transition};

use crate::PayoutModel;
use crate::config::ReleaseRule;
use crate::legacy;
use crate::model::{State, violation};
use crate::store::{Confirmation, Hold, Store};
use crate::truth;

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

impl PayoutModel {
    /// The ledger's release rule over the store's records: the domain's
    /// (`opledger_domain::witness::release_allowed`, [`Store::release_permitted`]), or the mutant
    /// that releases on a proposal alone.
    pub fn release_permitted(&self, store: &Store) -> bool {
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
}
