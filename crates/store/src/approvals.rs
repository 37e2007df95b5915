//! Approvals bound to the payload hash, approval policies, and rejections.
//!
//! An approval is recorded only for the operation's stored payload hash; the operation moves to
//! APPROVED through [`crate::transition::transition_in`] (a conditional update that also checks
//! the hash) once the tenant's policy counts enough distinct approvers.

use crate::operations::{Operation, RiskFlag};
use crate::transition::{TransitionRequest, transition_in};
use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::amount::Amount;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{AssetCode, PayloadHash};
use opledger_domain::policy::{ApprovalPolicy, ApprovalRule};
use opledger_domain::state::{Actor, OperationState};
use sqlx::PgConnection;

/// An approval request.
#[derive(Debug, Clone)]
pub struct Approve<'a> {
    /// The operation's tenant (the approver's tenant).
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The approver (an API key id): one approval per approver counts.
    pub approver_id: &'a str,
    /// The payload hash the approver reviewed.
    pub payload_hash: PayloadHash,
    /// Risk flags the approver acknowledges.
    pub acknowledged: &'a [RiskFlag],
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
    /// True when this approver had approved before; nothing was recorded again.
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

/// What an approval needs to know about the operation, read under its row lock.
#[derive(sqlx::FromRow)]
struct Approvable {
    state: String,
    stored_hash: Vec<u8>,
    flags: Vec<String>,
    asset: String,
    amount: String,
}

impl Store {
    /// The tenant's policy for `asset` (one approver for every amount when none is set).
    pub async fn approval_policy(
        &self,
        tenant_id: TenantId,
        asset: &AssetCode,
    ) -> Result<ApprovalPolicy> {
        let mut conn = self.pool.acquire().await?;
        policy(&mut conn, tenant_id, asset).await
    }

    /// Replaces the tenant's rules for `asset` in one transaction.
    pub async fn set_approval_policy(
        &self,
        tenant_id: TenantId,
        asset: &AssetCode,
        policy: &ApprovalPolicy,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM approval_rules WHERE tenant_id = $1 AND asset = $2")
            .bind(tenant_id.as_uuid())
            .bind(asset.as_str())
            .execute(&mut *tx)
            .await?;
        for rule in policy.rules() {
            sqlx::query(
                "INSERT INTO approval_rules (tenant_id, asset, min_amount, required_approvals) \
                 VALUES ($1, $2, $3::numeric, $4)",
            )
            .bind(tenant_id.as_uuid())
            .bind(asset.as_str())
            .bind(rule.min_amount.to_string())
            .bind(i32::try_from(rule.required_approvals).unwrap_or(i32::MAX))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Records an approval of the stored payload hash and, when the policy is met, moves the
    /// operation to APPROVED in the same transaction.
    ///
    /// Refusals change nothing except that a hash mismatch is recorded as a security event.
    pub async fn approve(&self, request: &Approve<'_>) -> Result<Approved> {
        let mut tx = self.pool.begin().await?;
        let row: Option<Approvable> = sqlx::query_as(
            "SELECT o.state, o.payload_hash AS stored_hash, o.risk_flags AS flags, p.asset, \
               p.amount::text AS amount \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             WHERE o.tenant_id = $1 AND o.op_id = $2 FOR UPDATE OF o",
        )
        .bind(request.tenant_id.as_uuid())
        .bind(request.op_id.as_uuid())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(Approvable {
            state,
            stored_hash,
            flags,
            asset,
            amount,
        }) = row
        else {
            return Err(StoreError::NotFound { what: "withdrawal" });
        };
        let state: OperationState = state
            .parse()
            .map_err(|_| StoreError::Corrupt { what: "state" })?;
        if stored_hash.as_slice() != request.payload_hash.as_bytes().as_slice() {
            record_security_event(
                &mut tx,
                request.tenant_id,
                Some(request.op_id),
                "APPROVAL_HASH_MISMATCH",
                Actor::Approvals,
                request.approver_id,
                "approval named a payload hash that is not the stored one",
            )
            .await?;
            tx.commit().await?;
            return Err(StoreError::HashMismatch);
        }
        let existing: Option<(DateTime<Utc>,)> = sqlx::query_as(
            "SELECT created_at FROM approvals WHERE tenant_id = $1 AND op_id = $2 AND approver_id = $3",
        )
        .bind(request.tenant_id.as_uuid())
        .bind(request.op_id.as_uuid())
        .bind(request.approver_id)
        .fetch_optional(&mut *tx)
        .await?;
        let asset = AssetCode::parse(&asset).map_err(|_| StoreError::Corrupt { what: "asset" })?;
        let amount = Amount::parse(&amount).map_err(|_| StoreError::Corrupt { what: "amount" })?;
        let required = policy(&mut tx, request.tenant_id, &asset)
            .await?
            .required_for(amount);
        if state != OperationState::Requested {
            // A repeat of an approval that already counted is answered, not refused.
            return match existing {
                Some((approved_at,)) => {
                    let approvals = count(&mut tx, request.tenant_id, request.op_id).await?;
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
        let missing: Vec<RiskFlag> = flags
            .iter()
            .map(|f| RiskFlag::parse(f))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .filter(|f| !request.acknowledged.contains(f))
            .collect();
        if !missing.is_empty() {
            return Err(StoreError::RiskFlagsNotAcknowledged { flags: missing });
        }
        let (approved_at, already_approved) = match existing {
            Some((at,)) => (at, true),
            None => {
                let acknowledged: Vec<&str> =
                    request.acknowledged.iter().map(|f| f.as_str()).collect();
                let (at,): (DateTime<Utc>,) = sqlx::query_as(
                    "INSERT INTO approvals (tenant_id, op_id, approver_id, payload_hash, acknowledged_flags) \
                     VALUES ($1, $2, $3, $4, $5) RETURNING created_at",
                )
                .bind(request.tenant_id.as_uuid())
                .bind(request.op_id.as_uuid())
                .bind(request.approver_id)
                .bind(stored_hash.as_slice())
                .bind(&acknowledged)
                .fetch_one(&mut *tx)
                .await?;
                (at, false)
            }
        };
        let approvals = count(&mut tx, request.tenant_id, request.op_id).await?;
        let mut state = OperationState::Requested;
        if approvals >= required {
            let reason = format!("approved by {approvals} of {required} required approvers");
            let mut move_it = TransitionRequest::new(
                request.tenant_id,
                request.op_id,
                OperationState::Requested,
                OperationState::Approved,
                Actor::Approvals,
                request.approver_id,
                &reason,
            );
            move_it.expected_hash = Some(request.payload_hash);
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

    /// Rejects a REQUESTED operation and releases its hold, exactly once.
    pub async fn reject(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        let request = TransitionRequest::new(
            tenant_id,
            op_id,
            OperationState::Requested,
            OperationState::Rejected,
            Actor::Approvals,
            actor_id,
            reason,
        );
        match self.transition(&request).await {
            Ok(_) => Ok(()),
            Err(StoreError::Conflict {
                current: Some(state),
            }) => Err(StoreError::NotPending { state }),
            Err(other) => Err(other),
        }
    }

    /// REQUESTED operations of the tenant, oldest first, after `after`, with approval counts.
    pub async fn pending_approvals(
        &self,
        tenant_id: TenantId,
        after: Option<OperationId>,
        limit: u32,
    ) -> Result<Vec<Pending>> {
        let operations = self.list_requested(tenant_id, after, limit).await?;
        let ids: Vec<uuid::Uuid> = operations.iter().map(|o| o.op_id.as_uuid()).collect();
        let counts: Vec<(uuid::Uuid, i64)> = sqlx::query_as(
            "SELECT op_id, count(*) FROM approvals WHERE tenant_id = $1 AND op_id = ANY($2) \
             GROUP BY op_id",
        )
        .bind(tenant_id.as_uuid())
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(operations
            .into_iter()
            .map(|operation| {
                let n = counts
                    .iter()
                    .find(|(id, _)| *id == operation.op_id.as_uuid())
                    .map_or(0, |(_, n)| *n);
                Pending {
                    operation,
                    approvals: u32::try_from(n).unwrap_or(u32::MAX),
                }
            })
            .collect())
    }
}

async fn policy(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    asset: &AssetCode,
) -> Result<ApprovalPolicy> {
    let rows: Vec<(String, i32)> = sqlx::query_as(
        "SELECT min_amount::text, required_approvals FROM approval_rules \
         WHERE tenant_id = $1 AND asset = $2",
    )
    .bind(tenant_id.as_uuid())
    .bind(asset.as_str())
    .fetch_all(&mut *conn)
    .await?;
    if rows.is_empty() {
        return Ok(ApprovalPolicy::default());
    }
    let rules = rows
        .into_iter()
        .map(|(min, required)| {
            Ok(ApprovalRule {
                min_amount: Amount::parse(&min).map_err(|_| StoreError::Corrupt {
                    what: "approval rule",
                })?,
                required_approvals: u32::try_from(required).map_err(|_| StoreError::Corrupt {
                    what: "approval rule",
                })?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    ApprovalPolicy::new(rules).map_err(|_| StoreError::Corrupt {
        what: "approval policy",
    })
}

async fn count(conn: &mut PgConnection, tenant_id: TenantId, op_id: OperationId) -> Result<u32> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM approvals WHERE tenant_id = $1 AND op_id = $2")
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .fetch_one(&mut *conn)
            .await?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Appends a security event in the caller's transaction. `detail` must be a fixed description.
pub(crate) async fn record_security_event(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: Option<OperationId>,
    kind: &str,
    actor: Actor,
    actor_id: &str,
    detail: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO security_events (tenant_id, op_id, kind, actor, actor_id, detail) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(tenant_id.as_uuid())
    .bind(op_id.map(|o| o.as_uuid()))
    .bind(kind)
    .bind(actor.as_str())
    .bind(actor_id)
    .bind(detail)
    .execute(&mut *conn)
    .await?;
    tracing::warn!(kind, actor = actor.as_str(), "security event recorded");
    Ok(())
}
