//! The decisions the custodian model's principals take, as closures: the domain's own functions
//! (`opledger_domain::custodian::{after_submit, after_lookup, release_allowed}`), the release
//! rule of a bound `no_lookup` withdrawal ([`bound_release_allowed`], written in [`super::bound`]
//! until the domain has it), or a mutant ([`Mutant`]) written here, never in the domain.

use opledger_domain::custodian::{
    Lookup, Next, Profile, ProviderStatus, Round, StoredRecord, SubmitAnswer, Window, after_lookup,
    after_submit, release_allowed,
};

use super::bound::{Listed, bound_release_allowed, the_rule_as_reviewed};
use super::config::Mutant;
use super::provider::Reference;

/// The next step after a submission's answer.
pub type AfterSubmit = fn(Profile, Round, SubmitAnswer) -> Next;
/// The next step after a lookup.
pub type AfterLookup = fn(Profile, Lookup, Window) -> Next;
/// The ledger's release rule over the stored records, proposals and attestations.
pub type ReleaseRule = fn(&[StoredRecord], &[i64], &[(i64, ProviderStatus)]) -> bool;
/// The reference a resend carries, from the reference of the request.
pub type ResendReference = fn(Reference) -> Reference;
/// Whether a send happens and as which round: from the number the store gives it
/// (`begin_custodian_send`, `None` when it records none) and the round the pass meant.
pub type SendRule = fn(Option<u8>, Round) -> Option<Round>;
/// Whether a release of a bound `no_lookup` withdrawal may be proposed (the executor) or attested
/// (the witness), from whether the listing was read after the provider's consistency window since
/// our last send, the bound transaction as listed and the other listed candidates not bound to
/// another withdrawal.
pub type BoundRelease = fn(Window, Listed, &[Listed]) -> bool;

/// The closures one run decides with.
#[derive(Debug, Clone, Copy)]
pub struct Decisions {
    /// The executor's decision on a submission's answer.
    pub after_submit: AfterSubmit,
    /// The executor's decision on a lookup.
    pub after_lookup: AfterLookup,
    /// The database's rule for a release of the hold.
    pub release_rule: ReleaseRule,
    /// The reference the executor resends with.
    pub resend_reference: ResendReference,
    /// Whether and as which round the executor sends.
    pub send_rule: SendRule,
    /// The executor's and the witness's rule for a release of a bound `no_lookup` withdrawal.
    pub bound_release: BoundRelease,
}

impl Decisions {
    /// The domain's decisions, with the mutant's one replaced.
    pub fn of(mutant: Mutant) -> Decisions {
        let mut decisions = Decisions {
            after_submit,
            after_lookup,
            release_rule: release_allowed,
            resend_reference: same_reference,
            send_rule: numbered_send,
            bound_release: bound_release_allowed,
        };
        match mutant {
            Mutant::None => {}
            Mutant::NewReferenceOnResend => decisions.resend_reference = fresh_reference,
            Mutant::ReleaseOnProposal => decisions.release_rule = release_on_proposal,
            Mutant::ResendRefusalIsRefusal => decisions.after_submit = refusal_is_refusal,
            Mutant::SendOnStaleRead => decisions.send_rule = send_as_read,
            Mutant::ReleaseOnBoundRecordAlone => {
                decisions.bound_release = release_on_bound_record_alone;
            }
            Mutant::BoundReleaseBeforeListingWindow => {
                decisions.bound_release = release_before_listing_window;
            }
        }
        decisions
    }
}

/// The executor's resend (`Next::ResendSameReference`): the request as stored, its reference.
fn same_reference(reference: Reference) -> Reference {
    reference
}

/// The executor's `send`: only a send the store numbered happens, and it is the first exactly
/// when the store numbered it 1 (whatever the pass read).
fn numbered_send(number: Option<u8>, meant: Round) -> Option<Round> {
    // A send meant as the first happens only while none is recorded (the store numbers it 1).
    number
        .filter(|n| meant == Round::Resend || *n == 1)
        .map(|n| if n == 1 { Round::First } else { Round::Resend })
}

/// Mutant 4: the executor before the fix: every send happens (recorded whatever the lease and
/// state), as the round the pass meant from what it read.
fn send_as_read(_number: Option<u8>, meant: Round) -> Option<Round> {
    Some(meant)
}

/// Mutant 1: a resend under a reference never used before.
fn fresh_reference(reference: Reference) -> Reference {
    reference.fresh()
}

/// Mutant 2: `release_allowed` with every proposal counted as attested with its record's status.
fn release_on_proposal(
    records: &[StoredRecord],
    proposed: &[i64],
    _attested: &[(i64, ProviderStatus)],
) -> bool {
    let attested: Vec<(i64, ProviderStatus)> = records
        .iter()
        .filter(|r| proposed.contains(&r.record_id))
        .map(|r| (r.record_id, r.record.status))
        .collect();
    release_allowed(records, proposed, &attested)
}

/// Mutant 3: every refusal judged as the first request's.
fn refusal_is_refusal(profile: Profile, _round: Round, answer: SubmitAnswer) -> Next {
    after_submit(profile, Round::First, answer)
}

/// Mutant 5: the release of a bound withdrawal on the bound record alone (the rule before the
/// review), after the listing window: the other listed candidates are not read.
fn release_on_bound_record_alone(window: Window, bound: Listed, _others: &[Listed]) -> bool {
    window == Window::Passed && bound.ended_without_hash()
}

/// Mutant 6: the review's rule over whatever the list shows, without the listing window.
fn release_before_listing_window(_window: Window, bound: Listed, others: &[Listed]) -> bool {
    the_rule_as_reviewed(bound, others)
}
