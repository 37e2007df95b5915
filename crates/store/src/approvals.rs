//! Signed approvals and rejections, checked against the tenant's trust statement.
//!
//! An approval is recorded only for the operation's stored payload hash and only with a signature
//! that verifies against the tenant's newest trust statement (approver registry and policy). The
//! operation moves to APPROVED through [`crate::transition::transition_in`] (a conditional update
//! that also checks the hash) once the quorum decision of `opledger_domain::approval` is met. The
//! signer verifies every stored signature again against its own pinned keys before it signs.

use crate::operations::{Operation, parse_risk_flag};
use crate::shared::record_security_event;
use crate::transition::{TransitionRequest, transition_in};
use crate::trust::{StoredDecision, decisions, newest_trust, trust_from_row};
use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::amount::Amount;
use opledger_domain::approval::quorum::{self, Counted};
use opledger_domain::approval::{
    ApprovalStatement, Decision, OperationFacts, Refusal, TrustStatement, Verdict,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{AssetCode, PayloadHash};
use opledger_domain::policy::ApprovalPolicy;
use opledger_domain::risk::RiskFlags;
use opledger_domain::state::{Actor, OperationState};
use opledger_webhook::screening::{self, Screening, StoredScreening};
use sqlx::PgConnection;

/// A signed decision to record.
#[derive(Debug, Clone)]
pub struct Approve<'a> {
    /// The API key that submitted it (kept in the record and the transition log).
    pub approver_id: &'a str,
    /// The decoded approval statement (its tenant and operation are the request's: the caller
    /// checked them).
    pub statement: ApprovalStatement,
    /// The approver's signature over the statement's canonical bytes (which carry the risk flags
    /// the approver acknowledges).
    pub signature: &'a [u8],
}

/// What an approval did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approved {
    /// The operation's state afterwards: REQUESTED or APPROVED (or later, on a repeat).
    pub state: OperationState,
    /// Distinct approvers so far.
    pub approvals: u32,
    /// Distinct approvers the policy requires.
    pub required: u32,
    /// True when this approver key had approved before; nothing was recorded again.
    pub already_approved: bool,
    /// When this approver's approval was recorded.
    pub approved_at: DateTime<Utc>,
}

/// A pending operation with its approval count.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The operation (in REQUESTED).
    pub operation: Operation,
    /// Distinct approvers so far.
    pub approvals: u32,
}

/// The policy of one asset under the tenant's newest trust statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetPolicy {
    /// The rules.
    pub policy: ApprovalPolicy,
    /// The trust statement's version.
    pub version: u64,
    /// True when approvals count only after a KYT pass signed by a KYT key of the trust
    /// statement.
    pub kyt_pass_required: bool,
}

/// What a decision needs to know about the operation, read under its row lock.
#[derive(sqlx::FromRow)]
struct Decidable {
    state: String,
    stored_hash: Vec<u8>,
    flags: Vec<String>,
    asset: String,
    amount: String,
    trust_version: Option<i64>,
    trust_statement: Option<Vec<u8>>,
    trust_signature: Option<Vec<u8>>,
}

impl Store {
    /// The tenant's policy for `asset` under its newest trust statement.
    pub async fn approval_policy(
        &self,
        tenant_id: TenantId,
        asset: &AssetCode,
    ) -> Result<AssetPolicy> {
        let trust = self
            .trust_statement(tenant_id)
            .await?
            .ok_or(StoreError::TrustMissing)?
            .decode()?;
        Ok(AssetPolicy {
            policy: trust.policy(asset),
            version: trust.version(),
            kyt_pass_required: trust.kyt_required(asset),
        })
    }

    /// Records a signed approval of the stored payload hash and, when the quorum is met, moves
    /// the operation to APPROVED in the same transaction.
    ///
    /// Refusals change nothing, except that a hash mismatch or a signature that does not verify
    /// is recorded as a security event.
    pub async fn approve(&self, request: &Approve<'_>) -> Result<Approved> {
        let s = &request.statement;
        let (mut tx, locked) = self.begin_decision(request, Decision::Approve).await?;
        let (state, trust, op) = (locked.state, &locked.trust, locked.facts(s));
        let existing: Option<(DateTime<Utc>,)> = sqlx::query_as(
            "SELECT created_at FROM approvals WHERE tenant_id = $1 AND op_id = $2 \
             AND decision = 'APPROVE' AND (approver_key_id = $3 OR approver_id = $4)",
        )
        .bind(s.tenant_id.as_uuid())
        .bind(s.operation_id.as_uuid())
        .bind(s.approver_key_id.to_hex())
        .bind(request.approver_id)
        .fetch_optional(&mut *tx)
        .await?;
        let required = trust.policy(op.asset).required_for(op.amount);
        if state != OperationState::Requested {
            // A repeat of an approval that already counted is answered, not refused.
            return match existing {
                Some((approved_at,)) => {
                    let approvals = count(&mut tx, trust, &op).await?;
                    Ok(Approved {
                        state,
                        approvals,
                        required,
                        already_approved: true,
                        approved_at,
                    })
                }
                None => Err(StoreError::NotPending { state }),
            };
        }
        let missing = s.acknowledged.missing_from(locked.flags);
        if !missing.is_empty() {
            return Err(StoreError::RiskFlagsNotAcknowledged {
                flags: missing.iter().collect(),
            });
        }
        if trust.kyt_required(op.asset)
            && screened(&mut tx, trust, s.tenant_id, s.operation_id).await? != Screening::Passed
        {
            return Err(StoreError::KytPassRequired);
        }
        let (approved_at, already_approved) = match existing {
            Some((at,)) => (at, true),
            None => (insert_decision(&mut tx, request).await?, false),
        };
        let approvals = count(&mut tx, trust, &op).await?;
        let mut state = OperationState::Requested;
        if approvals >= required {
            let reason = format!("approved by {approvals} of {required} required approvers");
            let mut move_it = TransitionRequest::new(
                s.tenant_id,
                s.operation_id,
                OperationState::Requested,
                OperationState::Approved,
                Actor::Approvals,
                request.approver_id,
                &reason,
            );
            move_it.expected_hash = Some(s.payload_hash);
            transition_in(&mut tx, &move_it).await?;
            state = OperationState::Approved;
        }
        opledger_failpoint::hit("approve.before_commit");
        tx.commit().await?;
        opledger_failpoint::hit("approve.after_commit");
        Ok(Approved {
            state,
            approvals,
            required,
            already_approved,
            approved_at,
        })
    }

    /// Records a signed rejection of a REQUESTED operation and releases its hold, exactly once,
    /// in one transaction.
    pub async fn reject(&self, request: &Approve<'_>, reason: &str) -> Result<()> {
        let s = &request.statement;
        let (mut tx, locked) = self.begin_decision(request, Decision::Reject).await?;
        let state = locked.state;
        if state != OperationState::Requested {
            return Err(StoreError::NotPending { state });
        }
        insert_decision(&mut tx, request).await?;
        let move_it = TransitionRequest::new(
            s.tenant_id,
            s.operation_id,
            OperationState::Requested,
            OperationState::Rejected,
            Actor::Approvals,
            request.approver_id,
            reason,
        );
        match transition_in(&mut tx, &move_it).await {
            Ok(_) => {}
            Err(StoreError::Conflict {
                current: Some(state),
            }) => return Err(StoreError::NotPending { state }),
            Err(other) => return Err(other),
        }
        tx.commit().await?;
        Ok(())
    }

    /// Opens a decision's transaction: locks the operation and checks the statement's payload
    /// hash and signature. A refusal is committed (its security event stays) and returned.
    async fn begin_decision(
        &self,
        request: &Approve<'_>,
        want: Decision,
    ) -> Result<(sqlx::Transaction<'static, sqlx::Postgres>, Locked)> {
        let mut tx = self.pool.begin().await?;
        let checked = match lock(&mut tx, request).await {
            Ok(locked) => verified(&mut tx, request, &locked, want)
                .await
                .map(|_| locked),
            Err(e) => Err(e),
        };
        match checked {
            Ok(locked) => Ok((tx, locked)),
            Err(e @ (StoreError::HashMismatch | StoreError::ApprovalRefused(_))) => {
                tx.commit().await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// REQUESTED operations of the tenant, oldest first, after `after`, with the number of
    /// distinct approver keys whose signed approvals verify.
    pub async fn pending_approvals(
        &self,
        tenant_id: TenantId,
        after: Option<OperationId>,
        limit: u32,
    ) -> Result<Vec<Pending>> {
        let operations = self.list_requested(tenant_id, after, limit).await?;
        let mut conn = self.pool.acquire().await?;
        let trust = match newest_trust(&mut conn, tenant_id).await? {
            Some(stored) => Some(stored.decode()?),
            None => None,
        };
        let mut out = Vec::with_capacity(operations.len());
        for operation in operations {
            let approvals = match &trust {
                Some(trust) => {
                    let op = OperationFacts {
                        tenant_id,
                        operation_id: operation.op_id,
                        payload_hash: operation.payload_hash,
                        asset: &operation.payload.asset,
                        amount: operation.payload.amount,
                        risk_flags: operation.risk_flags.iter().copied().collect(),
                    };
                    count(&mut conn, trust, &op).await?
                }
                None => 0,
            };
            out.push(Pending {
                operation,
                approvals,
            });
        }
        Ok(out)
    }
}

/// The operation as a decision sees it, read under its row lock.
struct Locked {
    state: OperationState,
    payload_hash: PayloadHash,
    flags: RiskFlags,
    asset: AssetCode,
    amount: Amount,
    trust: TrustStatement,
}

impl Locked {
    fn facts(&self, s: &ApprovalStatement) -> OperationFacts<'_> {
        OperationFacts {
            tenant_id: s.tenant_id,
            operation_id: s.operation_id,
            payload_hash: self.payload_hash,
            asset: &self.asset,
            amount: self.amount,
            risk_flags: self.flags,
        }
    }
}

/// Locks the operation and reads what a decision is checked against; refuses a statement whose
/// payload hash is not the stored one (recording a security event).
async fn lock(tx: &mut PgConnection, request: &Approve<'_>) -> Result<Locked> {
    let s = &request.statement;
    let row: Option<Decidable> = sqlx::query_as(
        "SELECT o.state, o.payload_hash AS stored_hash, o.risk_flags AS flags, p.asset, \
           p.amount::text AS amount, t.version AS trust_version, \
           t.statement AS trust_statement, t.signature AS trust_signature \
         FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
         LEFT JOIN LATERAL (SELECT version, statement, signature FROM trust_statements ts \
           WHERE ts.tenant_id = o.tenant_id ORDER BY version DESC LIMIT 1) t ON true \
         WHERE o.tenant_id = $1 AND o.op_id = $2 FOR UPDATE OF o",
    )
    .bind(s.tenant_id.as_uuid())
    .bind(s.operation_id.as_uuid())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(row) = row else {
        return Err(StoreError::NotFound { what: "withdrawal" });
    };
    let payload_hash =
        PayloadHash::try_from(row.stored_hash.as_slice()).map_err(|_| StoreError::Corrupt {
            what: "payload hash",
        })?;
    if payload_hash != s.payload_hash {
        record_security_event(
            tx,
            s.tenant_id,
            Some(s.operation_id),
            "APPROVAL_HASH_MISMATCH",
            Actor::Approvals,
            request.approver_id,
            "approval named a payload hash that is not the stored one",
        )
        .await?;
        return Err(StoreError::HashMismatch);
    }
    let trust = match (row.trust_version, row.trust_statement, row.trust_signature) {
        (Some(version), Some(statement), Some(signature)) => {
            trust_from_row((version, statement, signature))?.decode()?
        }
        _ => return Err(StoreError::TrustMissing),
    };
    Ok(Locked {
        state: crate::row::state(&row.state)?,
        payload_hash,
        flags: row
            .flags
            .iter()
            .map(|f| parse_risk_flag(f))
            .collect::<Result<RiskFlags>>()?,
        asset: AssetCode::parse(&row.asset).map_err(|_| StoreError::Corrupt { what: "asset" })?,
        amount: Amount::parse(&row.amount).map_err(|_| StoreError::Corrupt { what: "amount" })?,
        trust,
    })
}

/// Refuses a decision whose signature does not verify against the trust statement, or whose
/// decision is not the one asked for; a signature that does not verify is a security event.
async fn verified(
    tx: &mut PgConnection,
    request: &Approve<'_>,
    locked: &Locked,
    want: Decision,
) -> Result<Counted> {
    let s = &request.statement;
    if s.decision != want {
        return Err(StoreError::ApprovalRefused(Refusal::OtherOperation {
            key_id: s.approver_key_id,
        }));
    }
    let facts = quorum::ApprovalFacts {
        statement: *s,
        signature: request.signature,
    };
    match quorum::check(&locked.trust, &locked.facts(s), &facts) {
        Ok(counted) => Ok(counted),
        Err(refusal) => {
            if matches!(
                refusal,
                Refusal::BadSignature { .. }
                    | Refusal::OtherOperation { .. }
                    | Refusal::NotAnApprover { .. }
            ) {
                record_security_event(
                    tx,
                    s.tenant_id,
                    Some(s.operation_id),
                    "APPROVAL_SIGNATURE_INVALID",
                    Actor::Approvals,
                    request.approver_id,
                    "an approval statement's signature does not verify with the key it names",
                )
                .await?;
            }
            Err(StoreError::ApprovalRefused(refusal))
        }
    }
}

async fn insert_decision(tx: &mut PgConnection, request: &Approve<'_>) -> Result<DateTime<Utc>> {
    let s = &request.statement;
    let acknowledged: Vec<&str> = s.acknowledged.iter().map(|f| f.as_str()).collect();
    let version = i64::try_from(s.policy_version).map_err(|_| StoreError::Corrupt {
        what: "policy version",
    })?;
    let (at,): (DateTime<Utc>,) = sqlx::query_as(
        "INSERT INTO approvals (tenant_id, op_id, approver_id, payload_hash, acknowledged_flags, \
           approver_key_id, decision, policy_version, signature) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING created_at",
    )
    .bind(s.tenant_id.as_uuid())
    .bind(s.operation_id.as_uuid())
    .bind(request.approver_id)
    .bind(s.payload_hash.as_bytes().as_slice())
    .bind(&acknowledged)
    .bind(s.approver_key_id.to_hex())
    .bind(s.decision.as_str())
    .bind(version)
    .bind(request.signature)
    .fetch_one(&mut *tx)
    .await?;
    Ok(at)
}

/// Distinct approver keys whose stored approvals count under the trust statement. Signatures are
/// verified when this service records a decision (`verified`), not again here: this count only
/// decides REQUESTED -> APPROVED, and the signer verifies every stored signature itself before it
/// signs. Rows that cannot count (no statement, revoked or unknown key) are left out.
async fn count(
    conn: &mut PgConnection,
    trust: &TrustStatement,
    op: &OperationFacts<'_>,
) -> Result<u32> {
    let rows: Vec<StoredDecision> = decisions(conn, op.tenant_id, op.operation_id).await?;
    let counted: Vec<Counted> = rows
        .iter()
        .filter_map(|r| r.statement(op.tenant_id, op.operation_id))
        .filter_map(|s| quorum::classify(trust, op, &s).ok())
        .collect();
    Ok(match quorum::tally(trust, op, &counted) {
        Verdict::Met { approvers, .. } | Verdict::Short { approvers, .. } => approvers,
        Verdict::Rejected { .. } => 0,
    })
}

/// The verdict on the operation's stored screening results: only results signed by a KYT key of
/// the trust statement count (`opledger_webhook::screening::judge`, the signer's rule); a
/// misplaced signed result counts as no pass (the signer refuses it as tampering).
async fn screened(
    conn: &mut PgConnection,
    trust: &TrustStatement,
    tenant_id: TenantId,
    op_id: OperationId,
) -> Result<Screening> {
    let rows = crate::trust::signed_screenings(conn, tenant_id, op_id).await?;
    let stored: Vec<StoredScreening<'_>> = rows.iter().map(|r| r.as_stored()).collect();
    Ok(screening::judge(trust, op_id, &stored).unwrap_or(Screening::Missing))
}
