//! A compromised principal ([`Compromised`]), one at a time: an adversary holding one login,
//! which acts at any moment besides the honest services (which keep running). It goes through the
//! same store as everyone: the transition table for its actor, the release rule for the hold,
//! and the release tables' keys (an attestation names a recorded proposal, which the witness's
//! login cannot write).
//!
//! A compromised proposer may record a proposal of any attempt's hash with any block of the
//! canonical chain at that moment (number and hash), as any principal its login may write: over
//! the runs explored, every attempt in every block of every history the chain had. A hash that
//! names none of the operation's attempts is left out (the release rule refuses it), and so is a
//! block no history had (the witness attests only what its own verdict names: one of the attempts,
//! in a block of the chain its endpoints read). It may also ask for any move the transition table
//! allows its actors, and ask the ledger to release the hold at any moment, whatever the state.
//!
//! [`crate::Config::rogue_steps`] bounds its proposals, attestations and moves in one run (its
//! requests to release are not bounded): one proposal the witness attests is all a release needs,
//! and no move changes what the witness reads.

use opledger_domain::state::{Actor, OperationState, check_transition};
use opledger_domain::witness::{Principal, ReleaseEvidence};

use crate::PayoutModel;
use crate::config::Compromised;
use crate::model::{Action, Planned, State, violation};
use crate::store::Hold;
use crate::truth;
use crate::workers::Move;

pub use crate::model::action::Rogue;

impl Compromised {
    /// The principals whose proposals the adversary may record.
    pub fn principals(self) -> &'static [Principal] {
        match self {
            Compromised::ReconcilerLogin => &[Principal::Reconciler, Principal::Operator],
            Compromised::Operator => &[Principal::Operator],
            Compromised::Nobody | Compromised::WitnessLogin => &[],
        }
    }

    /// The actors whose moves the adversary may ask for.
    pub fn actors(self) -> &'static [Actor] {
        match self {
            Compromised::ReconcilerLogin => &[Actor::Reconciler, Actor::Operator],
            Compromised::Operator => &[Actor::Operator],
            Compromised::Nobody | Compromised::WitnessLogin => &[],
        }
    }
}

impl PayoutModel {
    /// The compromised principal's possible steps in `state`.
    pub(crate) fn push_rogue_actions(&self, state: &State, actions: &mut Vec<Action>) {
        let compromised = self.config.compromised;
        let store = &state.store;
        if compromised == Compromised::Nobody {
            return;
        }
        if !compromised.actors().is_empty() && store.hold == Hold::Held {
            actions.push(Action::Rogue(Rogue::Release));
        }
        if state.ghost.rogue_steps >= self.config.rogue_steps {
            return;
        }
        if compromised == Compromised::WitnessLogin {
            for p in &store.proposals {
                if !store.attestations.iter().any(|a| a.evidence == p.evidence) {
                    actions.push(Action::Rogue(Rogue::Attest(p.evidence)));
                }
            }
            return;
        }
        for principal in compromised.principals() {
            for tx_hash in store.attempt_hashes() {
                for number in 1..=state.chain.height {
                    let evidence = ReleaseEvidence {
                        tx_hash,
                        block: state.chain.block(number),
                    };
                    if store.proposal(&evidence).is_none() {
                        actions.push(Action::Rogue(Rogue::Propose {
                            principal: *principal,
                            evidence,
                        }));
                    }
                }
            }
        }
        for actor in compromised.actors() {
            for to in OperationState::ALL {
                if check_transition(store.state, to, *actor).is_ok() {
                    actions.push(Action::Rogue(Rogue::Move {
                        actor: *actor,
                        state: to,
                    }));
                }
            }
        }
    }

    /// Applies the compromised principal's step: `None` when the store refuses it.
    pub(crate) fn rogue(&self, state: &mut State, step: Rogue) -> Option<()> {
        match step {
            Rogue::Propose {
                principal,
                evidence,
            } => {
                if !state.store.propose(principal, evidence) {
                    return None;
                }
            }
            Rogue::Attest(evidence) => {
                if !state.store.attest(evidence) {
                    return None;
                }
            }
            Rogue::Move { actor, state: to } => {
                let from = state.store.state;
                let confirmations = self.config.confirmations;
                let judged = match to {
                    OperationState::VerifiedNotSent => {
                        truth::release_backed(&state.chain, &state.store.attempts, confirmations)
                    }
                    // A claimed confirmation or escalation names nothing the chain shows.
                    OperationState::Confirmed | OperationState::FailedTerminal => false,
                    other => self.supported(state, &Planned::Move(other)),
                };
                let moved = self.transition(
                    state,
                    Move {
                        from,
                        to,
                        actor,
                        supported: judged,
                        settled: None,
                        escalation: None,
                    },
                );
                if !moved {
                    return None;
                }
            }
            Rogue::Release => {
                if state.store.hold != Hold::Held || !self.release_permitted(&state.store) {
                    return None;
                }
                state.store.hold = Hold::Released;
                let confirmations = self.config.confirmations;
                if !truth::release_backed(&state.chain, &state.store.attempts, confirmations) {
                    state.ghost.violations |= violation::RELEASED_WITHOUT_EVIDENCE;
                }
                if !state.store.witnessed_unmarked() {
                    state.ghost.violations |= violation::RELEASED_ON_MARKED_PROOF;
                }
            }
        }
        if step != Rogue::Release {
            state.ghost.rogue_steps = state.ghost.rogue_steps.saturating_add(1);
        }
        Some(())
    }
}
