//! The custodian model's properties, by name: safety properties (`always`) judged against the
//! provider's own state (the ground truth) and what the store recorded, and `sometimes`
//! properties showing the outcomes a run must be able to reach, so that a run that checks
//! nothing cannot pass.

use opledger_domain::state::OperationState;
use stateright::Property;

use super::config::CustodianConfig;
use super::ghost::violation;
use super::ledger::{Escalation, Hold};
use super::model::CustodianModel;
use super::provider::{Candidate, Reference, Txn};
use super::state::State;

/// Every request the executor sends carries our one reference: it never invents another.
pub const ONE_REFERENCE: &str = "every request of the operation carries our one reference";
/// The provider never holds two transactions for one operation (a stored transaction may be
/// executed at any time).
pub const ONE_TRANSACTION: &str = "the provider never holds two transactions for one operation";
/// While the hold is released, every transaction the provider holds for the operation ended
/// without ever being broadcast (rejected, cancelled, failed without a hash), and no create is
/// still in the network that could be stored: nothing is or may be broadcast. Without lookup, the
/// transaction bound to it (whoever's it is) ended so too.
pub const NEVER_RELEASED_WHILE_BROADCAST: &str =
    "the hold is never released while the provider's transaction is or may be broadcast";
/// A release happens only when a proposed record, terminal without a hash, is attested by the
/// witness with the record's status (judged over the rows, not through the release rule).
pub const RELEASED_ON_ATTESTED_RECORD: &str =
    "a release happens only after a terminal record without a hash attested by the witness";
/// A withdrawal the provider executed (completed, or failed with its transaction mined) is never
/// left released. Its payment is its own request's transaction; without lookup, also the
/// transaction bound to it: no other withdrawal can account for that one (one withdrawal per
/// provider transaction), so a paid withdrawal of ours is never released while a payment it
/// answers for is not accounted for.
pub const EXECUTED_NEVER_RELEASED: &str = "a withdrawal the provider executed is never released";
/// FAILED_TERMINAL (the first request refused) keeps the hold.
pub const REFUSED_KEEPS_HOLD: &str = "a refused first request leaves the hold held";
/// The executor concludes "refused before anything was stored" only when the provider holds no
/// transaction of the operation.
pub const REFUSAL_ONLY_WHEN_NOTHING_STORED: &str =
    "a refusal is concluded only when the provider holds nothing of the operation";
/// While the operation is FAILED_TERMINAL on a refusal ("refused before anything was stored",
/// what the operator is told), the provider holds nothing of it and no create of it is in the
/// network: the harm of a refusal concluded wrongly, judged in every state.
pub const REFUSED_NOTHING_AT_PROVIDER: &str =
    "a withdrawal failed on a refusal has nothing at the provider";
/// A hold is settled only when the provider executed the withdrawal: the transaction the
/// settlement rests on is paid (its request's; without lookup, the one it follows, which may be
/// the foreign one when bound to it).
pub const SETTLED_ONLY_WHEN_EXECUTED: &str =
    "a hold is settled only when the provider executed the withdrawal";
/// One payment never settles two withdrawals: a settlement that rests on the foreign
/// transaction's payment only while that transaction is not bound to the other withdrawal
/// (which settles on it). Held against a compromised executor login too.
pub const ONE_PAYMENT_ONE_SETTLEMENT: &str = "one payment never settles two withdrawals";
/// The hold is released exactly when VERIFIED_NOT_SENT, settled exactly when CONFIRMED, and no
/// hold effect applied to a hold in the wrong state.
pub const HOLD_MATCHES_STATE: &str = "the hold matches the operation's state";
/// Every move asked is in the transition table for its actor.
pub const STEPS_ARE_LEGAL: &str = "every move asked is in the transition table";

/// The withdrawal is settled from the chain (or the COMPLETED record of an unwatched network).
pub const REACH_SETTLED: &str = "sometimes: settled, CONFIRMED";
/// The witness refused a proposal for good (the compromised login's).
pub const REACH_WITNESS_REFUSED: &str = "sometimes: the witness refused a proposal for good";
/// A normal run reaches BROADCAST.
pub const REACH_BROADCAST: &str = "sometimes: accepted and BROADCAST";
/// The provider executed the withdrawal, the hold held for the chain.
pub const REACH_PAID_HELD: &str = "sometimes: executed by the provider, the hold held";
/// A rejected withdrawal reaches VERIFIED_NOT_SENT once attested.
pub const REACH_RELEASED_NOT_SENT: &str = "sometimes: rejected, attested and released";
/// An UNKNOWN withdrawal is found at the provider and moved to BROADCAST.
pub const REACH_UNKNOWN_RESOLVED: &str = "sometimes: UNKNOWN found by lookup and BROADCAST";
/// A resend after the window reaches the provider while it holds the first: deduplicated.
pub const REACH_RESEND_DEDUPLICATED: &str = "sometimes: a resend deduplicated by the provider";
/// A proposal waits for the witness, the hold held.
pub const REACH_AWAITING_WITNESS: &str = "sometimes: a release proposal awaits the witness";
/// The first request refused: FAILED_TERMINAL, the hold held.
pub const REACH_REFUSED: &str = "sometimes: refused, FAILED_TERMINAL with the hold held";
/// A provider without lookup answered: the transaction its answer named is followed, without an
/// operator, and settled.
pub const REACH_ANSWERED_SETTLED: &str =
    "sometimes: without lookup, followed from the answer and settled";
/// A provider without lookup answered, and the transaction its answer named ended without a
/// hash: released once attested, without an operator.
pub const REACH_ANSWERED_RELEASED: &str =
    "sometimes: without lookup, followed from the answer, attested and released";
/// A provider without lookup: after an operator's binding, the provider's payment settles.
pub const REACH_BOUND_SETTLED: &str = "sometimes: without lookup, bound by an operator and settled";
/// A provider without lookup: after an operator's binding, a rejection is attested and released.
pub const REACH_BOUND_RELEASED: &str =
    "sometimes: without lookup, bound by an operator, attested and released";
/// A provider without lookup: bound by a careless operator to the other withdrawal's
/// transaction, settled on its payment (neutral: the other withdrawal answers for ours).
pub const REACH_FOREIGN_BOUND_SETTLED: &str =
    "sometimes: without lookup, bound to another withdrawal's transaction and settled on it";
/// A provider without lookup: bound to the other withdrawal's transaction, both ended unsent,
/// attested and released.
pub const REACH_FOREIGN_BOUND_RELEASED: &str =
    "sometimes: without lookup, bound to another withdrawal's transaction and released";
/// A provider without lookup: the bound transaction ended without a hash, and the release waits
/// on another listed candidate.
pub const REACH_BOUND_RELEASE_WAITS: &str =
    "sometimes: without lookup, a bound release waits on another listed candidate";
/// A provider without lookup: the ambiguous withdrawal is left to an operator.
pub const REACH_LEFT_TO_OPERATOR: &str = "sometimes: ambiguous without lookup, left to an operator";

fn no(state: &State, bits: u8) -> bool {
    state.ghost.violations & bits == 0
}

fn released(state: &State) -> bool {
    state.ledger.hold == Hold::Released
}

fn ended_unsent(txn: Txn) -> bool {
    txn.phase.ended_unsent()
}

/// The transaction the operation follows (`no_lookup`: bound, else the one the provider's answer
/// named), when it is stored.
fn bound_txn(state: &State) -> Option<Txn> {
    let candidate = state.ledger.followed()?;
    state.provider.candidate(state.ledger.reference, candidate)
}

/// Nothing of the operation is or may be broadcast: every stored transaction ended unsent, and
/// no create in the network can still be stored.
pub fn nothing_may_be_broadcast(state: &State) -> bool {
    let provider = &state.provider;
    provider.stored().all(ended_unsent)
        && provider.delayed.is_none_or(|r| provider.txn(r).is_some())
}

/// A payment the operation answers for: its request's transaction, or the one bound to it.
fn answers_for_payment(state: &State) -> bool {
    state.provider.stored().any(|t| t.phase.paid())
        || bound_txn(state).is_some_and(|t| t.phase.paid())
}

/// The transaction a settlement rests on is paid: its request's, or the one it follows (bound,
/// which may be the foreign one, else named by the answer). A settlement decided on the answered
/// transaction may be applied after a binding past the API changed what is followed: it still
/// rests on a payment of this withdrawal's request.
fn settled_on_payment(state: &State) -> bool {
    answers_for_payment(state)
}

/// The properties of a run of `config`.
pub fn for_config(config: &CustodianConfig) -> Vec<Property<CustodianModel>> {
    let mut properties = safety();
    properties.push(Property::sometimes(REACH_BROADCAST, |_, s: &State| {
        s.ledger.state == OperationState::Broadcast && s.provider.stored().next().is_some()
    }));
    properties.push(Property::sometimes(REACH_PAID_HELD, |_, s: &State| {
        s.ledger.hold == Hold::Held && s.provider.stored().any(|t| t.phase.paid())
    }));
    properties.push(Property::sometimes(REACH_REFUSED, |_, s: &State| {
        s.ledger.state == OperationState::FailedTerminal
            && s.ledger.escalation == Some(Escalation::Refused)
            && s.ledger.hold == Hold::Held
    }));
    if config.profile.has_lookup() {
        push_lookup_examples(&mut properties);
        if config.compromised_executor {
            properties.push(Property::sometimes(
                REACH_WITNESS_REFUSED,
                |_, s: &State| s.ledger.refused != 0,
            ));
        }
    } else {
        properties.push(Property::sometimes(
            REACH_LEFT_TO_OPERATOR,
            |_, s: &State| {
                s.ledger.state == OperationState::Unknown
                    && s.ledger.escalation == Some(Escalation::NoLookup)
            },
        ));
        properties.push(Property::sometimes(
            REACH_ANSWERED_SETTLED,
            |_, s: &State| {
                s.ledger.bound.is_none()
                    && s.ledger.answered == Some(Candidate::Own)
                    && s.ledger.hold == Hold::Settled
            },
        ));
        properties.push(Property::sometimes(
            REACH_ANSWERED_RELEASED,
            |_, s: &State| {
                s.ledger.bound.is_none() && s.ledger.answered == Some(Candidate::Own) && released(s)
            },
        ));
        properties.push(Property::sometimes(REACH_BOUND_SETTLED, |_, s: &State| {
            s.ledger.bound == Some(Candidate::Own) && s.ledger.hold == Hold::Settled
        }));
        properties.push(Property::sometimes(REACH_BOUND_RELEASED, |_, s: &State| {
            s.ledger.bound == Some(Candidate::Own) && released(s)
        }));
        if config.lists_foreign() {
            push_foreign_examples(&mut properties);
        }
    }
    properties
}

fn safety() -> Vec<Property<CustodianModel>> {
    vec![
        Property::always(ONE_REFERENCE, |_, s: &State| {
            s.ghost.references.count_ones() <= 1
        }),
        Property::always(ONE_TRANSACTION, |_, s: &State| {
            s.provider.stored().count() <= 1
        }),
        Property::always(NEVER_RELEASED_WHILE_BROADCAST, |_, s: &State| {
            !released(s) || (nothing_may_be_broadcast(s) && bound_txn(s).is_none_or(ended_unsent))
        }),
        Property::always(RELEASED_ON_ATTESTED_RECORD, |_, s: &State| {
            no(s, violation::RELEASED_WITHOUT_ATTESTED_RECORD)
                && (!released(s) || s.ledger.attested_unsent_record())
        }),
        Property::always(EXECUTED_NEVER_RELEASED, |_, s: &State| {
            !released(s) || !answers_for_payment(s)
        }),
        Property::always(REFUSED_KEEPS_HOLD, |_, s: &State| {
            let refused = s.ledger.escalation == Some(Escalation::Refused);
            (s.ledger.state != OperationState::FailedTerminal || s.ledger.hold == Hold::Held)
                && (!refused || s.ledger.state == OperationState::FailedTerminal)
        }),
        Property::always(REFUSAL_ONLY_WHEN_NOTHING_STORED, |_, s: &State| {
            no(s, violation::REFUSAL_WHILE_STORED)
        }),
        Property::always(REFUSED_NOTHING_AT_PROVIDER, |_, s: &State| {
            s.ledger.escalation != Some(Escalation::Refused)
                || (s.provider.stored().next().is_none() && s.provider.delayed.is_none())
        }),
        Property::always(SETTLED_ONLY_WHEN_EXECUTED, |_, s: &State| {
            s.ledger.hold != Hold::Settled || settled_on_payment(s)
        }),
        Property::always(ONE_PAYMENT_ONE_SETTLEMENT, |_, s: &State| {
            s.ledger.hold != Hold::Settled
                || !(s.ledger.followed() == Some(Candidate::Foreign)
                    && s.ledger.foreign_bound_elsewhere)
        }),
        Property::always(HOLD_MATCHES_STATE, |_, s: &State| {
            no(s, violation::HOLD_EFFECT_ON_WRONG_HOLD)
                && released(s) == (s.ledger.state == OperationState::VerifiedNotSent)
                && (s.ledger.hold == Hold::Settled) == (s.ledger.state == OperationState::Confirmed)
        }),
        Property::always(STEPS_ARE_LEGAL, |_, s: &State| {
            no(s, violation::ILLEGAL_MOVE)
        }),
    ]
}

fn push_foreign_examples(properties: &mut Vec<Property<CustodianModel>>) {
    properties.push(Property::sometimes(
        REACH_FOREIGN_BOUND_SETTLED,
        |_, s: &State| {
            s.ledger.bound == Some(Candidate::Foreign)
                && s.ledger.hold == Hold::Settled
                && bound_txn(s).is_some_and(|t| t.phase.paid())
        },
    ));
    properties.push(Property::sometimes(
        REACH_FOREIGN_BOUND_RELEASED,
        |_, s: &State| s.ledger.bound == Some(Candidate::Foreign) && released(s),
    ));
    properties.push(Property::sometimes(
        REACH_BOUND_RELEASE_WAITS,
        |_, s: &State| s.ghost.bound_release_waited,
    ));
}

fn push_lookup_examples(properties: &mut Vec<Property<CustodianModel>>) {
    properties.push(Property::sometimes(REACH_SETTLED, |_, s: &State| {
        s.ledger.state == OperationState::Confirmed && s.ledger.hold == Hold::Settled
    }));
    properties.push(Property::sometimes(
        REACH_RELEASED_NOT_SENT,
        |_, s: &State| {
            released(s)
                && s.ledger.state == OperationState::VerifiedNotSent
                && s.provider.txn(Reference::Ours).is_some_and(ended_unsent)
        },
    ));
    properties.push(Property::sometimes(
        REACH_UNKNOWN_RESOLVED,
        |_, s: &State| s.ghost.unknown_resolved,
    ));
    properties.push(Property::sometimes(
        REACH_RESEND_DEDUPLICATED,
        |_, s: &State| s.ghost.resend_deduplicated && s.provider.stored().count() == 1,
    ));
    properties.push(Property::sometimes(
        REACH_AWAITING_WITNESS,
        |_, s: &State| {
            s.ledger.state == OperationState::Unknown
                && s.ledger.hold == Hold::Held
                && s.ledger.proposed != 0
                && s.ledger.attested.is_empty()
        },
    ));
}
