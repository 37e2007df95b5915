//! The one mapping from store errors to gRPC statuses.

use crate::status::{ErrorReason, error_status, error_status_with};
use opledger_domain::approval::Refusal;
use opledger_store::StoreError;
use tonic::{Code, Status};
use tonic_types::ErrorDetails;

/// Maps every store error to a status with `ErrorInfo`. Exhaustive: a new variant must be mapped.
pub fn store_status(error: StoreError) -> Status {
    match error {
        StoreError::KeyReused { fields } => {
            let names: Vec<&str> = fields.iter().map(|f| f.as_str()).collect();
            let mut details = ErrorDetails::new();
            for name in &names {
                details.add_precondition_failure_violation(
                    "IDEMPOTENCY_KEY_REUSED",
                    format!("payload.{name}"),
                    "differs from the payload first sent with this idempotency key",
                );
            }
            error_status_with(
                Code::FailedPrecondition,
                ErrorReason::IdempotencyKeyReused,
                format!(
                    "idempotency key was already used with a different payload (differs in: {})",
                    names.join(", ")
                ),
                &[("fields", &names.join(","))],
                details,
            )
        }
        StoreError::InsufficientFunds => error_status(
            Code::FailedPrecondition,
            ErrorReason::InsufficientFunds,
            "available balance of the source account does not cover the amount",
            &[],
        ),
        StoreError::OutOfRange { what } => error_status(
            Code::OutOfRange,
            ErrorReason::AmountOutOfRange,
            format!(
                "{what} would exceed the amount range (at most \
                 340282366920938463463374607431768211455 minimal units); nothing changed"
            ),
            &[("what", what)],
        ),
        StoreError::NotFound { what } => error_status(
            Code::NotFound,
            ErrorReason::NotFound,
            format!("{what} not found"),
            &[("resource", what)],
        ),
        StoreError::Transition(e) => error_status(
            Code::FailedPrecondition,
            ErrorReason::IllegalTransition,
            e.to_string(),
            &[],
        ),
        StoreError::HashMismatch => error_status(
            Code::FailedPrecondition,
            ErrorReason::PayloadHashMismatch,
            "payload_hash is not the withdrawal's stored payload hash: read the withdrawal again \
             and review what would be executed",
            &[],
        ),
        StoreError::RiskFlagsNotAcknowledged { flags } => {
            let names: Vec<&str> = flags.iter().map(|f| f.as_str()).collect();
            error_status(
                Code::FailedPrecondition,
                ErrorReason::RiskFlagsNotAcknowledged,
                format!(
                    "acknowledge the withdrawal's risk flags first: {}",
                    names.join(", ")
                ),
                &[("flags", &names.join(","))],
            )
        }
        StoreError::TrustMissing => error_status(
            Code::FailedPrecondition,
            ErrorReason::TrustStatementMissing,
            "the tenant has no trust statement yet: an administrator publishes one with \
             opledger-admin trust publish",
            &[],
        ),
        StoreError::KytPassRequired => error_status(
            Code::FailedPrecondition,
            ErrorReason::KytPassRequired,
            "the tenant's policy needs a recorded KYT pass for this withdrawal before approvals count",
            &[],
        ),
        StoreError::ApprovalRefused(refusal) => approval_refusal_status(refusal),
        StoreError::NotPending { state } => error_status(
            Code::FailedPrecondition,
            ErrorReason::NotPendingApproval,
            format!(
                "withdrawal is not awaiting approval (state {})",
                state.as_str()
            ),
            &[("state", state.as_str())],
        ),
        StoreError::WalletNotActive | StoreError::WalletRotatedOut => {
            tracing::error!(
                "an original was refused: its wallet is no longer the tenant's active wallet (this signer's configuration is out of date)"
            );
            error_status(
                Code::FailedPrecondition,
                ErrorReason::WalletNotActive,
                "the sender's wallet is not the tenant's active wallet on this network: this \
                 signer's configuration is out of date (a rotation); nothing signed",
                &[],
            )
        }
        StoreError::Conflict { current } => error_status(
            Code::Aborted,
            ErrorReason::ConcurrentModification,
            "operation changed concurrently; read it again",
            &[("state", current.map(|s| s.as_str()).unwrap_or("NONE"))],
        ),
        e @ (StoreError::HoldMismatch { .. } | StoreError::Corrupt { .. }) => {
            tracing::error!(error = %e.log_safe(), "store invariant failure");
            error_status(
                Code::Internal,
                ErrorReason::InternalError,
                "internal error",
                &[],
            )
        }
        e @ StoreError::Database(_) => {
            if e.is_unavailable() {
                tracing::warn!(error = %e.log_safe(), "database unavailable");
                error_status(
                    Code::Unavailable,
                    ErrorReason::StoreUnavailable,
                    "store unavailable; retry with the same idempotency key",
                    &[],
                )
            } else {
                tracing::error!(error = %e.log_safe(), "database error");
                error_status(
                    Code::Internal,
                    ErrorReason::InternalError,
                    "internal error; retry with the same idempotency key",
                    &[],
                )
            }
        }
    }
}

/// The status of an approval that cannot count. Exhaustive over the domain's refusals.
pub fn approval_refusal_status(refusal: Refusal) -> Status {
    match refusal {
        Refusal::BadSignature { key_id } => error_status(
            Code::FailedPrecondition,
            ErrorReason::ApprovalSignatureInvalid,
            "the approval statement's signature does not verify with the key it names",
            &[("key_id", &key_id.to_hex())],
        ),
        Refusal::UnknownKey { key_id } => error_status(
            Code::FailedPrecondition,
            ErrorReason::ApproverKeyUnknown,
            "the approver key is not registered in the tenant's trust statement",
            &[("key_id", &key_id.to_hex())],
        ),
        Refusal::NotAnApprover { key_id } => error_status(
            Code::FailedPrecondition,
            ErrorReason::ApproverKeyUnknown,
            "the key is an OPERATOR key of the tenant's trust statement: it signs credit \
             statements, never withdrawal decisions",
            &[("key_id", &key_id.to_hex())],
        ),
        Refusal::RevokedKey { key_id } => error_status(
            Code::FailedPrecondition,
            ErrorReason::ApproverKeyRevoked,
            "the approver key was revoked by the tenant's trust statement",
            &[("key_id", &key_id.to_hex())],
        ),
        Refusal::OtherOperation { key_id } => error_status(
            Code::FailedPrecondition,
            ErrorReason::ApprovalForOtherOperation,
            "the approval statement is for another tenant, withdrawal, payload or decision",
            &[("key_id", &key_id.to_hex())],
        ),
        Refusal::UnknownPolicyVersion { named, held } => error_status(
            Code::FailedPrecondition,
            ErrorReason::PolicyVersionUnknown,
            format!("the approval statement names policy version {named}; the newest is {held}"),
            &[("policy_version", &held.to_string())],
        ),
    }
}
