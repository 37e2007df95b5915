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
    /// Who executes it, chosen at creation for its tenant and network, never changed.
    pub executor: Executor,
    /// Advances by one on every change.
    pub version: i64,
    /// When the operation was created.
    pub created_at: DateTime<Utc>,
    /// When the operation last changed.
    pub updated_at: DateTime<Utc>,
}

/// Who executes a withdrawal once it is approved. The approvals, the payload hash, the hold and
/// the tenant rules are the same for both; only the hop after approval differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Executor {
    /// Our signer signs with a hot wallet of the tenant; the broadcaster sends the stored bytes.
    #[default]
    LocalSigner,
    /// A custodian account signs and broadcasts, keyed by our operation id; we follow its record
    /// and the chain.
    Custodian,
}

impl Executor {
    /// Every executor.
    pub const ALL: [Executor; 2] = [Executor::LocalSigner, Executor::Custodian];

    /// The stored and configured name.
    pub fn as_str(self) -> &'static str {
        match self {
            Executor::LocalSigner => "local_signer",
            Executor::Custodian => "custodian",
        }
    }

    /// The executor named `name`, if any.
    pub fn parse(name: &str) -> Option<Executor> {
        Executor::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::Executor;

    #[test]
    fn every_executor_name_parses_back_and_nothing_else_does() {
        for executor in Executor::ALL {
            assert_eq!(Executor::parse(executor.as_str()), Some(executor));
        }
        assert_eq!(Executor::parse("LOCAL_SIGNER"), None);
        assert_eq!(Executor::parse(""), None);
        assert_eq!(Executor::default(), Executor::LocalSigner);
    }
}
