//! Conversions between wire types and domain types: the only place both meet.

pub use opledger_grpc::convert::{amount, operation_id, payload, state_from_wire, withdrawal};

use crate::checks::Refusal;
use opledger_domain::idempotency::{IdempotencyKey, IdempotencyKeyError};
use opledger_domain::payload::{AccountName, AssetCode, NetworkId};
use opledger_grpc::status::{ErrorReason, error_status, invalid_field};
use opledger_proto::v1 as pb;
use opledger_store::credits::{CreditKind, CreditRecord, CreditState, OperatorSignature};
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
        pending: balance.pending.to_string(),
        owed: balance.owed.to_string(),
    }
}

/// Parses a credit id: 64 lowercase or uppercase hex digits.
pub fn credit_id(field: &str, raw: &str) -> Result<[u8; 32], Status> {
    let mut out = [0_u8; 32];
    if raw.len() != 64 || hex::decode_to_slice(raw, &mut out).is_err() {
        return Err(invalid_field(field, "must be 64 hex digits (a credit id)"));
    }
    Ok(out)
}

/// Checks the shape of an operator's signed credit statement (whether it verifies is decided
/// against the tenant's trust statement).
pub fn operator_signature(
    field: &str,
    raw: Option<pb::SignedCreditStatement>,
) -> Result<OperatorSignature, Status> {
    let Some(raw) = raw else {
        return Err(invalid_field(
            field,
            "is required: an operator's signature over the credit statement of these fields",
        ));
    };
    let key_ok = raw.operator_key_id.len() == 32
        && raw
            .operator_key_id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !key_ok {
        return Err(invalid_field(
            &format!("{field}.operator_key_id"),
            "must be 32 lowercase hex characters (a key id)",
        ));
    }
    if raw.policy_version == 0 || i64::try_from(raw.policy_version).is_err() {
        return Err(invalid_field(
            &format!("{field}.policy_version"),
            "must be a trust statement version (1 or more)",
        ));
    }
    if raw.signature.len() != 64 {
        return Err(invalid_field(
            &format!("{field}.signature"),
            "must be a 64-byte Ed25519 signature",
        ));
    }
    Ok(OperatorSignature {
        operator_key_id: raw.operator_key_id,
        policy_version: raw.policy_version,
        signature: raw.signature,
    })
}

/// The wire form of a credit.
pub fn credit(record: &CreditRecord) -> pb::Credit {
    let (state, refusal_reason) = match &record.state {
        CreditState::Pending => (pb::CreditState::Pending, String::new()),
        CreditState::Credited => (pb::CreditState::Credited, String::new()),
        CreditState::Refused(reason) => (pb::CreditState::Refused, reason.clone()),
    };
    pb::Credit {
        credit_id: hex::encode(record.credit_id),
        kind: match record.kind {
            CreditKind::Deposit => pb::CreditKind::Deposit,
            CreditKind::Operator => pb::CreditKind::Operator,
        } as i32,
        state: state as i32,
        account: record.account.as_str().to_owned(),
        asset: record.asset.as_str().to_owned(),
        amount: record.amount.to_string(),
        chain_evidence: record.evidence.is_some(),
        operator_statements: u32::try_from(record.statements.len()).unwrap_or(u32::MAX),
        refusal_reason,
        created_at: Some(opledger_grpc::convert::timestamp(record.created_at)),
    }
}
