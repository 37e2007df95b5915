//! The custodian model's state and actions.

use opledger_domain::custodian::{Next, Round, SubmitAnswer, Window};
use opledger_domain::evidence::Hash32;
use opledger_domain::state::OperationState;

use super::ghost::Ghost;
use super::ledger::Ledger;
use super::provider::{Candidate, Outcome, Provider, ProviderStep, Txn};

/// Where an executor instance is in its pass: what it read and decided and has not written yet.
/// A crash at any of these boundaries forgets it (back to [`Pc::Idle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pc {
    /// Between passes.
    Idle,
    /// Claimed (APPROVED -> SIGNING), the request not persisted yet.
    Claimed,
    /// Read a SIGNED, BROADCAST or UNKNOWN operation as due (`custodian_due`: no live lease on
    /// it), the follow lease not taken yet.
    Due {
        /// The state read.
        from: OperationState,
        /// Whether a send was recorded when it read.
        sent: bool,
    },
    /// About to ask the store for a send and call the provider: after the request was persisted
    /// (meant as the first), on a SIGNED operation read without a send (meant as the first), or
    /// after a lookup that did not find the request after the window (a resend). `from` is the
    /// state the pass read.
    Send {
        /// The state read.
        from: OperationState,
        /// Which send the pass meant (what it read); the store's number decides.
        round: Round,
    },
    /// The send recorded and the provider called; its answer not recorded yet.
    Sent {
        /// The state read.
        from: OperationState,
        /// Which send it was (the store's number: the first is 1).
        round: Round,
        /// What the provider's answer read as.
        answer: SubmitAnswer,
    },
    /// A lookup's record stored and its decision taken, not applied yet.
    Decided {
        /// The state read.
        from: OperationState,
        /// The decision.
        next: Next,
        /// The record the lookup found, as stored.
        record: Option<u8>,
    },
    /// A release proposed (and BROADCAST -> UNKNOWN asked); the release itself not asked yet.
    Release,
    /// The provider's record named a transaction: the chain is asked about it next.
    Settle {
        /// The transaction the record names.
        hash: Hash32,
        /// Whether the record said COMPLETED.
        completed: bool,
    },
}

/// One step of an executor instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Claims an APPROVED withdrawal (APPROVED -> SIGNING).
    Claim,
    /// Takes back a claim whose request was never stored (SIGNING -> APPROVED).
    Reclaim,
    /// Persists the request (SIGNING -> SIGNED, the claim still its own).
    Persist,
    /// Reads a SIGNED, BROADCAST or UNKNOWN operation that no live lease holds as due.
    Read,
    /// Takes the follow lease (free, lapsed or its own; else the pass ends) and follows the
    /// operation as read: the first send of a SIGNED one read without a send, UNKNOWN for one
    /// with a send, the operator for a provider without lookup, or a lookup by the request's
    /// reference (`failed` when the lookup itself fails) with its record stored and its decision
    /// taken.
    Follow {
        /// The lookup failed.
        failed: bool,
    },
    /// The store numbers a send (its lease live, the operation SIGNED, BROADCAST or UNKNOWN)
    /// and the provider is called, which does and answers `0`.
    Send(Outcome),
    /// The store records no send (no live lease of its own, or the operation moved on): nothing
    /// is sent, the pass ends.
    NoSend,
    /// Records the answer and applies the decision on it.
    Answer,
    /// Applies a lookup's decision.
    Apply,
    /// Asks for the release (UNKNOWN -> VERIFIED_NOT_SENT), which the store refuses unless its
    /// release rule allows it.
    Release,
    /// Asks the chain about the record's transaction and settles (BROADCAST -> CONFIRMED) when
    /// it shows it paid at final depth (or, on a network not watched, the record said
    /// COMPLETED).
    Settle,
    /// Stops; restarts with nothing in memory.
    Crash,
}

/// A step of the executor's compromised database login.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RogueStep {
    /// Inserts a record of its own (REJECTED, no hash) and a proposal of it.
    Fabricate,
    /// Asks for a move of the custodian actor to this state.
    Move(OperationState),
    /// Inserts a binding of the operation to this provider transaction (`no_lookup`), which the
    /// database takes as any binding (migration 37's trigger and keys).
    Bind(Candidate),
}

/// A lease of the store's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lease {
    /// The claim's, on the operation row.
    Claim,
    /// The follow's, in `custodian_follows`.
    Follow,
}

/// An action of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Executor instance `0` takes step `1`.
    Executor(u8, Step),
    /// The provider's own step.
    Provider(ProviderStep),
    /// The provider's consistency window passes (once): a "not found" now means not stored.
    WindowPasses,
    /// A lease lapses (its holder stalled, crashed or slow): no one holds it any more.
    Lapse(Lease),
    /// The witness looks the reference up and judges the proposal of record `0` (attests it, or
    /// refuses it for good).
    Witness(u8),
    /// An operator binds the operation to this listed transaction (`no_lookup`): ours, or,
    /// careless, another withdrawal's.
    Bind(Candidate),
    /// An operator binds the other withdrawal to the foreign transaction (`no_lookup`).
    BindElsewhere,
    /// The compromised login's step.
    Rogue(RogueStep),
}

/// The whole state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The custodian.
    pub provider: Provider,
    /// The store.
    pub ledger: Ledger,
    /// Each executor instance's place in its pass.
    pub executors: [Pc; 2],
    /// Whether the consistency window has passed since the last send.
    pub window_passed: bool,
    /// What the properties judge by.
    pub ghost: Ghost,
}

impl State {
    /// The initial state: an APPROVED custodian withdrawal, nothing of it at the provider (which
    /// lists the foreign transaction when `foreign`).
    pub fn initial(foreign: bool) -> State {
        State {
            provider: Provider {
                foreign: foreign.then(Txn::foreign),
                ..Provider::default()
            },
            ledger: Ledger::approved(),
            executors: [Pc::Idle; 2],
            window_passed: false,
            ghost: Ghost::default(),
        }
    }

    /// The provider's consistency window since the last send, as the principals read it.
    pub fn window(&self) -> Window {
        if self.window_passed {
            Window::Passed
        } else {
            Window::Inside
        }
    }

    /// Instance `i`'s place.
    pub fn pc(&self, i: u8) -> Pc {
        self.executors
            .get(usize::from(i))
            .copied()
            .unwrap_or(Pc::Idle)
    }

    /// Sets instance `i`'s place.
    pub fn set_pc(&mut self, i: u8, pc: Pc) {
        if let Some(slot) = self.executors.get_mut(usize::from(i)) {
            *slot = pc;
        }
    }
}
