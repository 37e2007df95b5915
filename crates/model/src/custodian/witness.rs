//! The witness, a second principal: it judges each proposal in its queue with the domain's
//! `witness_release`, from its own lookup of the request's reference at the provider (the
//! provider's current record; a lookup that lags or fails gives it nothing, and it looks again
//! later). It attests, refuses for good, or waits. A provider without lookup gives it nothing to
//! judge from until the operation is bound to a listed transaction; the witness then reads that
//! transaction from its own listing, and attests only what the run's bound-release rule
//! ([`super::bound`]) allows over its listing: otherwise it waits.
//!
//! The operator (`CustodianOperatorService`), careless: binds the operation, once, to either
//! transaction the provider lists with its destination and amount (our request's or another
//! withdrawal's), when it is left to it (BROADCAST or UNKNOWN, escalated without lookup, no
//! answer naming a transaction) and the database takes the binding; and may bind the other
//! withdrawal to the foreign transaction.

use opledger_domain::custodian::{
    Lookup, OwnLookup, Profile, ProposedRelease, WitnessVerdict, witness_release,
};

use super::bound::{self, Listed};
use super::decisions::BoundRelease;
use super::ledger::{Escalation, Ledger};
use super::provider::{Candidate, Provider};
use super::state::State;

/// The witness's verdict on the proposal of record `id` now, when it has one to judge (`None`
/// also when the bound-release rule waits: the listing window, or another listed candidate).
pub fn verdict(
    profile: Profile,
    rule: BoundRelease,
    state: &State,
    id: u8,
) -> Option<WitnessVerdict> {
    let (provider, ledger, window) = (&state.provider, &state.ledger, state.window());
    let bound = ledger.followed().filter(|_| !profile.has_lookup());
    if !(profile.has_lookup() || bound.is_some())
        || !ledger.is_proposed(id)
        || ledger.is_attested(id)
        || ledger.is_refused(id)
    {
        return None;
    }
    let proposed = ProposedRelease {
        record: ledger.rec(id)?.record(),
        ever_broadcast: ledger.ever_broadcast(),
    };
    let (lookup, txn) = match bound {
        Some(candidate) => (
            provider.listed(ledger.reference, candidate),
            provider.candidate(ledger.reference, candidate),
        ),
        None => (
            provider.lookup(ledger.reference),
            provider.txn(ledger.reference),
        ),
    };
    let replaced = matches!(lookup, Lookup::Found(_)) && txn.is_some_and(|t| t.replaced);
    let own = OwnLookup {
        lookup,
        replaced,
        differs: false,
    };
    let verdict = witness_release(proposed, own);
    if let (Some(candidate), Lookup::Found(record), WitnessVerdict::Attest(_)) =
        (bound, lookup, verdict)
    {
        let others = bound::others(provider, ledger.reference, candidate, |c| {
            ledger.bound_elsewhere(c)
        });
        if !rule(window, Listed { record, replaced }, &others) {
            return None;
        }
    }
    Some(verdict)
}

/// The transactions an operator may bind the operation to now: each listed one the database
/// takes, once the operation is left to it without lookup.
pub fn bindable(profile: Profile, provider: &Provider, ledger: &Ledger) -> Vec<Candidate> {
    // `BindCustodianCandidate` refuses another transaction while the one the answer named is
    // live (the model's provider never recreates one); the compromised login binds past it.
    if profile.has_lookup()
        || ledger.escalation != Some(Escalation::NoLookup)
        || ledger.answered.is_some()
    {
        return Vec::new();
    }
    Candidate::ALL
        .into_iter()
        .filter(|c| {
            ledger.may_bind(*c) && matches!(provider.listed(ledger.reference, *c), Lookup::Found(_))
        })
        .collect()
}

/// Whether an operator may bind the other withdrawal to the foreign transaction now.
pub fn bindable_elsewhere(provider: &Provider, ledger: &Ledger) -> bool {
    provider.foreign.is_some() && ledger.may_bind_elsewhere()
}

/// The proposals whose judgment changes something now (an attestation or a refusal).
pub fn judgeable(profile: Profile, rule: BoundRelease, state: &State) -> Vec<u8> {
    (1..=16u8)
        .filter(|id| {
            matches!(
                verdict(profile, rule, state, *id),
                Some(WitnessVerdict::Attest(_) | WitnessVerdict::Refuse(_))
            )
        })
        .collect()
}

/// Judges the proposal of record `id`; false when that changes nothing.
pub fn judge(profile: Profile, rule: BoundRelease, state: &mut State, id: u8) -> bool {
    match verdict(profile, rule, state, id) {
        Some(WitnessVerdict::Attest(status)) => {
            state.ledger.attest(id, status);
            true
        }
        Some(WitnessVerdict::Refuse(_)) => {
            state.ledger.refuse(id);
            true
        }
        Some(WitnessVerdict::Wait(_)) | None => false,
    }
}
