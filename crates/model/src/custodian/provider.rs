//! The custodian (the provider), with its documented semantics (docs/custodian-wire.md): it
//! stores at most one transaction per reference; a create may be stored and its answer lost,
//! delayed in the network, a 5xx, a 429 (which stores nothing), refused (which stores nothing),
//! a duplicate (1438, 409, `DuplicateSequenceIdError`) or the first answer replayed; a lookup by
//! the reference lags behind the store until the provider has indexed it; a transaction's
//! record evolves on its own, in flight, broadcast (a hash), completed, or rejected, cancelled or
//! failed without a hash, or failed with a hash (mined or not), or replaced by a new hash.
//!
//! Without a lookup (`no_lookup`), the provider also lists a foreign transaction: another
//! withdrawal of ours to the same destination and amount, stored and listed from the start, whose
//! phase evolves on its own. Listed beside our request's, an operator may take either for ours.

use opledger_domain::custodian::{
    Ambiguity, Lookup, Profile, ProviderStatus, Record, Round, SubmitAnswer,
};

/// A reference a request carries. The executor has one, ours (the operation id); a second
/// exists only for the mutant that invents one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reference {
    /// The operation id.
    Ours,
    /// A reference never used before.
    Fresh,
}

impl Reference {
    /// Both references.
    pub const ALL: [Reference; 2] = [Reference::Ours, Reference::Fresh];

    /// A reference never used before this one.
    pub fn fresh(self) -> Reference {
        Reference::Fresh
    }

    /// Its bit in a set of references.
    pub fn bit(self) -> u8 {
        match self {
            Reference::Ours => 1,
            Reference::Fresh => 2,
        }
    }

    fn index(self) -> usize {
        match self {
            Reference::Ours => 0,
            Reference::Fresh => 1,
        }
    }
}

/// Where a provider transaction is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Received, not signed (SUBMITTED).
    Submitted,
    /// A cancellation in progress (CANCELLING): it may still be broadcast.
    Cancelling,
    /// Signed and broadcast, a hash known (BROADCASTING).
    Broadcasting,
    /// Mined and confirmed (COMPLETED): paid.
    Completed,
    /// Rejected before signing (REJECTED).
    Rejected,
    /// Cancelled before broadcast (CANCELLED).
    Cancelled,
    /// Failed before broadcast (FAILED, no hash).
    FailedUnsent,
    /// Failed after broadcast, the transaction mined all the same (FAILED with a hash): paid.
    FailedMined,
    /// Failed after broadcast, never mined (FAILED with a hash).
    FailedUnmined,
}

impl Phase {
    /// The status the provider reports.
    pub fn status(self) -> ProviderStatus {
        match self {
            Phase::Submitted => ProviderStatus::Submitted,
            Phase::Cancelling => ProviderStatus::Cancelling,
            Phase::Broadcasting => ProviderStatus::Broadcasting,
            Phase::Completed => ProviderStatus::Completed,
            Phase::Rejected => ProviderStatus::Rejected,
            Phase::Cancelled => ProviderStatus::Cancelled,
            Phase::FailedUnsent | Phase::FailedMined | Phase::FailedUnmined => {
                ProviderStatus::Failed
            }
        }
    }

    /// Whether a transaction was broadcast: it has a hash (once it has one, it always has).
    pub fn hashed(self) -> bool {
        matches!(
            self,
            Phase::Broadcasting | Phase::Completed | Phase::FailedMined | Phase::FailedUnmined
        )
    }

    /// Whether the transfer was executed on chain: the withdrawal is paid.
    pub fn paid(self) -> bool {
        matches!(self, Phase::Completed | Phase::FailedMined)
    }

    /// Whether it ended without ever being broadcast: nothing was or will be sent.
    pub fn ended_unsent(self) -> bool {
        matches!(
            self,
            Phase::Rejected | Phase::Cancelled | Phase::FailedUnsent
        )
    }

    /// The phases a foreign transaction moves through: in flight, paid, or ended unsent (what
    /// the release rule and the settlement tell apart; a broadcast one not yet paid is in flight
    /// to the rule, and nothing to the settlement yet).
    fn foreign_successors(self) -> &'static [Phase] {
        match self {
            Phase::Submitted => &[Phase::Completed, Phase::Rejected],
            _ => &[],
        }
    }

    fn successors(self) -> &'static [Phase] {
        match self {
            Phase::Submitted => &[
                Phase::Broadcasting,
                Phase::Cancelling,
                Phase::Rejected,
                Phase::FailedUnsent,
            ],
            Phase::Cancelling => &[Phase::Cancelled, Phase::Broadcasting],
            Phase::Broadcasting => &[Phase::Completed, Phase::FailedMined, Phase::FailedUnmined],
            Phase::Completed
            | Phase::Rejected
            | Phase::Cancelled
            | Phase::FailedUnsent
            | Phase::FailedMined
            | Phase::FailedUnmined => &[],
        }
    }
}

/// The provider's transaction for one reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Txn {
    /// Where it is.
    pub phase: Phase,
    /// Whether the provider replaced its broadcast transaction by another (a new hash).
    pub replaced: bool,
    /// Whether a lookup by the reference finds it yet (without lookup: whether the provider
    /// lists it yet).
    pub indexed: bool,
    /// Another withdrawal's (the foreign transaction): its hashes are its own.
    pub foreign: bool,
}

impl Txn {
    /// A request just stored under one of our references: submitted, not indexed yet.
    fn submitted() -> Txn {
        Txn {
            phase: Phase::Submitted,
            replaced: false,
            indexed: false,
            foreign: false,
        }
    }

    /// Another withdrawal's transaction to the same destination and amount, submitted and
    /// listed.
    pub fn foreign() -> Txn {
        Txn {
            phase: Phase::Submitted,
            replaced: false,
            indexed: true,
            foreign: true,
        }
    }

    /// Its record as a lookup returns it: the status, and the newest hash once broadcast.
    pub fn record(&self) -> Record {
        let first = if self.foreign { 3 } else { 1 };
        Record {
            status: self.phase.status(),
            tx_hash: self
                .phase
                .hashed()
                .then_some([first + u8::from(self.replaced); 32]),
        }
    }
}

/// A transaction the provider lists among a `no_lookup` withdrawal's candidates (same
/// destination and amount), as an operator binds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Candidate {
    /// The transaction our request created (under our reference, which the list does not show).
    Own,
    /// The foreign transaction: another withdrawal's.
    Foreign,
}

impl Candidate {
    /// Both candidates.
    pub const ALL: [Candidate; 2] = [Candidate::Own, Candidate::Foreign];
}

/// What a create does at the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effect {
    /// The transaction is stored under the reference.
    Store,
    /// Nothing is stored (refused, rate limited, lost on the way, or the reference is taken).
    Nothing,
    /// The request is still in the network: it arrives later, or never.
    Delay,
}

/// One way a create can go: its effect and the answer the executor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Outcome {
    /// What happened at the provider.
    pub effect: Effect,
    /// What the executor's adapter read (`opledger_custodian`'s classification).
    pub answer: SubmitAnswer,
}

const fn outcome(effect: Effect, answer: SubmitAnswer) -> Outcome {
    Outcome { effect, answer }
}

const fn ambiguous(effect: Effect, why: Ambiguity) -> Outcome {
    outcome(effect, SubmitAnswer::Ambiguous(why))
}

/// A create of a reference the provider does not hold.
const FREE: [Outcome; 7] = [
    outcome(Effect::Store, SubmitAnswer::Accepted),
    ambiguous(Effect::Store, Ambiguity::Timeout),
    ambiguous(Effect::Store, Ambiguity::ServerError),
    ambiguous(Effect::Nothing, Ambiguity::RateLimited),
    ambiguous(Effect::Nothing, Ambiguity::ConnectionLost),
    ambiguous(Effect::Delay, Ambiguity::Timeout),
    // A refusal before storing (a 4xx naming the request, 401, 403).
    outcome(Effect::Nothing, SubmitAnswer::Refused),
];

/// Fireblocks v1 again for a reference it holds (or, for a resend, after a first 5xx: 1439):
/// 1438 or 1439, or the first answer replayed under the same Idempotency-Key, or a fault.
const TAKEN_LOOKUP_BY_REFERENCE: [Outcome; 6] = [
    ambiguous(Effect::Nothing, Ambiguity::Duplicate),
    outcome(Effect::Nothing, SubmitAnswer::Accepted),
    ambiguous(Effect::Nothing, Ambiguity::RateLimited),
    ambiguous(Effect::Nothing, Ambiguity::ServerError),
    ambiguous(Effect::Nothing, Ambiguity::Timeout),
    outcome(Effect::Nothing, SubmitAnswer::Refused),
];

/// BitGo again for a `sequenceId` it holds: `DuplicateSequenceIdError` (only the first send is
/// ever executed), or a fault, or a refusal of its own (401, an insufficient balance).
const TAKEN_ONE_SEND: [Outcome; 5] = [
    ambiguous(Effect::Nothing, Ambiguity::Duplicate),
    ambiguous(Effect::Nothing, Ambiguity::RateLimited),
    ambiguous(Effect::Nothing, Ambiguity::ServerError),
    ambiguous(Effect::Nothing, Ambiguity::Timeout),
    outcome(Effect::Nothing, SubmitAnswer::Refused),
];

/// Coinbase Prime again for an `idempotency_key` it holds: the first answer replayed, or a fault.
const TAKEN_NO_LOOKUP: [Outcome; 5] = [
    outcome(Effect::Nothing, SubmitAnswer::Accepted),
    ambiguous(Effect::Nothing, Ambiguity::RateLimited),
    ambiguous(Effect::Nothing, Ambiguity::ServerError),
    ambiguous(Effect::Nothing, Ambiguity::Timeout),
    outcome(Effect::Nothing, SubmitAnswer::Refused),
];

/// Fireblocks' 1439 on a resend under an Idempotency-Key whose first answer was a 5xx, nothing
/// stored.
const FREE_AFTER_5XX: Outcome = ambiguous(Effect::Nothing, Ambiguity::Duplicate);

/// Every way a create under a reference can go at a provider of `profile`, `taken` when it
/// already holds a transaction under it.
pub fn outcomes(profile: Profile, round: Round, taken: bool) -> Vec<Outcome> {
    if !taken {
        let mut all = FREE.to_vec();
        if profile == Profile::LookupByReference && round == Round::Resend {
            all.push(FREE_AFTER_5XX);
        }
        return all;
    }
    match profile {
        Profile::LookupByReference => TAKEN_LOOKUP_BY_REFERENCE.to_vec(),
        Profile::OneSendPerReference => TAKEN_ONE_SEND.to_vec(),
        Profile::NoLookup => TAKEN_NO_LOOKUP.to_vec(),
    }
}

/// A step the provider takes on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderStep {
    /// A lookup by the reference finds its transaction from now on.
    Index(Reference),
    /// The transaction moves on.
    Evolve(Reference, Phase),
    /// The broadcast transaction is replaced by another (a new hash), once.
    Replace(Reference),
    /// The foreign transaction moves on.
    Foreign(Phase),
    /// The delayed create arrives: stored when the reference is free.
    Deliver,
}

/// The provider's state for the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Provider {
    /// The transaction under each reference.
    pub txns: [Option<Txn>; 2],
    /// A create still in the network, under this reference.
    pub delayed: Option<Reference>,
    /// The foreign transaction (`no_lookup` runs only): another withdrawal's, listed among our
    /// candidates. Never replaced.
    pub foreign: Option<Txn>,
}

impl Provider {
    /// The transaction under `reference`.
    pub fn txn(&self, reference: Reference) -> Option<Txn> {
        self.txns[reference.index()]
    }

    /// The transactions it holds for the operation (under our references; the foreign one apart).
    pub fn stored(&self) -> impl Iterator<Item = Txn> + '_ {
        self.txns.iter().flatten().copied()
    }

    /// What a create under `reference` does, when `outcome` is possible there; false otherwise.
    pub fn submit(&mut self, reference: Reference, outcome: Outcome) -> bool {
        match outcome.effect {
            Effect::Store => self.store(reference),
            Effect::Nothing => true,
            Effect::Delay => {
                if self.delayed.is_some() {
                    return false;
                }
                self.delayed = Some(reference);
                true
            }
        }
    }

    fn store(&mut self, reference: Reference) -> bool {
        let slot = &mut self.txns[reference.index()];
        if slot.is_some() {
            return false;
        }
        *slot = Some(Txn::submitted());
        true
    }

    /// The transaction `candidate` names, stored or not listed yet (our request's is the one
    /// under `reference`).
    pub fn candidate(&self, reference: Reference, candidate: Candidate) -> Option<Txn> {
        match candidate {
            Candidate::Own => self.txn(reference),
            Candidate::Foreign => self.foreign,
        }
    }

    /// `candidate` as the provider's list shows it now: `Found` once listed, `NotFound` before.
    pub fn listed(&self, reference: Reference, candidate: Candidate) -> Lookup {
        match self.candidate(reference, candidate) {
            Some(txn) if txn.indexed => Lookup::Found(txn.record()),
            _ => Lookup::NotFound,
        }
    }

    /// What a lookup by `reference` returns when it does not fail: the record once indexed.
    pub fn lookup(&self, reference: Reference) -> Lookup {
        match self.txn(reference) {
            Some(txn) if txn.indexed => Lookup::Found(txn.record()),
            _ => Lookup::NotFound,
        }
    }

    /// The steps it may take now.
    pub fn steps(&self, steps: &mut Vec<ProviderStep>) {
        if self.delayed.is_some() {
            steps.push(ProviderStep::Deliver);
        }
        for reference in Reference::ALL {
            let Some(txn) = self.txn(reference) else {
                continue;
            };
            if !txn.indexed {
                steps.push(ProviderStep::Index(reference));
            }
            for next in txn.phase.successors() {
                steps.push(ProviderStep::Evolve(reference, *next));
            }
            if txn.phase == Phase::Broadcasting && !txn.replaced {
                steps.push(ProviderStep::Replace(reference));
            }
        }
        if let Some(foreign) = self.foreign {
            for next in foreign.phase.foreign_successors() {
                steps.push(ProviderStep::Foreign(*next));
            }
        }
    }

    /// Takes `step`.
    pub fn take(&mut self, step: ProviderStep) {
        match step {
            ProviderStep::Deliver => {
                if let Some(reference) = self.delayed.take() {
                    // A reference it holds: a duplicate, nothing stored.
                    let _ = self.store(reference);
                }
            }
            ProviderStep::Index(reference) => {
                if let Some(txn) = &mut self.txns[reference.index()] {
                    txn.indexed = true;
                }
            }
            ProviderStep::Evolve(reference, phase) => {
                if let Some(txn) = &mut self.txns[reference.index()] {
                    txn.phase = phase;
                }
            }
            ProviderStep::Replace(reference) => {
                if let Some(txn) = &mut self.txns[reference.index()] {
                    txn.replaced = true;
                }
            }
            ProviderStep::Foreign(phase) => {
                if let Some(txn) = &mut self.foreign {
                    txn.phase = phase;
                }
            }
        }
    }
}
