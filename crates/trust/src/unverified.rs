//! Why a withdrawal's approvals could not be verified.

use opledger_webhook::screening::ScreeningRefusal;

/// Why the approvals of a withdrawal could not be verified. Each is evidence of tampering or of a
/// missing configuration, never a reason to execute: the caller records it as a security event
/// (under a kind of its own) and refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// No trust root is pinned for the tenant.
    #[error("no trust root is configured for the tenant")]
    NoTrustRoot,
    /// The tenant has no trust statement in the database.
    #[error("the tenant has no trust statement")]
    NoTrustStatement,
    /// The stored trust statement is not signed by a pinned key (or is malformed).
    #[error("the trust statement is not signed by a pinned administrator key")]
    TrustNotSigned,
    /// The stored trust statement is older than one already accepted (a rollback).
    #[error("the trust statement is older than one already accepted")]
    TrustRolledBack,
    /// A stored decision lacks its signature or a statement field.
    #[error("a stored approval carries no verifiable statement")]
    UnsignedDecision,
    /// A stored decision does not verify (forged, copied, revoked or unknown key, unknown policy
    /// version).
    #[error("a stored approval does not verify: {0}")]
    Refused(opledger_domain::approval::Refusal),
    /// Fewer distinct verified approvers than the policy requires.
    #[error("verified approvals do not meet the tenant's policy")]
    Insufficient,
    /// Fewer distinct verified approvers than the policy requires once approvals whose signed
    /// statements do not acknowledge every risk flag of the withdrawal are left out.
    #[error(
        "verified approvals that acknowledge the withdrawal's risk flags do not meet the policy"
    )]
    RiskNotAcknowledged,
    /// The asset needs a KYT pass and none signed by a KYT key of the trust statement is recorded.
    #[error("no KYT pass signed by a KYT key of the trust statement is recorded")]
    KytMissing,
    /// A KYT failure signed by a KYT key of the trust statement is recorded.
    #[error("a signed KYT screening failed")]
    KytFailed,
    /// A provider-signed delivery recorded on the withdrawal is about something else.
    #[error("{0}")]
    KytMisplaced(ScreeningRefusal),
    /// A verified rejection exists.
    #[error("the withdrawal was rejected by a verified decision")]
    Rejected,
}

impl Unverified {
    /// The fixed description recorded with the security event (never a payload value).
    pub fn detail(self) -> &'static str {
        match self {
            Unverified::KytMissing | Unverified::KytFailed | Unverified::KytMisplaced(_) => {
                "the withdrawal's screening results do not allow it under the tenant's trust statement"
            }
            _ => "approvals do not verify against the tenant's pinned trust root",
        }
    }
}
