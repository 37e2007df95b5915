//! Unresolved operations and escalations: what the reconciler must resolve, escalating an
//! operation to FAILED_TERMINAL with its owner, and the unresolved operations an operator sees.

use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;

/// An operation whose outcome the reconciler must establish: UNKNOWN, or BROADCAST without news
/// for longer than the caller's staleness window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// UNKNOWN or BROADCAST.
    pub state: OperationState,
    /// Its network id.
    pub network: String,
}

impl Store {
    /// UNKNOWN operations, and BROADCAST ones unchanged for `stale_secs`, oldest change first;
    /// the local signer's only (a custodian's are reconciled from its record by its executor).
    pub async fn unresolved(&self, stale_secs: u64, limit: u32) -> Result<Vec<Unresolved>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, String)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id, o.state, p.network FROM withdrawal_ops o \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             WHERE o.executor = 'local_signer' AND (o.state = 'UNKNOWN' \
                OR (o.state = 'BROADCAST' AND o.updated_at <= now() - $1::bigint * interval '1 second')) \
             ORDER BY o.updated_at LIMIT $2",
        )
        .bind(i64::try_from(stale_secs).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(tenant, op, state, network)| {
                Ok(Unresolved {
                    tenant_id: TenantId::from_uuid(tenant),
                    op_id: OperationId::from_uuid(op),
                    state: crate::row::state(&state)?,
                    network,
                })
            })
            .collect()
    }

    /// Moves an operation to FAILED_TERMINAL (hold kept) and records its owner and reason code,
    /// in one transaction.
    pub async fn escalate(
        &self,
        request: &crate::transition::TransitionRequest<'_>,
        owner: &str,
        reason_code: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        crate::transition::transition_in(&mut tx, request).await?;
        sqlx::query("INSERT INTO escalations (tenant_id, op_id, owner, reason_code) VALUES ($1, $2, $3, $4)")
            .bind(request.tenant_id.as_uuid())
            .bind(request.op_id.as_uuid())
            .bind(owner)
            .bind(reason_code)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Seconds since the operation last changed state (for escalation windows).
    pub async fn seconds_since_change(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<u64> {
        let (secs,): (f64,) = sqlx::query_as(
            "SELECT extract(epoch FROM now() - updated_at)::float8 FROM withdrawal_ops \
             WHERE tenant_id = $1 AND op_id = $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_one(&self.pool)
        .await?;
        Ok(secs.max(0.0) as u64)
    }
}

/// op id, state, network, age in seconds, escalation owner, escalation reason code.
type ListedRow = (
    uuid::Uuid,
    String,
    String,
    f64,
    Option<String>,
    Option<String>,
);

/// An unresolved operation as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The operation.
    pub op_id: OperationId,
    /// UNKNOWN or FAILED_TERMINAL.
    pub state: OperationState,
    /// Its network id.
    pub network: String,
    /// Seconds in the current state.
    pub age_secs: i64,
    /// Owner and reason code of the latest escalation, if any.
    pub escalation: Option<(String, String)>,
}

impl Store {
    /// UNKNOWN and FAILED_TERMINAL operations of `tenant_id`, oldest first.
    pub async fn unresolved_for_tenant(
        &self,
        tenant_id: TenantId,
        limit: u32,
    ) -> Result<Vec<Listed>> {
        let rows: Vec<ListedRow> = sqlx::query_as(
            "SELECT o.op_id, o.state, p.network, extract(epoch FROM now() - o.updated_at)::float8, \
               e.owner, e.reason_code \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             LEFT JOIN LATERAL (SELECT owner, reason_code FROM escalations x \
               WHERE x.tenant_id = o.tenant_id AND x.op_id = o.op_id \
               ORDER BY escalation_id DESC LIMIT 1) e ON true \
             WHERE o.tenant_id = $1 AND o.state IN ('UNKNOWN', 'FAILED_TERMINAL') \
             ORDER BY o.updated_at LIMIT $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(op, state, network, age, owner, reason)| {
                Ok(Listed {
                    op_id: OperationId::from_uuid(op),
                    state: crate::row::state(&state)?,
                    network,
                    age_secs: age.max(0.0) as i64,
                    escalation: owner.zip(reason),
                })
            })
            .collect()
    }
}
