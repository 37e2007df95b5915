//! The approval statement an approver signs with their own key.

use super::codec::{self, Reader, Writer};
use super::{KeyId, Signature, SigningKey, StatementError};
use crate::ids::{OperationId, TenantId};
use crate::payload::PayloadHash;
use crate::risk::{RiskFlag, RiskFlags};
use ed25519_dalek::Signer as _;

/// Domain string of approval statements, version 1.
pub const APPROVAL_DOMAIN_V1: &str = "opledger/approval-statement/v1";

/// What the approver decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The payload may be executed.
    Approve,
    /// The withdrawal must not be executed.
    Reject,
}

impl Decision {
    /// The encoded and stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "APPROVE",
            Decision::Reject => "REJECT",
        }
    }

    /// Parses a stored name.
    pub fn parse(text: &str) -> Result<Decision, StatementError> {
        match text {
            "APPROVE" => Ok(Decision::Approve),
            "REJECT" => Ok(Decision::Reject),
            _ => Err(StatementError::Field("decision")),
        }
    }
}

/// "Key `approver_key_id` decides `decision` for operation `operation_id` of `tenant_id`, whose
/// payload hash is `payload_hash`, under the tenant's trust statement `policy_version`, having
/// seen and acknowledged the risk flags `acknowledged`."
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalStatement {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The withdrawal.
    pub operation_id: OperationId,
    /// The payload hash the approver reviewed.
    pub payload_hash: PayloadHash,
    /// Approve or reject.
    pub decision: Decision,
    /// The signing key's id.
    pub approver_key_id: KeyId,
    /// The trust statement version the approver approved under (at least 1).
    pub policy_version: u64,
    /// The withdrawal's risk flags the approver saw and acknowledges (field 7, one item per
    /// flag, absent when empty: a statement without acknowledgements encodes as before).
    pub acknowledged: RiskFlags,
}

impl ApprovalStatement {
    /// The canonical bytes that are signed.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(APPROVAL_DOMAIN_V1);
        w.field(1, self.tenant_id.to_string().as_bytes())
            .field(2, self.operation_id.to_string().as_bytes())
            .field(3, self.payload_hash.as_bytes())
            .field(4, self.decision.as_str().as_bytes())
            .field(5, self.approver_key_id.to_hex().as_bytes())
            .field(6, self.policy_version.to_string().as_bytes());
        for flag in self.acknowledged.iter() {
            w.field(7, flag.as_str().as_bytes());
        }
        w.finish()
    }

    /// Decodes canonical bytes (anything else is refused).
    pub fn decode(bytes: &[u8]) -> Result<ApprovalStatement, StatementError> {
        let mut r = Reader::new(bytes, APPROVAL_DOMAIN_V1)?;
        let tenant_id = TenantId::from_uuid(codec::uuid(r.required(1, "tenant_id")?, "tenant_id")?);
        let operation_id =
            OperationId::from_uuid(codec::uuid(r.required(2, "operation_id")?, "operation_id")?);
        let payload_hash = PayloadHash::try_from(r.required(3, "payload_hash")?)
            .map_err(|_| StatementError::Field("payload_hash"))?;
        let decision = Decision::parse(codec::text(r.required(4, "decision")?, "decision")?)?;
        let approver_key_id = KeyId::parse(codec::text(
            r.required(5, "approver_key_id")?,
            "approver_key_id",
        )?)?;
        let policy_version =
            codec::decimal_u64(r.required(6, "policy_version")?, "policy_version")?;
        let mut acknowledged = RiskFlags::EMPTY;
        let mut previous: Option<RiskFlag> = None;
        for value in r.repeated(7)? {
            let flag = RiskFlag::parse(codec::text(value, "acknowledged")?)
                .ok_or(StatementError::Field("acknowledged"))?;
            // Canonical order: ascending names, each once.
            if previous.is_some_and(|p| p.as_str() >= flag.as_str()) {
                return Err(StatementError::Order("acknowledged"));
            }
            previous = Some(flag);
            acknowledged = acknowledged.with(flag);
        }
        r.end()?;
        let statement = ApprovalStatement {
            tenant_id,
            operation_id,
            payload_hash,
            decision,
            approver_key_id,
            policy_version,
            acknowledged,
        };
        statement.check()?;
        Ok(statement)
    }

    /// Refuses a statement no approver may sign (policy version 0).
    pub fn check(&self) -> Result<(), StatementError> {
        if self.policy_version == 0 {
            return Err(StatementError::Field("policy_version"));
        }
        Ok(())
    }

    /// Signs the canonical bytes with `key`, which must be the key the statement names.
    pub fn sign(&self, key: &SigningKey) -> Result<Signature, StatementError> {
        self.check()?;
        if KeyId::of(&key.verifying_key()) != self.approver_key_id {
            return Err(StatementError::Inconsistent(
                "approver_key_id is not the signing key's id",
            ));
        }
        Ok(key.sign(&self.canonical_bytes()))
    }
}
