//! Conversions of the wire types shared by several services (withdrawals, payloads, states)
//! to and from domain types. Service-specific conversions stay in each service.

use crate::status::invalid_field;
use opledger_domain::amount::Amount;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::operation::{Executor, Operation};
use opledger_domain::payload::{
    AccountName, AssetCode, Destination, Memo, NetworkId, WithdrawalPayload,
};
use opledger_domain::risk::{RiskFlag, RiskFlags};
use opledger_domain::state::OperationState;
use opledger_proto::v1 as pb;
use tonic::Status;

/// Builds the domain payload for the authenticated tenant from the wire payload.
pub fn payload(
    tenant_id: TenantId,
    wire: Option<pb::WithdrawalPayload>,
) -> Result<WithdrawalPayload, Status> {
    let wire = wire.ok_or_else(|| invalid_field("payload", "is required"))?;
    let field = |name: &'static str| {
        move |e: opledger_domain::payload::PayloadError| invalid_field(name, &e.to_string())
    };
    let payload = WithdrawalPayload {
        tenant_id,
        source_account: AccountName::parse(&wire.source_account)
            .map_err(field("payload.source_account"))?,
        asset: AssetCode::parse(&wire.asset).map_err(field("payload.asset"))?,
        network: NetworkId::parse(&wire.network).map_err(field("payload.network"))?,
        destination: Destination::parse(&wire.destination).map_err(field("payload.destination"))?,
        memo: wire
            .memo
            .as_deref()
            .map(Memo::parse)
            .transpose()
            .map_err(field("payload.memo"))?,
        amount: amount("payload.amount", &wire.amount)?,
        fee_cap: amount("payload.fee_cap", &wire.fee_cap)?,
        policy_version: wire.policy_version,
    };
    payload
        .validate()
        .map_err(|e| invalid_field("payload.amount", &e.to_string()))?;
    Ok(payload)
}

/// Parses an amount field in minimal units.
pub fn amount(field: &str, raw: &str) -> Result<Amount, Status> {
    Amount::parse(raw)
        .map_err(|e| invalid_field(field, &format!("{e} (minimal units as a decimal string)")))
}

/// Parses an operation id.
pub fn operation_id(field: &str, raw: &str) -> Result<OperationId, Status> {
    raw.parse()
        .map_err(|_| invalid_field(field, "is not a withdrawal id"))
}

/// The wire enum of a risk flag.
pub fn risk_flag_to_wire(flag: RiskFlag) -> pb::RiskFlag {
    match flag {
        RiskFlag::SameDestinationAndAmount => pb::RiskFlag::SameDestinationAndAmount,
    }
}

/// The domain risk flag of a wire value; UNSPECIFIED and unknown numbers are refused.
pub fn risk_flag_from_wire(field: &str, raw: i32) -> Result<RiskFlag, Status> {
    match pb::RiskFlag::try_from(raw) {
        Ok(pb::RiskFlag::SameDestinationAndAmount) => Ok(RiskFlag::SameDestinationAndAmount),
        Ok(pb::RiskFlag::Unspecified) | Err(_) => Err(invalid_field(field, "is not a risk flag")),
    }
}

/// The domain risk flags of a wire list (`field` names it in the error); UNSPECIFIED and unknown
/// numbers are refused. Services read requests with it; clients (the benchmarks, the tests) read
/// the flags a withdrawal shows with it.
pub fn risk_flags_from_wire(field: &str, raw: &[i32]) -> Result<RiskFlags, Status> {
    raw.iter().map(|&f| risk_flag_from_wire(field, f)).collect()
}

/// The wire form of a stored operation.
pub fn withdrawal(op: &Operation) -> pb::Withdrawal {
    let p = &op.payload;
    pb::Withdrawal {
        withdrawal_id: op.op_id.to_string(),
        payload: Some(pb::WithdrawalPayload {
            source_account: p.source_account.as_str().to_owned(),
            asset: p.asset.as_str().to_owned(),
            network: p.network.as_str().to_owned(),
            destination: p.destination.as_str().to_owned(),
            memo: p.memo.as_ref().map(|m| m.as_str().to_owned()),
            amount: p.amount.to_string(),
            fee_cap: p.fee_cap.to_string(),
            policy_version: p.policy_version,
        }),
        payload_hash: op.payload_hash.to_hex(),
        state: state_to_wire(op.state) as i32,
        risk_flags: op
            .risk_flags
            .iter()
            .map(|f| risk_flag_to_wire(*f) as i32)
            .collect(),
        version: op.version,
        create_time: Some(timestamp(op.created_at)),
        update_time: Some(timestamp(op.updated_at)),
        executor: executor_to_wire(op.executor) as i32,
    }
}

/// The wire enum of an executor.
pub fn executor_to_wire(executor: Executor) -> pb::Executor {
    match executor {
        Executor::LocalSigner => pb::Executor::LocalSigner,
        Executor::Custodian => pb::Executor::Custodian,
    }
}

/// A protobuf timestamp.
pub fn timestamp(at: chrono::DateTime<chrono::Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

/// The wire enum of a state.
pub fn state_to_wire(state: OperationState) -> pb::WithdrawalState {
    use pb::WithdrawalState as W;
    match state {
        OperationState::Requested => W::Requested,
        OperationState::Approved => W::Approved,
        OperationState::Signing => W::Signing,
        OperationState::Signed => W::Signed,
        OperationState::Broadcast => W::Broadcast,
        OperationState::Unknown => W::Unknown,
        OperationState::Confirmed => W::Confirmed,
        OperationState::VerifiedNotSent => W::VerifiedNotSent,
        OperationState::FailedTerminal => W::FailedTerminal,
        OperationState::Rejected => W::Rejected,
    }
}

/// The domain state of a wire enum value; UNSPECIFIED and unknown numbers are refused.
pub fn state_from_wire(field: &str, raw: i32) -> Result<OperationState, Status> {
    use pb::WithdrawalState as W;
    match W::try_from(raw) {
        Ok(W::Requested) => Ok(OperationState::Requested),
        Ok(W::Approved) => Ok(OperationState::Approved),
        Ok(W::Signing) => Ok(OperationState::Signing),
        Ok(W::Signed) => Ok(OperationState::Signed),
        Ok(W::Broadcast) => Ok(OperationState::Broadcast),
        Ok(W::Unknown) => Ok(OperationState::Unknown),
        Ok(W::Confirmed) => Ok(OperationState::Confirmed),
        Ok(W::VerifiedNotSent) => Ok(OperationState::VerifiedNotSent),
        Ok(W::FailedTerminal) => Ok(OperationState::FailedTerminal),
        Ok(W::Rejected) => Ok(OperationState::Rejected),
        Ok(W::Unspecified) | Err(_) => Err(invalid_field(field, "is not a withdrawal state")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_round_trips_through_the_wire() {
        for state in OperationState::ALL {
            let wire = state_to_wire(state) as i32;
            assert_eq!(state_from_wire("s", wire).ok(), Some(state));
        }
        assert!(state_from_wire("s", 0).is_err());
        assert!(state_from_wire("s", 99).is_err());
    }
}
