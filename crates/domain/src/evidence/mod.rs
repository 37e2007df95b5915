//! Deciding from chain evidence: what an attempt's signed bytes are, whether independent nodes
//! agree on what the chain says, and what the agreed evidence allows. Every function here is pure
//! (evidence in, verdict out): the broadcaster's watcher, the reconciler, the signer and the model
//! checker (`crates/model`) call the very same code.
//!
//! The rules, from the threat model:
//! - an attempt's role (transfer or cancel) comes from its decoded content, never from the kind
//!   stored beside it, and the two must agree ([`content`]);
//! - every replacement is signed by the sender of the original ([`content::replacement_sender`]);
//! - a verdict that cannot be undone (settlement, release) rests on a reading at one pinned block
//!   agreed by a quorum of independent endpoints ([`quorum`]) and on inclusions at final depth
//!   ([`verdict`]);
//! - the signer is the only sender of its hot wallets, so a nonce consumed without any of our
//!   attempts included is an anomaly for security, never proof that nothing was sent.

pub mod content;
pub mod quorum;
pub mod verdict;

#[cfg(test)]
mod tests;

pub use content::{
    Asset, AttemptKind, Call, ContentMismatch, ExpectedTransfer, KindMismatch, NoKeyForSender,
    ReplacementRequest, Role, StoredAttempt, TxContent, UnknownAttemptKind, parse_address,
    replacement_kind, replacement_sender, role_of,
};
pub use quorum::{EndpointReading, NoAgreement, Reading, agree};
pub use verdict::{
    AttemptDefect, Escalation, EscalationOwner, NoVerdict, Resolution, Step, Timing, Verdict,
    decide, next_step, resolution_allowed, watcher_step,
};

/// A 20-byte account address.
pub type Address = [u8; 20];

/// A 32-byte block or transaction hash.
pub type Hash32 = [u8; 32];

/// A block named by number and hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockRef {
    /// Its height.
    pub number: u64,
    /// Its hash.
    pub hash: Hash32,
}

/// An attempt's inclusion in a canonical block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Inclusion {
    /// The including block.
    pub block: BlockRef,
    /// True when the transaction executed successfully (receipt status 1).
    pub succeeded: bool,
}
