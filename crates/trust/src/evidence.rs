//! What is verified about one withdrawal: borrowed from what its executor read from the store.

use opledger_domain::payload::{PayloadHash, WithdrawalPayload};
use opledger_domain::risk::RiskFlag;
use opledger_store::signing::SigningInput;
use opledger_store::trust::{SignedScreening, StoredDecision, StoredTrust};

/// A withdrawal's evidence, as stored: its payload fields and hash, its risk flags, every stored
/// decision, its provider-signed screening results, the tenant's newest trust statement and the
/// newest trust statement version the verifying service recorded as accepted before. Each
/// executor fills it from its own read (the signer: `From<&SigningInput>`); nothing in it is
/// trusted until [`crate::TrustRoots::verify`] says so.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The stored payload fields.
    pub payload: &'a WithdrawalPayload,
    /// The stored payload hash.
    pub payload_hash: PayloadHash,
    /// The risk flags raised on the withdrawal at creation.
    pub risk_flags: &'a [RiskFlag],
    /// Every stored decision (approval or rejection) of the withdrawal.
    pub decisions: &'a [StoredDecision],
    /// The withdrawal's screening results recorded with a provider's signature.
    pub screenings: &'a [SignedScreening],
    /// The tenant's newest trust statement, if one is stored.
    pub trust: Option<&'a StoredTrust>,
    /// The newest trust statement version this verifier accepted for the tenant before (a floor:
    /// an older statement is a rollback).
    pub trust_seen: Option<u64>,
}

impl<'a> From<&'a SigningInput> for Evidence<'a> {
    fn from(input: &'a SigningInput) -> Evidence<'a> {
        Evidence {
            payload: &input.operation.payload,
            payload_hash: input.operation.payload_hash,
            risk_flags: &input.operation.risk_flags,
            decisions: &input.decisions,
            screenings: &input.screenings,
            trust: input.trust.as_ref(),
            trust_seen: input.trust_seen,
        }
    }
}

impl Evidence<'_> {
    /// True when the payload hash recomputed from the stored fields equals the stored hash and
    /// the hash every stored decision names, and there is at least one decision. Checked before
    /// [`crate::TrustRoots::verify`], whose evaluation assumes it.
    pub fn payload_hash_approved(&self) -> bool {
        let recomputed = self.payload.hash();
        let approved = !self.decisions.is_empty()
            && self
                .decisions
                .iter()
                .all(|d| d.payload_hash.as_slice() == recomputed.as_bytes().as_slice());
        recomputed == self.payload_hash && approved
    }
}
