//! What one run of the custodian model explores: the provider's profile, how many executor
//! instances, how many sends of the request, whether the executor's database login is
//! compromised, and which decisions are taken (the domain's, or a mutant).

use opledger_domain::custodian::Profile;

/// A decision the model replaces to show that the checker finds what it gets wrong. Each is an
/// alternative closure in [`super::decisions::Decisions`]; the domain is never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// The domain's decisions, the executor's glue and the database's release rule.
    None,
    /// An executor that resends with a new reference when the provider does not find the first
    /// (a "retry" after a timeout): two transactions for one operation.
    NewReferenceOnResend,
    /// A ledger that releases on the executor's proposal alone, without the witness's
    /// attestation (`release_allowed` with every proposal counted as attested).
    ReleaseOnProposal,
    /// `after_submit` taking a resend's refusal for a refusal of the request (the rule before
    /// `after_submit` took the round): "refused before anything was stored" while the first
    /// request is stored at the provider.
    ResendRefusalIsRefusal,
    /// The executor before the send was numbered by the store: a pass that read SIGNED without
    /// a send sends a "first" request whatever was sent since (the round from a stale read), and
    /// a send is recorded and made without a live lease of its own.
    SendOnStaleRead,
    /// Without lookup, the executor and the witness judge a release of a bound withdrawal on the
    /// bound transaction alone (the rule before the review's F1), not on the other listed
    /// candidates: bound to another withdrawal's rejected transaction, a paid one is released.
    ReleaseOnBoundRecordAlone,
    /// Without lookup, the review's rule (the bound transaction and every other listed candidate
    /// not bound to another withdrawal ended without a hash) over a listing read before the
    /// provider's consistency window since our send passed: our own request's transaction may not
    /// be listed yet, and the other withdrawal's rejected one is all the list shows.
    BoundReleaseBeforeListingWindow,
}

/// One run of the custodian model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustodianConfig {
    /// How the provider deduplicates and finds a request by our reference.
    pub profile: Profile,
    /// Executor instances: 1 (crash-restartable at every step boundary), or 2 running at once
    /// whose leases may lapse (a stalled instance carries on with what it read; the store's
    /// compare-and-set on the state and its leases are the guards).
    pub executors: u8,
    /// Sends of the request, the first included: the model stops resending beyond.
    pub max_sends: u8,
    /// Whether the executor's database login is compromised: it may insert a record of its own
    /// (terminal without a hash) with a proposal of it, and ask for any move of the custodian
    /// actor at any moment. It cannot attest (the witness's table is not its own).
    pub compromised_executor: bool,
    /// Whether the executor watches the network (its evidence endpoints settle a transaction the
    /// provider's record names); on a network it does not watch, only a COMPLETED record settles.
    pub watched_network: bool,
    /// Without lookup, whether the provider lists a foreign transaction beside ours: another
    /// withdrawal of ours to the same destination and amount, which an operator may bind to ours
    /// (and to the other withdrawal). On by default for `no_lookup`; never with lookup.
    pub foreign_candidate: bool,
    /// The decisions taken.
    pub mutant: Mutant,
    /// Checker threads.
    pub threads: usize,
}

impl CustodianConfig {
    /// The default run for `profile`: one executor, two sends (the first and one resend), honest
    /// logins, a watched network, without lookup a foreign candidate, the domain's decisions, two
    /// checker threads.
    pub fn new(profile: Profile) -> CustodianConfig {
        CustodianConfig {
            profile,
            executors: 1,
            max_sends: 2,
            compromised_executor: false,
            watched_network: true,
            foreign_candidate: !profile.has_lookup(),
            mutant: Mutant::None,
            threads: 2,
        }
    }

    /// Whether the provider lists the foreign transaction (only without lookup).
    pub fn lists_foreign(&self) -> bool {
        self.foreign_candidate && !self.profile.has_lookup()
    }

    /// The instances' indexes.
    pub fn instances(&self) -> impl Iterator<Item = u8> + use<> {
        0..self.executors.clamp(1, 2)
    }
}
