//! The release rule of a bound `no_lookup` withdrawal, as the executor proposes and the witness
//! attests a release: the domain's function may not exist yet, so the rule is written here, once
//! ([`bound_release_allowed`]), and both principals take it through the run's
//! [`super::decisions::Decisions::bound_release`].
//!
//! An operator's binding says which listed transaction is ours; it is a claim, never evidence:
//! two withdrawals of ours to the same destination and amount are listed side by side, and the
//! list does not say whose is whose. The review's rule ([`the_rule_as_reviewed`]): a release of
//! a bound withdrawal is proposed and attested only when the bound transaction is terminal
//! without a hash AND every other listed candidate that is not bound to another withdrawal ended
//! without a hash too (not in flight, not completed, no hash). A candidate bound to another
//! withdrawal is accounted for by that withdrawal's own settlement (one provider transaction
//! binds one withdrawal, the database's `UNIQUE (tenant_id, provider_id)`); two withdrawals
//! crossing their bindings is neutral (one payment, one settlement, one release). Otherwise
//! nothing is concluded: the principal waits. (The executor also refuses to settle on a payment
//! that was on chain before the request, `PAYOUT_BEFORE_REQUEST`, which a crossed binding of the
//! later withdrawal is: not modelled here, as a refusal only removes settlements the model
//! allows; the crossed withdrawal then stays held, never paid twice.)
//!
//! That rule reads "every other candidate" off the list, so it holds only over a list that
//! shows every transaction our request may have created. The model finds it releasing a paid
//! withdrawal otherwise (mutant [`super::config::Mutant::BoundReleaseBeforeListingWindow`]): our
//! request stored but not listed yet (the provider's lag) or still in the network, the other
//! withdrawal's rejected transaction the only one listed, an operator binds it. The rule the
//! model checks therefore also asks for a listing read after the provider's consistency window
//! since our last send ([`Window::Passed`]), by which the provider lists every request of ours
//! it stored and stores none still in the network (an assumption on the provider: the
//! consistency window in [`super`]).

use opledger_domain::custodian::{Lookup, Next, Record, Window, after_record};

use super::provider::{Candidate, Provider, Reference};

/// A candidate as the provider's list shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Listed {
    /// Its status and newest hash.
    pub record: Record,
    /// Whether it names replaced hashes.
    pub replaced: bool,
}

impl Listed {
    /// Ended without ever being broadcast: terminal, no hash, no replaced hash.
    pub fn ended_without_hash(self) -> bool {
        !self.replaced && after_record(self.record) == Next::NotSent
    }
}

/// The RULE, with the listing window: a release of a bound withdrawal only on a listing read
/// after the provider's consistency window since our last send (`window`), when the bound
/// transaction and every other listed candidate not bound to another withdrawal (`others`) ended
/// without a hash.
pub fn bound_release_allowed(window: Window, bound: Listed, others: &[Listed]) -> bool {
    window == Window::Passed && the_rule_as_reviewed(bound, others)
}

/// The RULE as the review's fix states it: the bound transaction and every other listed
/// candidate not bound to another withdrawal ended without a hash, whenever the list is read.
/// Alone it trusts the list to be complete: a listing read before our own request's transaction
/// is listed (the provider's lag, or a create still in the network) shows only the other
/// withdrawal's, which an operator may bind.
pub fn the_rule_as_reviewed(bound: Listed, others: &[Listed]) -> bool {
    bound.ended_without_hash() && others.iter().all(|c| c.ended_without_hash())
}

/// `candidate` of the request under `reference` as the provider lists it now; `None` when it is
/// not listed.
pub fn listed(provider: &Provider, reference: Reference, candidate: Candidate) -> Option<Listed> {
    let Lookup::Found(record) = provider.listed(reference, candidate) else {
        return None;
    };
    let replaced = provider
        .candidate(reference, candidate)
        .is_some_and(|t| t.replaced);
    Some(Listed { record, replaced })
}

/// The other listed candidates of a withdrawal (its request under `reference`) bound to
/// `bound`, as the list shows them now: every listed one but the bound one and those bound to
/// another withdrawal (`bound_elsewhere`).
pub fn others(
    provider: &Provider,
    reference: Reference,
    bound: Candidate,
    bound_elsewhere: impl Fn(Candidate) -> bool,
) -> Vec<Listed> {
    Candidate::ALL
        .into_iter()
        .filter(|c| *c != bound && !bound_elsewhere(*c))
        .filter_map(|c| listed(provider, reference, c))
        .collect()
}
