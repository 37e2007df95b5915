//! The witness, a second principal: it judges each proposal in its queue with the domain's
//! `witness_release`, from its own lookup of the request's reference at the provider (the
//! provider's current record; a lookup that lags or fails gives it nothing, and it looks again
//! later). It attests, refuses for good, or waits. A provider without lookup gives it nothing to
//! judge from until an operator binds the provider's listed transaction of the request to the
//! operation; the witness then reads that transaction from its own listing.
//!
//! The operator (`CustodianOperatorService`): binds, once, the transaction the provider lists for
//! the request (stored and listed), to an operation left to it (BROADCAST or UNKNOWN, escalated
//! without lookup).

use opledger_domain::custodian::{
    Lookup, OwnLookup, Profile, ProposedRelease, WitnessVerdict, witness_release,
};

use opledger_domain::state::OperationState;

use super::ledger::Ledger;
use super::provider::Provider;

/// The witness's verdict on the proposal of record `id` now, when it has one to judge.
pub fn verdict(
    profile: Profile,
    provider: &Provider,
    ledger: &Ledger,
    id: u8,
) -> Option<WitnessVerdict> {
    if !(profile.has_lookup() || ledger.bound)
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
    let lookup = provider.lookup(ledger.reference);
    let replaced = matches!(lookup, Lookup::Found(_))
        && provider.txn(ledger.reference).is_some_and(|t| t.replaced);
    let own = OwnLookup {
        lookup,
        replaced,
        differs: false,
    };
    Some(witness_release(proposed, own))
}

/// Whether an operator may bind the provider's transaction of the request now.
pub fn bindable(profile: Profile, provider: &Provider, ledger: &Ledger) -> bool {
    !profile.has_lookup()
        && !ledger.bound
        && ledger.escalation == Some(super::ledger::Escalation::NoLookup)
        && matches!(
            ledger.state,
            OperationState::Broadcast | OperationState::Unknown
        )
        && matches!(provider.lookup(ledger.reference), Lookup::Found(_))
}

/// The proposals whose judgment changes something now (an attestation or a refusal).
pub fn judgeable(profile: Profile, provider: &Provider, ledger: &Ledger) -> Vec<u8> {
    (1..=16u8)
        .filter(|id| {
            matches!(
                verdict(profile, provider, ledger, *id),
                Some(WitnessVerdict::Attest(_) | WitnessVerdict::Refuse(_))
            )
        })
        .collect()
}

/// Judges the proposal of record `id`; false when that changes nothing.
pub fn judge(profile: Profile, provider: &Provider, ledger: &mut Ledger, id: u8) -> bool {
    match verdict(profile, provider, ledger, id) {
        Some(WitnessVerdict::Attest(status)) => {
            ledger.attest(id, status);
            true
        }
        Some(WitnessVerdict::Refuse(_)) => {
            ledger.refuse(id);
            true
        }
        Some(WitnessVerdict::Wait(_)) | None => false,
    }
}
