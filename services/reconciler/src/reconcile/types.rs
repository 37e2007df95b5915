//! What examining an operation yields and why it may fail: [`Finding`], [`Assessment`],
//! [`ReconcileError`], and the operators' description of a verdict ([`describe`]).

use opledger_chain::SubmitClass;
use opledger_domain::evidence::{AttemptDefect, Hash32, NoVerdict, Role, Verdict};
use opledger_store::StoreError;
use opledger_store::signing::Attempt;

/// What examining one operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// The evidence allowed no verdict (no agreement, lag, an inconsistent reading): nothing
    /// changed.
    NoVerdict,
    /// A transfer attempt is included at final depth: CONFIRMED, hold settled.
    Confirmed,
    /// A transfer attempt is included but not yet final: back to BROADCAST for the watcher.
    Included,
    /// Our own cancel is included at final depth: VERIFIED_NOT_SENT, hold released (the witness
    /// attested the same evidence).
    VerifiedNotSent,
    /// Our own cancel is included at final depth and the release is proposed with that evidence:
    /// the operation stays UNKNOWN, its hold held, until the witness attests the same evidence.
    AwaitingWitness,
    /// Nothing to do yet (an attempt waiting to be mined, a cancel waiting for finality).
    Waiting,
    /// None of our attempts is included, the nonce is unconsumed and the cancel window passed: a
    /// cancel replacement was signed (persisted by the signer), or the stored one resubmitted.
    CancelSubmitted(SubmitClass),
    /// FAILED_TERMINAL with an owner and this reason code, hold kept: a reverted attempt, a nonce
    /// consumed without us, an attempt that is not what it is stored as, or no verdict within
    /// the window.
    Escalated(&'static str),
}

/// Why an operation could not be examined (it is retried on the next pass).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// No RPC endpoint for the operation's network.
    #[error("no rpc endpoint configured for network {0}")]
    NoRpc(String),
    /// The signer refused or could not be reached.
    #[error("signer: {0}")]
    Signer(String),
    /// The requested resolution is not what the evidence shows.
    #[error("the chain evidence shows {shows}, not the requested outcome")]
    EvidenceMismatch {
        /// What the evidence shows.
        shows: &'static str,
    },
    /// The operation is not UNKNOWN or FAILED_TERMINAL.
    #[error("withdrawal is not unresolved")]
    NotUnresolved,
    /// The release is proposed with its evidence; the witness has not attested it yet, so the
    /// hold is kept (nothing else changed).
    #[error("the release awaits the witness's attestation")]
    AwaitingWitness,
    /// The store failed.
    #[error("store: {}", .0.log_safe())]
    Store(#[from] StoreError),
}

/// A short description of a verdict for operators (no identifiers).
pub fn describe(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::NoVerdict(NoVerdict::NoAgreement(_)) => {
            "nothing: the endpoints did not answer or did not agree"
        }
        Verdict::NoVerdict(NoVerdict::Inconsistent) => "nothing: the reading is inconsistent",
        Verdict::NoVerdict(NoVerdict::NonceMovedNotFinal) => {
            "nothing yet: the nonce moved, not at final depth"
        }
        Verdict::Tampered { .. } => "an attempt that is not what it is stored as",
        Verdict::Settled { .. } => "a final transfer",
        Verdict::Pending {
            role: Role::Transfer,
            ..
        } => "a transfer not yet final",
        Verdict::Pending {
            role: Role::Cancel, ..
        } => "a cancel not yet final",
        Verdict::Cancelled { .. } => "a final cancel",
        Verdict::Reverted { .. } => "a final attempt that reverted",
        Verdict::NonceMovedWithoutUs => "the nonce consumed at final depth by none of our attempts",
        Verdict::NotIncluded => "no attempt included and the nonce unconsumed",
        Verdict::NeverSigned => "no signed attempt",
    }
}

/// The evidence gathered about one operation: its attempts, oldest first, and the verdict.
#[derive(Debug, Clone)]
pub struct Assessment {
    /// Its attempts as stored.
    pub attempts: Vec<Attempt>,
    /// The role of each attempt, from its content (or why it has none).
    pub roles: Vec<Result<Role, AttemptDefect>>,
    /// Each attempt's transaction hash, computed from its bytes.
    pub hashes: Vec<Hash32>,
    /// What the agreed evidence establishes.
    pub verdict: Verdict,
}
