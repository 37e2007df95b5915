//! The executor's database login, compromised: once the request is persisted, it may insert one
//! record of its own (REJECTED, no hash) with a proposal of it, ask for any move the transition
//! table allows the custodian actor, at any moment, and, without lookup, insert a binding of the
//! operation to either provider transaction (ours or the foreign one, listed or not), which the
//! database takes as an operator's (migration 37: BROADCAST or UNKNOWN, once, one withdrawal per
//! transaction). The store checks its moves as the executor's (the compare-and-set,
//! `check_transition`, the release rule). It cannot attest: the witness's table is not its own.
//! (Before the request is persisted there is nothing at the provider, and an operation without a
//! request is outside the custodian release rule.)

use opledger_domain::custodian::{Profile, ProviderStatus};
use opledger_domain::state::{Actor, OperationState, TRANSITIONS};

use super::decisions::ReleaseRule;
use super::ghost::Ghost;
use super::ledger::{Ledger, Moved, Rec};
use super::provider::Candidate;
use super::state::{RogueStep, State};

/// The steps it may take now.
pub fn steps(profile: Profile, state: &State, steps: &mut Vec<RogueStep>) {
    let (ledger, ghost) = (&state.ledger, &state.ghost);
    if matches!(
        ledger.state,
        OperationState::Approved | OperationState::Signing
    ) {
        return;
    }
    if !ghost.fabricated {
        steps.push(RogueStep::Fabricate);
    }
    for row in TRANSITIONS {
        if row.from == ledger.state && row.actors.contains(&Actor::Custodian) {
            steps.push(RogueStep::Move(row.to));
        }
    }
    if !profile.has_lookup() {
        for candidate in Candidate::ALL {
            let stored = state
                .provider
                .candidate(ledger.reference, candidate)
                .is_some();
            if stored && ledger.may_bind(candidate) {
                steps.push(RogueStep::Bind(candidate));
            }
        }
    }
}

/// Takes `step`; false when the store refuses it (nothing changes).
pub fn take(ledger: &mut Ledger, ghost: &mut Ghost, rule: ReleaseRule, step: RogueStep) -> bool {
    match step {
        RogueStep::Fabricate => {
            let id = ledger.record(Rec {
                status: ProviderStatus::Rejected,
                hash: None,
                replaced: false,
                forged: true,
            });
            ledger.propose(id);
            ghost.fabricated = true;
            true
        }
        RogueStep::Move(to) => {
            let from = ledger.state;
            ledger.transition(from, to, Actor::Custodian, rule, ghost) == Moved::Done
        }
        RogueStep::Bind(candidate) => {
            let taken = ledger.may_bind(candidate);
            if taken {
                ledger.bound = Some(candidate);
            }
            taken
        }
    }
}
