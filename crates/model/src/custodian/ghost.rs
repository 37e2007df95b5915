//! What the custodian model remembers only to judge a run: violations seen at the moment they
//! happened, the references ever sent, and the examples reached. No principal reads it.

/// Violations noted when they happen, as bits of [`Ghost::violations`].
pub mod violation {
    /// A move the transition table refuses for its actor was asked.
    pub const ILLEGAL_MOVE: u8 = 1;
    /// A hold effect applied to a hold in the wrong state (a release of a released hold).
    pub const HOLD_EFFECT_ON_WRONG_HOLD: u8 = 2;
    /// The hold was released without a proposal of a terminal record without a hash attested
    /// by the witness with the record's status.
    pub const RELEASED_WITHOUT_ATTESTED_RECORD: u8 = 4;
    /// The executor concluded "refused before anything was stored" while the provider held a
    /// transaction of the operation.
    pub const REFUSAL_WHILE_STORED: u8 = 8;
}

/// The ghost state of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ghost {
    /// [`violation`] bits.
    pub violations: u8,
    /// The references the executor ever sent, as [`super::provider::Reference::bit`]s.
    pub references: u8,
    /// An UNKNOWN operation was moved to BROADCAST on the provider's record.
    pub unknown_resolved: bool,
    /// A resend under our reference reached the provider while it held the first request.
    pub resend_deduplicated: bool,
    /// The compromised login inserted its record.
    pub fabricated: bool,
    /// Without lookup, the executor read the bound transaction ended without a hash and waited
    /// on another listed candidate (the bound-release rule's second condition).
    pub bound_release_waited: bool,
}
