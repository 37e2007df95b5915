//! What one run of the model explores: the chain's bounds, the endpoints, the faults allowed and
//! which decisions the workers take (the domain's, or an old one kept here to show that the model
//! finds what it was fixed for).

/// One configured JSON-RPC endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// Reads the canonical chain at the current head, or does not answer.
    Honest,
    /// Reads the canonical chain, its head up to `blocks` behind the network's, or does not
    /// answer.
    Lagging {
        /// How far behind its head may be.
        blocks: u8,
    },
    /// Answers whatever it likes from a fixed repertoire of fabrications (hidden receipts,
    /// receipts that do not exist, a wrong nonce, a wrong finality), the truth, or nothing.
    Liar,
}

/// The decisions the watcher and the reconciler take from a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decisions {
    /// `opledger_domain::evidence::{watcher_step, next_step}`.
    Domain,
    /// The old decisions ([`crate::legacy`]): the watcher confirms any attempt that succeeded at
    /// final depth (a cancel counted as the payout) and the reconciler sends an UNKNOWN operation
    /// whose cancel is included but not final back to BROADCAST.
    CancelCountsAsPayout,
    /// A mutant no version had ([`crate::legacy::next_step_without_escalation`]): the domain's
    /// decisions, except that the reconciler never escalates for want of a verdict; it shows the
    /// liveness check catches a reconciler that would wait forever.
    NeverEscalateWithoutVerdict,
}

/// Who signs a fee bump or a cancel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplacementRule {
    /// `opledger_domain::evidence::replacement_sender`: the original attempt's sender.
    OriginalSender,
    /// The old rule: the tenant's current wallet, whichever sent the original.
    CurrentWallet,
}

/// Whether and how the tenant's hot wallet is rotated while the operation is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    /// The wallet never changes.
    Never,
    /// The current wallet may change once; the retired key stays available to finish its nonces.
    KeepRetiredKey,
    /// The current wallet may change once, and the retired key may (nondeterministically) be
    /// dropped with it, or kept.
    MayDropRetiredKey,
}

/// What an inbound webhook about the operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    /// None arrive.
    Off,
    /// A webhook is a hint: it triggers a watcher evaluation, nothing else.
    Hints,
    /// The old, trusting processor: a webhook claiming a confirmation moves the operation to
    /// CONFIRMED (a row the transition table allows the webhook processor), settling the hold.
    TrustClaims,
}

/// The ledger's rule for releasing the hold of a withdrawal with a signed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseRule {
    /// `opledger_domain::witness::release_allowed` over the recorded proposals and attestations:
    /// a proposal by a proposer and the witness's attestation of the same evidence, a proof the
    /// chain watcher marked reorganized away left out (migration 31).
    Witnessed,
    /// A mutant no version shipped ([`crate::legacy::release_on_proposal`]): the hold is released
    /// on a proposal alone, as when one login could release; it shows the two-witness rule is
    /// load-bearing.
    ProposalAlone,
    /// Migration 28's rule, before migration 31: `release_allowed` over every recorded proposal
    /// and attestation, a proof marked reorganized away counted like any other. A marked proof
    /// then still witnesses the release, so `opledger_reopen_release` answers PROOF_MARKED and
    /// never reopens it: it shows leaving marked proofs out is load-bearing.
    CountsMarkedProofs,
}

/// The one principal whose login an adversary holds, if any (one at a time). Whatever the
/// adversary does goes through the same store: the transition table, the release rule, and the
/// tables' keys (an attestation names a recorded proposal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compromised {
    /// Every principal is honest.
    Nobody,
    /// The reconciler's database login: records any proposal (as the reconciler or as an
    /// operator, whose API the reconciler serves), makes any move the transition table allows the
    /// reconciler or an operator, and asks the ledger to release the hold at any time. The
    /// reconciler service keeps running beside it.
    ReconcilerLogin,
    /// The witness's database login: records an attestation of any recorded proposal at any time.
    /// The witness service keeps running beside it.
    WitnessLogin,
    /// An operator whose resolutions skip the evidence check: records any proposal as an
    /// operator, makes any move the transition table allows an operator, and asks the ledger to
    /// release the hold at any time.
    Operator,
}

/// One run's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Blocks an inclusion needs to be final, the including block counted.
    pub confirmations: u8,
    /// The deepest reorganization: how many blocks at the top may be replaced.
    pub reorg_depth: u8,
    /// How many reorganizations may happen in one run.
    pub reorgs: u8,
    /// The highest block the explored chain may reach (the liveness check may go further).
    pub max_height: u8,
    /// The configured endpoints (at most one of them a liar).
    pub endpoints: Vec<Endpoint>,
    /// How many endpoints must answer alike.
    pub quorum: usize,
    /// The largest spread of the answering endpoints' heads.
    pub max_lag: u64,
    /// How far below the head a reader may pin its reading.
    pub pin_back: u8,
    /// The witness's own endpoints (at most one liar among these and [`Config::endpoints`]).
    pub witness_endpoints: Vec<Endpoint>,
    /// How many of the witness's endpoints must answer alike.
    pub witness_quorum: usize,
    /// How far below the head the witness may pin its reading (its endpoints may be further
    /// behind than the workers').
    pub witness_pin_back: u8,
    /// The ledger's release rule.
    pub release_rule: ReleaseRule,
    /// The principal an adversary controls, if any.
    pub compromised: Compromised,
    /// How many proposals, attestations and moves a compromised principal may make in one run,
    /// besides asking the ledger to release (a bound of the model: a release needs one proposal
    /// the witness attests, and its moves change nothing the witness reads).
    pub rogue_steps: u8,
    /// Wallet rotation.
    pub rotation: Rotation,
    /// When true, someone else holds the hot wallet's key and may mine a transaction of their own
    /// at the operation's nonce.
    pub compromised_key: bool,
    /// When true, an included transaction may revert (receipt status 0).
    pub reverts: bool,
    /// When true, an operator resolves UNKNOWN and FAILED_TERMINAL operations (through
    /// `resolution_allowed`).
    pub operator: bool,
    /// Inbound webhooks.
    pub webhooks: Webhooks,
    /// The workers' decisions.
    pub decisions: Decisions,
    /// Who signs replacements.
    pub replacement: ReplacementRule,
    /// When true, a worker reads the operation's attempts from the store in one step and asks the
    /// endpoints in a later one, as I/O code does; attempts persisted in between are missing from
    /// its evidence. When false (the default), the two reads are one step.
    pub split_read: bool,
    /// When true, the liveness check's fair continuations keep the faulty endpoints faulty (each
    /// evaluation may get any of their answers but the truth) instead of assuming they recover.
    pub persistent_fault: bool,
    /// When true, every state is also checked to end terminal or escalated on every fair path
    /// (see [`crate::liveness`]).
    pub liveness: bool,
    /// Checker threads.
    pub threads: usize,
}

impl Default for Config {
    /// The configuration of the full check: three confirmations, one reorganization up to two
    /// blocks deep, an honest, a lagging (up to two blocks) and a lying endpoint with a quorum of
    /// two and a lag of at most one block, readings pinned up to two blocks below the head, a
    /// wallet rotation that keeps the retired key, reverts, an operator and webhook hints; the
    /// witness reads an honest and a lagging endpoint of its own with a quorum of two, the ledger
    /// releases under the two-witness rule, and every principal is honest.
    fn default() -> Self {
        Config {
            confirmations: 3,
            reorg_depth: 2,
            reorgs: 1,
            max_height: 6,
            endpoints: vec![
                Endpoint::Honest,
                Endpoint::Lagging { blocks: 2 },
                Endpoint::Liar,
            ],
            quorum: 2,
            max_lag: 1,
            pin_back: 2,
            witness_endpoints: vec![Endpoint::Honest, Endpoint::Lagging { blocks: 2 }],
            witness_quorum: 2,
            witness_pin_back: 2,
            release_rule: ReleaseRule::Witnessed,
            compromised: Compromised::Nobody,
            rogue_steps: 1,
            rotation: Rotation::KeepRetiredKey,
            compromised_key: false,
            reverts: true,
            operator: true,
            webhooks: Webhooks::Hints,
            decisions: Decisions::Domain,
            replacement: ReplacementRule::OriginalSender,
            split_read: false,
            persistent_fault: false,
            liveness: true,
            threads: 2,
        }
    }
}

/// Whose endpoints a reading goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The watcher's, the reconciler's and the operator's ([`Config::endpoints`]).
    Workers,
    /// The witness's own ([`Config::witness_endpoints`]).
    Witness,
}

impl Config {
    /// The endpoints, the quorum and the pinning depth of `side`.
    pub fn readers(&self, side: Side) -> (&[Endpoint], usize, u8) {
        match side {
            Side::Workers => (&self.endpoints, self.quorum, self.pin_back),
            Side::Witness => (
                &self.witness_endpoints,
                self.witness_quorum,
                self.witness_pin_back,
            ),
        }
    }

    /// True when a reorganization can remove an inclusion that was already final, which the
    /// safety properties about settlement assume away.
    pub fn reorgs_beyond_finality(&self) -> bool {
        self.reorgs > 0 && self.reorg_depth >= self.confirmations
    }
}
