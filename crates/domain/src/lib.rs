//! Pure domain model of opledger: the vocabulary every other crate shares when
//! moving money out of the platform without paying twice.
//!
//! It holds typed identifiers ([`ids`]), integer amounts in minimal units
//! ([`amount`]), client idempotency keys ([`idempotency`]), the withdrawal
//! payload and its canonical hash ([`payload`]), and the single table of legal
//! operation state transitions ([`state`]), approval policies ([`policy`]), and signed
//! approvals with the tenant trust statement that the signer checks them against ([`approval`]),
//! the risk signals an approver acknowledges inside a signed approval ([`risk`]), the decisions
//! taken from chain evidence ([`evidence`]), the two-principal rule for releases that could
//! pay twice ([`witness`]), and what a custodian's answers and records mean ([`custodian`]).
//!
//! This crate must never do I/O, know about protobuf, a database, a clock-driven
//! scheduler or async runtimes, use floating point for money, or put a sensitive
//! value (idempotency key, destination, memo) in clear into an error message or
//! a `Debug` output. Everything here is deterministic and side-effect free,
//! except the random and time-ordered UUIDs minted by `TenantId::new` and
//! `OperationId::new`.

pub mod amount;
pub mod approval;
pub mod custodian;
pub mod evidence;
pub mod idempotency;
pub mod ids;
pub mod operation;
pub mod payload;
pub mod policy;
pub mod risk;
pub mod state;
pub mod witness;

pub use amount::{Amount, AmountError};
pub use idempotency::{IdempotencyKey, IdempotencyKeyError};
pub use ids::{IdError, OperationId, TenantId};
pub use payload::{
    AccountName, AssetCode, Destination, Memo, NetworkId, PayloadError, PayloadField, PayloadHash,
    WithdrawalPayload,
};
pub use risk::{RiskFlag, RiskFlags};
pub use state::{
    Actor, CREATOR, HoldEffect, INITIAL_STATE, OperationState, StateError, TRANSITIONS, Transition,
    TransitionError, check_transition,
};
