//! The actions the model explores: every step of the system, the broadcaster's submissions,
//! a reorganization's refill, and the steps of a compromised principal ([`crate::rogue`]).

use opledger_domain::evidence::Resolution;
use opledger_domain::state::{Actor, OperationState};
use opledger_domain::witness::{Principal, ReleaseEvidence};

use super::state::{Clock, Worker};
use crate::chain::Tx;
use crate::endpoints::Evidence;

/// What became of the broadcaster's first submission of a SIGNED operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Submission {
    /// The node accepted it: BROADCAST.
    Accepted,
    /// The answer was lost: UNKNOWN. `reached` tells whether the bytes reached the network.
    AnswerLost {
        /// The bytes reached the network.
        reached: bool,
    },
    /// Submitted, then the broadcaster crashed before its commit: still SIGNED.
    CrashedAfterSubmit,
}

/// A reorganization's new fork includes this transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refill {
    /// The transaction.
    pub tx: Tx,
    /// Its receipt status.
    pub succeeded: bool,
    /// Its block: the lowest new block plus this.
    pub offset: u8,
}

/// One step of the system.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// The broadcaster submits a SIGNED operation's original attempt.
    Broadcast(Submission),
    /// The stored bytes of an attempt reach the network (whoever submits them: a worker, a
    /// rebroadcast, or anyone who read them).
    Publish(u8),
    /// A block including a transaction at the nonce.
    Mine {
        /// The transaction.
        tx: Tx,
        /// Its receipt status.
        succeeded: bool,
    },
    /// A block including nothing of ours.
    MineEmpty,
    /// The top `depth` blocks are replaced.
    Reorg {
        /// How many blocks.
        depth: u8,
        /// What the new fork includes at the nonce, if anything.
        refill: Option<Refill>,
    },
    /// The tenant's current wallet becomes B.
    Rotate {
        /// The signer keeps A's key to finish its nonces.
        keep_retired_key: bool,
    },
    /// The broadcaster asks the signer for a fee bump, which it persists (a crash before the
    /// commit is a step that changes nothing).
    Bump,
    /// A worker reads the operation's attempts, before asking the endpoints (with
    /// [`Config::split_read`](crate::Config::split_read)).
    ReadStore(Worker),
    /// A worker reads the endpoints' evidence and decides.
    Evaluate {
        /// Who.
        worker: Worker,
        /// What `agree` made of the answers.
        evidence: Evidence,
        /// How much time passed (the reconciler's `Timing`).
        clock: Clock,
    },
    /// The witness reads its own endpoints about a proposal in its queue, decides, and records
    /// its attestation or its refusal (or nothing, to read again later).
    Attest {
        /// The proposal's place in the store.
        proposal: u8,
        /// What `agree` made of the witness's endpoints' answers.
        evidence: Evidence,
    },
    /// A step of the compromised principal ([`crate::rogue`]).
    Rogue(Rogue),
    /// A webhook about the operation arrives (any claim, duplicated, reordered or forged: it is a
    /// hint) and triggers a watcher evaluation.
    Webhook {
        /// What the watcher's evaluation read.
        evidence: Evidence,
    },
    /// The old, trusting webhook processor: a claimed confirmation of this attempt moves the
    /// operation to CONFIRMED.
    TrustedWebhook {
        /// The attempt the webhook claims confirmed.
        attempt: u8,
    },
    /// A worker commits its decided step (its answer may be lost afterwards, which changes
    /// nothing: it reads the store again on its next evaluation).
    Commit(Worker),
    /// A worker crashes before committing its decided step.
    Crash(Worker),
    /// An operator asks for an outcome; applied only if `resolution_allowed` says the evidence
    /// read now supports it.
    Resolve {
        /// The outcome asked for.
        outcome: Resolution,
        /// What the operator's evaluation read.
        evidence: Evidence,
    },
}

/// One step of the compromised principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rogue {
    /// Records a release proposal.
    Propose {
        /// The principal the row names.
        principal: Principal,
        /// What it names.
        evidence: ReleaseEvidence,
    },
    /// Records an attestation of a recorded proposal.
    Attest(ReleaseEvidence),
    /// Asks the store for a move the transition table allows the actor (its hold effect applied
    /// as for anyone: a release only when the release rule allows it).
    Move {
        /// Who it claims to be.
        actor: Actor,
        /// Where to.
        state: OperationState,
    },
    /// Asks the ledger to release the hold, whatever the operation's state.
    Release,
}
