//! A withdrawal operation: its identity, state, the payload it is bound to and when it changed.

use crate::ids::OperationId;
use crate::payload::{PayloadHash, WithdrawalPayload};
use crate::risk::RiskFlag;
use crate::state::OperationState;
use chrono::{DateTime, Utc};

/// A withdrawal operation as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Server-generated identity.
    pub op_id: OperationId,
    /// Current state.
    pub state: OperationState,
    /// SHA-256 of the canonical payload, immutable.
    pub payload_hash: PayloadHash,
    /// The stored payload fields.
    pub payload: WithdrawalPayload,
    /// Risk signals raised at creation.
    pub risk_flags: Vec<RiskFlag>,
    /// Advances by one on every change.
    pub version: i64,
    /// When the operation was created.
    pub created_at: DateTime<Utc>,
    /// When the operation last changed.
    pub updated_at: DateTime<Utc>,
}
