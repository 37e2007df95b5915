//! What examining one proposal or credit did: what the witness's passes return and count.

/// What examining one proposal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Its evidence is the witness's own verdict: attested.
    Attested,
    /// No verdict now (no agreement, lag, not yet final, no endpoints for its network): read
    /// again next pass.
    NoVerdict,
    /// Refused for good, with this reason code; the hold stays held for an owner.
    Refused(&'static str),
}

/// What examining one proposed custodian release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustodianOutcome {
    /// The witness's own lookup of the provider's record agrees: attested.
    Attested,
    /// Nothing decided now (its lookup failed or found nothing): looked up again next pass.
    Waiting(&'static str),
    /// Refused for good, with this reason code; the hold stays held for an owner.
    Refused(&'static str),
    /// The witness has no account for the withdrawal's tenant, network and asset: left.
    NoAccount,
}
