//! The decision: do a withdrawal's stored approvals meet the tenant's signed policy?
//!
//! Evidence in (a verified trust statement, the withdrawal's facts, the approval statements and
//! signatures as stored), verdict out. The signer signs only on [`Verdict::Met`]; the approvals
//! service calls the same function to answer approvers and to move REQUESTED to APPROVED.

use super::{ApprovalStatement, Decision, KeyId, KeyKind, TrustStatement, signature, verify};
use crate::amount::Amount;
use crate::ids::{OperationId, TenantId};
use crate::payload::{AssetCode, PayloadHash};
use crate::risk::RiskFlags;
use std::collections::BTreeSet;

/// What the verdict is about: the withdrawal, its recomputed payload hash and what it moves.
#[derive(Debug, Clone, Copy)]
pub struct OperationFacts<'a> {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The withdrawal.
    pub operation_id: OperationId,
    /// The payload hash recomputed from the stored payload fields.
    pub payload_hash: PayloadHash,
    /// Its asset.
    pub asset: &'a AssetCode,
    /// Its amount.
    pub amount: Amount,
    /// The risk flags raised on it at creation: every counted approval acknowledges all of them.
    pub risk_flags: RiskFlags,
}

/// One stored decision: the statement as reconstructed from stored columns, and its signature.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalFacts<'a> {
    /// The statement.
    pub statement: ApprovalStatement,
    /// The stored signature bytes (64 when well formed).
    pub signature: &'a [u8],
}

/// Why a decision cannot count: each is evidence of tampering or of a stale client, never a
/// reason to sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The statement names another tenant, operation or payload hash.
    #[error("approval statement is for another tenant, operation or payload")]
    OtherOperation {
        /// The key that signed it.
        key_id: KeyId,
    },
    /// The key is not in the registry.
    #[error("approver key is not registered for the tenant")]
    UnknownKey {
        /// The key.
        key_id: KeyId,
    },
    /// The key was revoked.
    #[error("approver key was revoked")]
    RevokedKey {
        /// The key.
        key_id: KeyId,
    },
    /// The signature does not verify with the registered key.
    #[error("approval signature does not verify")]
    BadSignature {
        /// The key.
        key_id: KeyId,
    },
    /// The key is an `OPERATOR` key (it signs credit statements) or a `KYT` key (it signs
    /// screening results): never a withdrawal decision.
    #[error("key is not a withdrawal approver")]
    NotAnApprover {
        /// The key.
        key_id: KeyId,
    },
    /// The statement was made under a trust statement version newer than the one held.
    #[error("approval names policy version {named}, newer than the held version {held}")]
    UnknownPolicyVersion {
        /// The version named.
        named: u64,
        /// The newest version held.
        held: u64,
    },
}

/// What one verified decision contributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// A verified approval that counts toward the quorum.
    Approval(KeyId),
    /// A verified approval by a service key beyond its automated-approver limit: valid, but it
    /// does not count.
    NotCounted(KeyId),
    /// A verified approval whose statement does not acknowledge every risk flag of the
    /// withdrawal: the approver did not sign for what was flagged, so it does not count.
    Unacknowledged(KeyId),
    /// A verified rejection.
    Rejection(KeyId),
}

/// The verdict on a withdrawal's decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Enough distinct approvers, no rejection: the payload may be executed.
    Met {
        /// Distinct counted approvers.
        approvers: u32,
        /// Required by the policy.
        required: u32,
    },
    /// Not enough distinct approvers yet.
    Short {
        /// Distinct counted approvers.
        approvers: u32,
        /// Required by the policy.
        required: u32,
        /// Verified approvals left out because they do not acknowledge every risk flag.
        unacknowledged: u32,
    },
    /// A verified rejection exists.
    Rejected {
        /// The key that rejected.
        key_id: KeyId,
    },
}

/// Verifies one decision against the trust statement and the withdrawal: [`classify`], then the
/// signature with the registered key.
pub fn check(
    trust: &TrustStatement,
    op: &OperationFacts<'_>,
    approval: &ApprovalFacts<'_>,
) -> Result<Counted, Refusal> {
    let counted = classify(trust, op, &approval.statement)?;
    let s = &approval.statement;
    let key_id = s.approver_key_id;
    let key = trust.key(&key_id).ok_or(Refusal::UnknownKey { key_id })?;
    let sig = signature(approval.signature).map_err(|_| Refusal::BadSignature { key_id })?;
    verify(&key.public_key, &s.canonical_bytes(), &sig)
        .map_err(|_| Refusal::BadSignature { key_id })?;
    Ok(counted)
}

/// What a decision would contribute if its signature verifies: every rule of [`check`] but the
/// signature itself. For decisions whose signatures were verified when they were recorded by the
/// same process; the signer always uses [`evaluate`].
pub fn classify(
    trust: &TrustStatement,
    op: &OperationFacts<'_>,
    s: &ApprovalStatement,
) -> Result<Counted, Refusal> {
    let key_id = s.approver_key_id;
    if s.tenant_id != op.tenant_id
        || s.operation_id != op.operation_id
        || s.payload_hash != op.payload_hash
        || trust.tenant_id() != op.tenant_id
    {
        return Err(Refusal::OtherOperation { key_id });
    }
    if s.policy_version == 0 || s.policy_version > trust.version() {
        return Err(Refusal::UnknownPolicyVersion {
            named: s.policy_version,
            held: trust.version(),
        });
    }
    if trust.is_revoked(&key_id) {
        return Err(Refusal::RevokedKey { key_id });
    }
    let key = trust.key(&key_id).ok_or(Refusal::UnknownKey { key_id })?;
    Ok(match (s.decision, key.kind) {
        // An operator's decision, approval or rejection, is a forged or misdirected row.
        (_, KeyKind::Operator) => return Err(Refusal::NotAnApprover { key_id }),
        // A KYT provider's key signs screening results, never a decision.
        (_, KeyKind::Kyt) => return Err(Refusal::NotAnApprover { key_id }),
        (Decision::Reject, _) => Counted::Rejection(key_id),
        // What was flagged and not acknowledged in the signed statement was not approved.
        (Decision::Approve, _) if !s.acknowledged.covers(op.risk_flags) => {
            Counted::Unacknowledged(key_id)
        }
        (Decision::Approve, KeyKind::Approver) => Counted::Approval(key_id),
        (Decision::Approve, KeyKind::Service)
            if trust.automated_allows(&key_id, op.asset, op.amount) =>
        {
            Counted::Approval(key_id)
        }
        (Decision::Approve, KeyKind::Service) => Counted::NotCounted(key_id),
    })
}

/// The verdict on decisions already checked: distinct counted approvers against the policy's
/// requirement for the withdrawal's asset and amount; a rejection wins.
pub fn tally(trust: &TrustStatement, op: &OperationFacts<'_>, counted: &[Counted]) -> Verdict {
    let required = trust.policy(op.asset).required_for(op.amount);
    let mut approvers = BTreeSet::new();
    let mut unacknowledged = BTreeSet::new();
    let mut rejected = None;
    for c in counted {
        match *c {
            Counted::Approval(key_id) => {
                approvers.insert(key_id);
            }
            Counted::NotCounted(_) => {}
            Counted::Unacknowledged(key_id) => {
                unacknowledged.insert(key_id);
            }
            Counted::Rejection(key_id) => rejected = rejected.or(Some(key_id)),
        }
    }
    if let Some(key_id) = rejected {
        return Verdict::Rejected { key_id };
    }
    let approvers = u32::try_from(approvers.len()).unwrap_or(u32::MAX);
    if approvers >= required {
        Verdict::Met {
            approvers,
            required,
        }
    } else {
        Verdict::Short {
            approvers,
            required,
            unacknowledged: u32::try_from(unacknowledged.len()).unwrap_or(u32::MAX),
        }
    }
}

/// The verdict on every stored decision of a withdrawal. Any decision that does not verify
/// refuses the whole withdrawal: a forged or copied row is never ignored silently.
pub fn evaluate(
    trust: &TrustStatement,
    op: &OperationFacts<'_>,
    approvals: &[ApprovalFacts<'_>],
) -> Result<Verdict, Refusal> {
    let counted = approvals
        .iter()
        .map(|a| check(trust, op, a))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(tally(trust, op, &counted))
}
