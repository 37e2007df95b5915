//! What a broadcast pass yields ([`Outcome`]), why it did not move an operation ([`Deferral`],
//! [`DeferralClass`]) and why it could not work on one ([`BroadcastError`]).

use opledger_chain::SubmitClass;
use opledger_domain::state::OperationState;
use opledger_proto::v1::ErrorReason;
use opledger_store::StoreError;

/// What one pass over an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Submitted; the class and the state the operation moved to.
    Submitted(SubmitClass, OperationState),
    /// Nothing to do: another worker moved it first.
    Skipped,
    /// Not moved now, and why: the queue puts it in back-off.
    Deferred(Deferral),
}

/// Why a pass did not move an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferral {
    /// The kind of failure.
    pub class: DeferralClass,
    /// The signer's `ErrorInfo` reason, when it gave one.
    pub reason: Option<ErrorReason>,
}

impl Deferral {
    /// A deferral of `class` without a signer reason.
    pub fn of(class: DeferralClass) -> Deferral {
        Deferral {
            class,
            reason: None,
        }
    }

    /// What the back-off row records: the signer's reason, else the class (UPPER_SNAKE).
    pub fn label(&self) -> &'static str {
        match self.reason {
            Some(reason) if reason != ErrorReason::Unspecified => reason.as_str_name(),
            _ => self.class.as_reason(),
        }
    }
}

/// The kinds of failure that defer an operation; every one of them puts it in back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferralClass {
    /// The signer could not be reached or is not serving (UNAVAILABLE, a transport failure).
    SignerUnavailable,
    /// The call ended without an answer (DEADLINE_EXCEEDED, CANCELLED).
    Interrupted,
    /// Another signer holds the claim, or the operation moved meanwhile (ABORTED, for example
    /// `NOT_SIGNABLE` with a live lease).
    SignerBusy,
    /// The signer will not sign it now (FAILED_PRECONDITION and kin: the fee cap, its
    /// configuration, the approvals). A refusal the signer makes final also ends the operation.
    SignerRefused,
    /// The signer refused this broadcaster (UNAUTHENTICATED, PERMISSION_DENIED).
    CallerRefused,
    /// Any other answer of the signer.
    SignerFailed,
    /// SIGNED, and yet no stored attempt to submit.
    NoAttempt,
    /// The latest stored attempt is held back by the signed-bytes gate: its signing commit was
    /// not seen acknowledged yet (the signer's sweep releases it after a probe commit).
    NotReleased,
    /// No RPC endpoint for the operation's network in this broadcaster's configuration.
    NoRpc,
    /// The store failed while working on it.
    Store,
}

impl DeferralClass {
    /// Every class, in metric order.
    pub const ALL: [DeferralClass; 10] = [
        DeferralClass::SignerUnavailable,
        DeferralClass::Interrupted,
        DeferralClass::SignerBusy,
        DeferralClass::SignerRefused,
        DeferralClass::CallerRefused,
        DeferralClass::SignerFailed,
        DeferralClass::NoAttempt,
        DeferralClass::NotReleased,
        DeferralClass::NoRpc,
        DeferralClass::Store,
    ];

    /// The class of a signer's answer. Every code defers (and so backs off): the decision is a
    /// match without a catch-all, so a new code forces one.
    pub fn of_signer(code: tonic::Code) -> DeferralClass {
        use tonic::Code;
        match code {
            Code::Unavailable => DeferralClass::SignerUnavailable,
            Code::DeadlineExceeded | Code::Cancelled => DeferralClass::Interrupted,
            Code::Aborted => DeferralClass::SignerBusy,
            Code::FailedPrecondition
            | Code::InvalidArgument
            | Code::NotFound
            | Code::OutOfRange => DeferralClass::SignerRefused,
            Code::Unauthenticated | Code::PermissionDenied => DeferralClass::CallerRefused,
            Code::Ok
            | Code::Unknown
            | Code::AlreadyExists
            | Code::ResourceExhausted
            | Code::Unimplemented
            | Code::Internal
            | Code::DataLoss => DeferralClass::SignerFailed,
        }
    }

    /// The metric label (lowercase).
    pub fn as_str(self) -> &'static str {
        match self {
            DeferralClass::SignerUnavailable => "signer_unavailable",
            DeferralClass::Interrupted => "interrupted",
            DeferralClass::SignerBusy => "signer_busy",
            DeferralClass::SignerRefused => "signer_refused",
            DeferralClass::CallerRefused => "caller_refused",
            DeferralClass::SignerFailed => "signer_failed",
            DeferralClass::NoAttempt => "no_attempt",
            DeferralClass::NotReleased => "not_released",
            DeferralClass::NoRpc => "no_rpc",
            DeferralClass::Store => "store",
        }
    }

    /// The back-off row's reason when the signer gave none (UPPER_SNAKE).
    pub fn as_reason(self) -> &'static str {
        match self {
            DeferralClass::SignerUnavailable => "SIGNER_UNAVAILABLE",
            DeferralClass::Interrupted => "INTERRUPTED",
            DeferralClass::SignerBusy => "SIGNER_BUSY",
            DeferralClass::SignerRefused => "SIGNER_REFUSED",
            DeferralClass::CallerRefused => "CALLER_REFUSED",
            DeferralClass::SignerFailed => "SIGNER_FAILED",
            DeferralClass::NoAttempt => "NO_ATTEMPT",
            DeferralClass::NotReleased => "NOT_RELEASED",
            DeferralClass::NoRpc => "NO_RPC",
            DeferralClass::Store => "STORE",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// Why an operation could not be worked on (it stays where it is and is retried).
#[derive(Debug, thiserror::Error)]
pub enum BroadcastError {
    /// No RPC endpoint for the operation's network.
    #[error("no rpc endpoint configured for network {0}")]
    NoRpc(String),
    /// The store failed.
    #[error("store: {}", .0.log_safe())]
    Store(#[from] StoreError),
}
