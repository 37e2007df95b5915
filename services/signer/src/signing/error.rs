//! The signer's answers when it does not sign: [`SignerError`], the [`Ending`] a final refusal
//! gives the operation, and the [`Refusal`] of a caller.

use crate::config::Capability;
use opledger_domain::evidence::AttemptDefect;
use opledger_domain::state::OperationState;
use opledger_evm::signer::SignError;
use opledger_evm::tx::TxError;
use opledger_store::StoreError;
use opledger_trust::Unverified;

/// Why the signer refused or failed. Messages carry no address, amount, memo or key material.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// No such withdrawal for the tenant.
    #[error("withdrawal not found")]
    NotFound,
    /// The recomputed payload hash differs from the stored or the approved hash. Recorded as a
    /// security event; nothing was signed.
    #[error("payload hash recomputed from the stored fields does not match the approved hash")]
    HashMismatch,
    /// The approvals could not be verified against the tenant's pinned trust root. Recorded as
    /// a security event; nothing was signed.
    #[error("approvals not verified: {0}")]
    ApprovalsNotVerified(#[from] Unverified),
    /// A custodian executes this withdrawal: the signer never signs it (a security event: an
    /// honest broadcaster never asks).
    #[error("a custodian executes this withdrawal, not this signer")]
    CustodianExecuted,
    /// The operation is not APPROVED (or is claimed by a live lease: `retry`).
    #[error("withdrawal is not signable in state {}", state.as_str())]
    NotSignable {
        /// Its state.
        state: OperationState,
        /// True when another signer holds a live lease: retry later.
        retry: bool,
    },
    /// The fee the signer would spend is above the payload's fee cap.
    #[error("network fee would exceed the payload's fee cap")]
    FeeCapExceeded,
    /// No wallet, network or asset configuration for this withdrawal.
    #[error("signer has no {0} configured for this withdrawal")]
    NotConfigured(&'static str),
    /// Building or signing the transaction failed.
    #[error("signing failed: {0}")]
    Sign(#[from] SignError),
    /// A replacement could not be derived.
    #[error("replacement refused: {0}")]
    Replacement(#[from] TxError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The caller may not ask for this, or not now: nothing was signed. Recorded as a security
    /// event.
    #[error("caller not allowed: {0}")]
    NotAllowed(Refusal),
    /// The signing lane ended before answering (the claim stays; its lease expires and the
    /// operation is signed once on a later call).
    #[error("signing interrupted before an answer; retry")]
    Interrupted,
    /// The payload carries a memo, which a transfer on this network cannot carry: what would be
    /// executed is not what was approved.
    #[error("the payload's memo cannot be carried by a transfer on this network")]
    MemoNotExecutable,
    /// A stored attempt is not what it is stored as (its content is neither the approved transfer
    /// nor a cancel of it, or contradicts its stored kind). Recorded as a security event; nothing
    /// was signed.
    #[error("stored attempt does not match its content: {0}")]
    AttemptMismatch(#[from] AttemptDefect),
    /// No key of the original attempt's sender is loaded (a wallet rotated out and removed too
    /// early): a replacement from another account could not replace the original.
    #[error("no wallet of the original attempt's sender is loaded")]
    NoKeyForSender,
}

/// Why the signer ended an operation it refused (APPROVED -> FAILED_TERMINAL), and who owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// True when the owner is security (evidence of tampering), else operations.
    pub security: bool,
    /// The reason code recorded on the escalation.
    pub reason_code: &'static str,
}

impl SignerError {
    /// The ending of an operation refused with this error, if the refusal is final: tampering
    /// evidence (security) or a configuration fault nothing can fix for this payload (operations).
    /// Transient failures (store, interrupted, busy) end nothing: the caller retries with back-off.
    pub fn ending(&self) -> Option<Ending> {
        let (security, reason_code) = match self {
            SignerError::HashMismatch => (true, "SIGNER_HASH_MISMATCH"),
            SignerError::ApprovalsNotVerified(_) => (true, "APPROVALS_NOT_VERIFIED"),
            SignerError::NotConfigured(_) => (false, "SIGNER_NOT_CONFIGURED"),
            SignerError::FeeCapExceeded => (false, "FEE_CAP_EXCEEDED"),
            SignerError::MemoNotExecutable => (false, "MEMO_NOT_EXECUTABLE"),
            // Not the signer's to end: its executor follows it.
            SignerError::NotFound
            | SignerError::CustodianExecuted
            | SignerError::NotSignable { .. }
            | SignerError::Sign(_)
            | SignerError::Replacement(_)
            | SignerError::Store(_)
            | SignerError::NotAllowed(_)
            | SignerError::Interrupted
            | SignerError::AttemptMismatch(_)
            | SignerError::NoKeyForSender => return None,
        };
        Some(Ending {
            security,
            reason_code,
        })
    }
}

/// What a caller lacked for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The caller's configuration does not grant this capability.
    Capability(Capability),
    /// The caller is bound to a client certificate and did not present exactly that one.
    ClientCertificate,
    /// The operation is not in the state this request needs (it is in this one).
    State(OperationState),
    /// The latest attempt is younger than the signer's window for this request.
    Age {
        /// Its age, whole seconds.
        age_secs: u64,
        /// The window, seconds.
        min_age_secs: u64,
    },
}

impl Refusal {
    /// What was missing: `capability`, `client_certificate`, `state` or `age`.
    pub fn missing(&self) -> &'static str {
        match self {
            Refusal::Capability(_) => "capability",
            Refusal::ClientCertificate => "client_certificate",
            Refusal::State(_) => "state",
            Refusal::Age { .. } => "age",
        }
    }
}

impl Refusal {
    /// The security event's fixed description.
    pub(super) fn detail(&self) -> &'static str {
        match self {
            Refusal::Capability(_) => "caller lacks the capability for this request",
            Refusal::ClientCertificate => "caller did not present its bound client certificate",
            Refusal::State(_) => "operation is not in the state this request needs",
            Refusal::Age { .. } => "latest attempt is inside the signer's window for this request",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Capability(c) => write!(f, "missing capability {}", c.as_str()),
            Refusal::ClientCertificate => {
                f.write_str("the caller's bound client certificate was not presented")
            }
            Refusal::State(state) => write!(f, "not allowed in state {}", state.as_str()),
            Refusal::Age {
                age_secs,
                min_age_secs,
            } => write!(
                f,
                "latest attempt is {age_secs} s old, the window is {min_age_secs} s"
            ),
        }
    }
}

/// The security event kind the signer records for a refusal of `opledger_trust` (and answers as
/// the `why` of `APPROVALS_NOT_VERIFIED`).
pub fn unverified_kind(unverified: Unverified) -> &'static str {
    match unverified {
        Unverified::NoTrustRoot | Unverified::NoTrustStatement => "SIGNER_TRUST_MISSING",
        Unverified::TrustNotSigned => "SIGNER_TRUST_STATEMENT_INVALID",
        Unverified::TrustRolledBack => "SIGNER_TRUST_STATEMENT_ROLLBACK",
        Unverified::UnsignedDecision | Unverified::Refused(_) => "SIGNER_APPROVAL_INVALID",
        Unverified::Insufficient => "SIGNER_APPROVALS_INSUFFICIENT",
        Unverified::RiskNotAcknowledged => "SIGNER_RISK_NOT_ACKNOWLEDGED",
        Unverified::Rejected => "SIGNER_APPROVAL_REJECTED",
        Unverified::KytMissing => "SIGNER_KYT_MISSING",
        Unverified::KytFailed => "SIGNER_KYT_FAILED",
        Unverified::KytMisplaced(_) => "SIGNER_KYT_INVALID",
    }
}

#[cfg(test)]
mod tests {
    use super::unverified_kind;
    use opledger_trust::Unverified;

    #[test]
    fn refusals_of_the_trust_crate_keep_the_signers_event_kinds() {
        let kinds: Vec<&str> = [
            Unverified::NoTrustRoot,
            Unverified::NoTrustStatement,
            Unverified::TrustNotSigned,
            Unverified::TrustRolledBack,
            Unverified::UnsignedDecision,
            Unverified::Insufficient,
            Unverified::RiskNotAcknowledged,
            Unverified::Rejected,
            Unverified::KytMissing,
            Unverified::KytFailed,
        ]
        .into_iter()
        .map(unverified_kind)
        .collect();
        assert_eq!(
            kinds,
            [
                "SIGNER_TRUST_MISSING",
                "SIGNER_TRUST_MISSING",
                "SIGNER_TRUST_STATEMENT_INVALID",
                "SIGNER_TRUST_STATEMENT_ROLLBACK",
                "SIGNER_APPROVAL_INVALID",
                "SIGNER_APPROVALS_INSUFFICIENT",
                "SIGNER_RISK_NOT_ACKNOWLEDGED",
                "SIGNER_APPROVAL_REJECTED",
                "SIGNER_KYT_MISSING",
                "SIGNER_KYT_FAILED",
            ]
        );
        let misplaced = Unverified::KytMisplaced(opledger_trust::ScreeningRefusal::Misplaced);
        assert_eq!(unverified_kind(misplaced), "SIGNER_KYT_INVALID");
    }
}
