//! A custodian's transaction statuses and what each says about a transfer.

use std::fmt;
use std::str::FromStr;

/// A provider transaction status, in Fireblocks' documented vocabulary (the richest of the
/// providers modelled; the others map onto it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderStatus {
    /// Received, not yet processed.
    Submitted,
    /// Waiting for the provider's AML screening.
    PendingAmlScreening,
    /// Waiting for enrichment (travel rule and the like).
    PendingEnrichment,
    /// Waiting for the provider's approval policy (signers, approvers).
    PendingAuthorization,
    /// Queued behind other transactions of the same wallet.
    Queued,
    /// Waiting for the signature.
    PendingSignature,
    /// Waiting for a third party's manual approval (an exchange, say).
    Pending3rdPartyManualApproval,
    /// Waiting for a third party to process it.
    Pending3rdParty,
    /// Signed and being broadcast.
    Broadcasting,
    /// On chain, waiting for confirmations.
    Confirming,
    /// Confirmed by the provider.
    Completed,
    /// A cancellation is in progress.
    Cancelling,
    /// Cancelled by the provider or an operator.
    Cancelled,
    /// Blocked by a policy.
    Blocked,
    /// Rejected by an approver, the screening or the provider.
    Rejected,
    /// Failed (with a sub-status naming why).
    Failed,
}

/// What a status says about the transfer, regardless of provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusClass {
    /// Not final: the provider may still sign and broadcast it.
    InFlight,
    /// The provider confirmed it.
    Completed,
    /// Final, and the provider says nothing was broadcast: cancelled, blocked or rejected.
    NotSent,
    /// Final failure: with a hash, the transaction was broadcast and the chain decides; without,
    /// nothing was broadcast.
    Failed,
}

impl ProviderStatus {
    /// Every status, in the provider's documented order.
    pub const ALL: [ProviderStatus; 16] = [
        ProviderStatus::Submitted,
        ProviderStatus::PendingAmlScreening,
        ProviderStatus::PendingEnrichment,
        ProviderStatus::PendingAuthorization,
        ProviderStatus::Queued,
        ProviderStatus::PendingSignature,
        ProviderStatus::Pending3rdPartyManualApproval,
        ProviderStatus::Pending3rdParty,
        ProviderStatus::Broadcasting,
        ProviderStatus::Confirming,
        ProviderStatus::Completed,
        ProviderStatus::Cancelling,
        ProviderStatus::Cancelled,
        ProviderStatus::Blocked,
        ProviderStatus::Rejected,
        ProviderStatus::Failed,
    ];

    /// The provider's name for it (`PENDING_AUTHORIZATION`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderStatus::Submitted => "SUBMITTED",
            ProviderStatus::PendingAmlScreening => "PENDING_AML_SCREENING",
            ProviderStatus::PendingEnrichment => "PENDING_ENRICHMENT",
            ProviderStatus::PendingAuthorization => "PENDING_AUTHORIZATION",
            ProviderStatus::Queued => "QUEUED",
            ProviderStatus::PendingSignature => "PENDING_SIGNATURE",
            ProviderStatus::Pending3rdPartyManualApproval => "PENDING_3RD_PARTY_MANUAL_APPROVAL",
            ProviderStatus::Pending3rdParty => "PENDING_3RD_PARTY",
            ProviderStatus::Broadcasting => "BROADCASTING",
            ProviderStatus::Confirming => "CONFIRMING",
            ProviderStatus::Completed => "COMPLETED",
            ProviderStatus::Cancelling => "CANCELLING",
            ProviderStatus::Cancelled => "CANCELLED",
            ProviderStatus::Blocked => "BLOCKED",
            ProviderStatus::Rejected => "REJECTED",
            ProviderStatus::Failed => "FAILED",
        }
    }

    /// What the status says about the transfer. Exhaustive: a new status forces a decision.
    /// A cancellation in progress is still in flight: the transaction may be broadcast before it
    /// completes.
    pub fn class(self) -> StatusClass {
        match self {
            ProviderStatus::Submitted
            | ProviderStatus::PendingAmlScreening
            | ProviderStatus::PendingEnrichment
            | ProviderStatus::PendingAuthorization
            | ProviderStatus::Queued
            | ProviderStatus::PendingSignature
            | ProviderStatus::Pending3rdPartyManualApproval
            | ProviderStatus::Pending3rdParty
            | ProviderStatus::Broadcasting
            | ProviderStatus::Confirming
            | ProviderStatus::Cancelling => StatusClass::InFlight,
            ProviderStatus::Completed => StatusClass::Completed,
            ProviderStatus::Cancelled | ProviderStatus::Blocked | ProviderStatus::Rejected => {
                StatusClass::NotSent
            }
            ProviderStatus::Failed => StatusClass::Failed,
        }
    }
}

/// A status name the provider does not document (or not yet): no decision rests on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown custodian status")]
pub struct UnknownStatus;

impl FromStr for ProviderStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProviderStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or(UnknownStatus)
    }
}

impl fmt::Display for ProviderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
