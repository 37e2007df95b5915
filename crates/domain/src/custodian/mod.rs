//! Withdrawals a custodian executes: what its answers and records mean, and what to do next.
//!
//! A custodian (Fireblocks, BitGo, Coinbase Prime, ...) signs and broadcasts for us; we send it a
//! request keyed by our own reference (the operation id) and learn the outcome from its answers,
//! its records and the chain. The design article's rules for this hop:
//! - a timeout, a 5xx, a lost connection, a 429 or a "duplicate" answer after the request may
//!   have arrived is UNKNOWN: the funds stay held and the custodian's record keyed by our
//!   reference is looked up; a fresh reference is never used (it would be a second payout);
//! - a lookup that does not know the reference yet, inside the provider's consistency window, is
//!   no answer; after it, the same request is sent again with the same reference (the provider
//!   deduplicates it), and nothing is released;
//! - a terminal record with a transaction hash is confirmed from the chain where the network is
//!   watched; a terminal record without one (rejected, blocked, cancelled before broadcast) is the
//!   evidence that nothing was sent, and releases like every release, witnessed;
//! - a provider with no lookup by our reference (`no_lookup`) leaves an ambiguous request to an
//!   operator, who confirms one of the candidates its list endpoint shows; never a retry.
//!
//! Everything here is a pure function of what was observed: the services and the model checker
//! call the same [`after_submit`] and [`after_lookup`].

mod status;
#[cfg(test)]
mod tests;
pub mod token;
mod witness;

pub use status::{ProviderStatus, StatusClass, UnknownStatus};
pub use witness::{
    OwnLookup, ProposedRelease, WitnessRefusal, WitnessVerdict, WitnessWait, witness_release,
};

use crate::evidence::Hash32;

/// How a provider deduplicates requests and finds them again by our reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// A request carries our reference (Fireblocks' `externalTxId`); a second request with it is
    /// refused; its record is looked up by the reference.
    LookupByReference,
    /// Only one send per reference is ever executed (BitGo's `sequenceId`); later sends with it
    /// fail; its record is looked up by the reference.
    OneSendPerReference,
    /// The provider deduplicates by our key but offers no lookup by it (Coinbase Prime): an
    /// ambiguous request is resolved only by an operator from the provider's list.
    NoLookup,
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 3] = [
        Profile::LookupByReference,
        Profile::OneSendPerReference,
        Profile::NoLookup,
    ];

    /// The configuration name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::LookupByReference => "lookup_by_reference",
            Profile::OneSendPerReference => "one_send_per_reference",
            Profile::NoLookup => "no_lookup",
        }
    }

    /// Whether the provider finds a request by our reference.
    pub fn has_lookup(self) -> bool {
        match self {
            Profile::LookupByReference | Profile::OneSendPerReference => true,
            Profile::NoLookup => false,
        }
    }
}

/// Why a submission's outcome is unknown: the request may have arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ambiguity {
    /// No answer in time.
    Timeout,
    /// The connection failed or was cut after the request may have been sent.
    ConnectionLost,
    /// A 5xx: the provider may have accepted before it failed.
    ServerError,
    /// A 429: refused for now, but a request before it may have been accepted.
    RateLimited,
    /// The provider says our reference is already used: our own earlier request, whose answer we
    /// did not see.
    Duplicate,
    /// An answer we cannot read.
    Unreadable,
}

/// What one submission call returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubmitAnswer {
    /// The provider accepted the request under our reference.
    Accepted,
    /// The provider refused the request before accepting anything (a 4xx other than 429 that
    /// names the request as invalid: bad destination, unknown asset, not allowed by policy). It
    /// holds only when the provider documents that such a refusal stores nothing.
    Refused,
    /// The request may or may not have arrived.
    Ambiguous(Ambiguity),
}

impl SubmitAnswer {
    /// The answer class's stored name (`custodian_answers.answer`).
    pub fn as_str(self) -> &'static str {
        match self {
            SubmitAnswer::Accepted => "ACCEPTED",
            SubmitAnswer::Refused => "REFUSED",
            SubmitAnswer::Ambiguous(Ambiguity::Timeout) => "TIMEOUT",
            SubmitAnswer::Ambiguous(Ambiguity::ConnectionLost) => "CONNECTION_LOST",
            SubmitAnswer::Ambiguous(Ambiguity::ServerError) => "SERVER_ERROR",
            SubmitAnswer::Ambiguous(Ambiguity::RateLimited) => "RATE_LIMITED",
            SubmitAnswer::Ambiguous(Ambiguity::Duplicate) => "DUPLICATE",
            SubmitAnswer::Ambiguous(Ambiguity::Unreadable) => "UNREADABLE",
        }
    }
}

/// What one lookup by our reference returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// The provider's record of our reference.
    Found(Record),
    /// The provider answered that it has no record of our reference.
    NotFound,
    /// The lookup itself failed (timeout, 5xx, connection, unreadable answer): no information.
    Failed,
}

/// The fields of a provider's record that decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Record {
    /// Its status.
    pub status: ProviderStatus,
    /// The transaction hash the provider broadcast, if any (after a provider-side replacement,
    /// the newest one).
    pub tx_hash: Option<Hash32>,
}

/// What to do next with an operation the custodian executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Next {
    /// Accepted and still in flight: look the record up again later (or when a status webhook
    /// wakes the operation). The funds stay held.
    Follow,
    /// UNKNOWN: look the record up by our reference. The funds stay held; nothing is sent.
    LookUp,
    /// The provider has no record after its consistency window: send the same request again, with
    /// the same reference. Never a new reference, never a release.
    ResendSameReference,
    /// The provider broadcast this transaction: the chain decides, with the evidence rules.
    Chain(Hash32),
    /// The provider's terminal record says nothing was broadcast: the evidence for
    /// VERIFIED_NOT_SENT, which releases the hold only when witnessed.
    NotSent,
    /// The first request was refused before anything was stored: the operation fails for an
    /// operator to decide (a bad destination, an unknown asset, revoked credentials). The hold
    /// stays: a refusal is one answer, not witnessed evidence, and is never a release.
    Refused,
    /// No lookup exists: an operator must confirm one of the provider's listed candidates (or
    /// that none matches), with a reason. Never an automatic retry.
    Operator,
}

/// Which send of the request a submission was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Round {
    /// The first: nothing of ours can be at the provider yet.
    First,
    /// A resend of the same request after the consistency window: the first may have been
    /// stored, whatever this one is answered.
    Resend,
}

/// The next step after a submission (`send`) answered `answer`. A refusal of a resend says
/// nothing about the first request (a credential or clock fault, a refusal the first did not
/// get): it is as ambiguous as a timeout.
pub fn after_submit(profile: Profile, round: Round, answer: SubmitAnswer) -> Next {
    match answer {
        SubmitAnswer::Accepted => Next::Follow,
        SubmitAnswer::Refused if round == Round::First => Next::Refused,
        SubmitAnswer::Refused
        | SubmitAnswer::Ambiguous(
            Ambiguity::Timeout
            | Ambiguity::ConnectionLost
            | Ambiguity::ServerError
            | Ambiguity::RateLimited
            | Ambiguity::Duplicate
            | Ambiguity::Unreadable,
        ) => {
            if profile.has_lookup() {
                Next::LookUp
            } else {
                Next::Operator
            }
        }
    }
}

/// How long after our last request a "not found" still means "not indexed yet".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Window {
    /// The last request was sent less than the provider's consistency window ago.
    Inside,
    /// The window has passed since the last request.
    Passed,
}

/// The next step after a lookup by our reference returned `lookup`, `window` after our last
/// request. A `no_lookup` provider never gets here: its answer is [`Next::Operator`].
pub fn after_lookup(profile: Profile, lookup: Lookup, window: Window) -> Next {
    if !profile.has_lookup() {
        return Next::Operator;
    }
    match lookup {
        Lookup::Failed => Next::LookUp,
        Lookup::NotFound => match window {
            Window::Inside => Next::LookUp,
            Window::Passed => Next::ResendSameReference,
        },
        Lookup::Found(record) => after_record(record),
    }
}

/// The next step once the provider's record is known.
pub fn after_record(record: Record) -> Next {
    match (record.status.class(), record.tx_hash) {
        // Whatever the status says, a broadcast transaction is the chain's to decide: a
        // COMPLETED record is confirmed from the chain, a FAILED one with a hash may still have
        // been mined.
        (StatusClass::InFlight, Some(hash))
        | (StatusClass::Completed, Some(hash))
        | (StatusClass::Failed, Some(hash))
        | (StatusClass::NotSent, Some(hash)) => Next::Chain(hash),
        (StatusClass::InFlight, None) => Next::Follow,
        // Completed without a hash contradicts itself: keep following, never release.
        (StatusClass::Completed, None) => Next::Follow,
        (StatusClass::NotSent, None) | (StatusClass::Failed, None) => Next::NotSent,
    }
}

/// A provider's record of one custodian withdrawal as stored with its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredRecord {
    /// Its id among the withdrawal's records.
    pub record_id: i64,
    /// What it said.
    pub record: Record,
    /// Whether it named a replaced transaction hash (a broadcast happened, whatever it says now).
    pub replaced: bool,
}

/// Whether the hold of a custodian withdrawal whose request exists may be released: no record
/// of the provider ever named a transaction (a broadcast transaction is the chain's to decide),
/// and a record the executor proposed (`proposed`) is terminal without a hash and was attested
/// with the same status by the witness from its own lookup (`attested`). The database applies
/// the same rule (`opledger_release_witnessed`); tests/store compares the two.
pub fn release_allowed(
    records: &[StoredRecord],
    proposed: &[i64],
    attested: &[(i64, ProviderStatus)],
) -> bool {
    if records
        .iter()
        .any(|r| r.record.tx_hash.is_some() || r.replaced)
    {
        return false;
    }
    records.iter().any(|r| {
        after_record(r.record) == Next::NotSent
            && proposed.contains(&r.record_id)
            && attested.contains(&(r.record_id, r.record.status))
    })
}
