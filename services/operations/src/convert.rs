//! Conversions between wire types and domain types: the only place both meet.

pub use opledger_grpc::convert::{amount, operation_id, payload, state_from_wire, withdrawal};

use crate::checks::Refusal;
use opledger_domain::idempotency::{IdempotencyKey, IdempotencyKeyError};
use opledger_domain::payload::{AccountName, AssetCode, NetworkId};
use opledger_grpc::status::{ErrorReason, error_status, invalid_field};
use opledger_proto::v1 as pb;
use opledger_store::ledger::Balance;
use tonic::{Code, Status};

/// Parses an idempotency key; the key itself never appears in the error.
pub fn idempotency_key(raw: &str) -> Result<IdempotencyKey, Status> {
    IdempotencyKey::parse(raw).map_err(|e| match e {
        IdempotencyKeyError::Missing => error_status(
            Code::InvalidArgument,
            ErrorReason::IdempotencyKeyMissing,
            "idempotency_key is required: reuse one key for every retry of the same intent",
            &[],
        ),
        other => error_status(
            Code::InvalidArgument,
            ErrorReason::IdempotencyKeyInvalid,
            format!("idempotency_key is invalid: {other}"),
            &[("problem", &other.to_string())],
        ),
    })
}

/// The status of a create refused by its checks (nothing stored, no hold). `network` is the
/// payload's network id: a configuration name, never sensitive.
pub fn refusal(refusal: Refusal, network: &NetworkId) -> Status {
    match refusal {
        Refusal::UnknownNetwork => invalid_field(
            "payload.network",
            "is not a network this platform pays out on (see the operations service's network \
             registry)",
        ),
        Refusal::MemoNotCarried => invalid_field(
            "payload.memo",
            &format!(
                "transfers on network {} cannot carry a memo: send the withdrawal without one",
                network.as_str()
            ),
        ),
        Refusal::NoExecutor => error_status(
            Code::FailedPrecondition,
            ErrorReason::NoExecutorForNetwork,
            format!(
                "no signer holds an active hot wallet of this tenant for network {}",
                network.as_str()
            ),
            &[("network", network.as_str())],
        ),
    }
}

/// Parses an account name field.
pub fn account(field: &str, raw: &str) -> Result<AccountName, Status> {
    AccountName::parse(raw).map_err(|e| invalid_field(field, &e.to_string()))
}

/// Parses an asset code field.
pub fn asset(field: &str, raw: &str) -> Result<AssetCode, Status> {
    AssetCode::parse(raw).map_err(|e| invalid_field(field, &e.to_string()))
}

/// The wire form of a balance.
pub fn balance(account: &AccountName, asset: &AssetCode, balance: &Balance) -> pb::Balance {
    pb::Balance {
        account: account.as_str().to_owned(),
        asset: asset.as_str().to_owned(),
        available: balance.available.to_string(),
        held: balance.held.to_string(),
    }
}
