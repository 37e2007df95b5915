//! The broadcaster's due operation, as [`crate::queue`] hands it out.

use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;

/// An operation the broadcaster should move: APPROVED (sign it first) or SIGNED (submit its
/// stored bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// APPROVED, SIGNING (lease expired) or SIGNED.
    pub state: OperationState,
    /// Its network id.
    pub network: String,
}
