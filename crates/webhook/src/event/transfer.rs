//! `transfer.status`: a custodian's progress report on a withdrawal, and its schema.

use opledger_domain::OperationId;
use serde_json::Value;

use super::fields::{Members, check_members, operation_id, parse_tx_hash, rule, string_field};

/// Progress reported by a custodian for a withdrawal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferState {
    /// The transaction was sent to the network.
    Broadcast,
    /// The transaction reached the custodian's confirmation threshold.
    Confirmed,
}

impl TransferState {
    /// Wire form: `"broadcast"` or `"confirmed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferState::Broadcast => "broadcast",
            TransferState::Confirmed => "confirmed",
        }
    }
}

/// `transfer.status`: a custodian's status update for one of our withdrawals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferStatus {
    operation_id: OperationId,
    status: TransferState,
    tx_hash: [u8; 32],
}

impl TransferStatus {
    /// The withdrawal the update is about.
    pub fn operation_id(&self) -> OperationId {
        self.operation_id
    }

    /// The reported progress.
    pub fn status(&self) -> TransferState {
        self.status
    }

    /// The transaction hash.
    pub fn tx_hash(&self) -> &[u8; 32] {
        &self.tx_hash
    }

    /// The transaction hash as lowercase `0x` + 64 hex digits.
    pub fn tx_hash_hex(&self) -> String {
        format!("0x{}", hex::encode(self.tx_hash))
    }
}

/// Reads a `transfer.status` event's `data`.
pub(super) fn transfer_status(data: &Members<Value>) -> Result<TransferStatus, String> {
    check_members(data, &["operation_id", "status", "tx_hash"])?;
    let operation_id = operation_id(data)?;
    let status = match string_field(data, "status")? {
        "broadcast" => TransferState::Broadcast,
        "confirmed" => TransferState::Confirmed,
        _ => return Err(rule("status", "must be \"broadcast\" or \"confirmed\"")),
    };
    let tx_hash = parse_tx_hash(string_field(data, "tx_hash")?)
        .ok_or_else(|| rule("tx_hash", "must be 0x followed by 64 hex digits"))?;
    Ok(TransferStatus {
        operation_id,
        status,
        tx_hash,
    })
}
