//! What the chain watcher looks at: BROADCAST operations with their released attempts (hinted
//! ones first), attempt counts for re-reading, webhook hints, and operations stuck long enough
//! for a fee bump.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};

/// A BROADCAST operation as the watcher judges it: its attempts (oldest first) and what the
/// approved payload pays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watching {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The payload's destination (0x address text): never logged.
    pub destination: String,
    /// The payload's amount, minimal units.
    pub amount: u128,
    /// Every released attempt, oldest first (a held-back one is left out until its release:
    /// [`Store::attempts_of`]).
    pub attempts: Vec<crate::signing::Attempt>,
    /// True when a webhook asked the watcher to look at it now.
    pub hinted: bool,
}

impl Store {
    /// BROADCAST operations on `network` with their attempts: those a webhook hinted at first,
    /// then the oldest change first.
    pub async fn watching(&self, network: &str, limit: u32) -> Result<Vec<Watching>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, String, bool)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id, p.destination, p.amount::text, h.op_id IS NOT NULL \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             LEFT JOIN watch_hints h USING (tenant_id, op_id) \
             WHERE o.state = 'BROADCAST' AND o.executor = 'local_signer' AND p.network = $1 \
             ORDER BY h.op_id IS NULL, o.updated_at LIMIT $2",
        )
        .bind(network)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let keys: Vec<(TenantId, OperationId)> = rows
            .iter()
            .map(|(t, o, ..)| (TenantId::from_uuid(*t), OperationId::from_uuid(*o)))
            .collect();
        let mut attempts = self.attempts_of(&keys).await?;
        rows.into_iter()
            .map(|(tenant, op, destination, amount, hinted)| {
                let (tenant_id, op_id) = (TenantId::from_uuid(tenant), OperationId::from_uuid(op));
                Ok(Watching {
                    tenant_id,
                    op_id,
                    destination,
                    amount: amount
                        .parse()
                        .map_err(|_| StoreError::Corrupt { what: "amount" })?,
                    attempts: attempts.remove(&(tenant_id, op_id)).unwrap_or_default(),
                    hinted,
                })
            })
            .collect()
    }

    /// How many attempts each of `ops` has now (for re-reading after a chain reading).
    pub async fn attempt_counts(
        &self,
        ops: &[(TenantId, OperationId)],
    ) -> Result<std::collections::HashMap<(TenantId, OperationId), usize>> {
        let (tenants, op_ids) = crate::shared::unzip_keys(ops);
        let rows: Vec<(uuid::Uuid, uuid::Uuid, i64)> = sqlx::query_as(
            "SELECT a.tenant_id, a.op_id, count(*) FROM tx_attempts a \
             WHERE (a.tenant_id, a.op_id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[])) \
             GROUP BY a.tenant_id, a.op_id",
        )
        .bind(tenants)
        .bind(op_ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(t, o, n)| {
                (
                    (TenantId::from_uuid(t), OperationId::from_uuid(o)),
                    usize::try_from(n).unwrap_or(usize::MAX),
                )
            })
            .collect())
    }

    /// Forgets the webhook hints of `ops` (the watcher has looked at them).
    pub async fn clear_hints(&self, ops: &[(TenantId, OperationId)]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let (tenants, op_ids) = crate::shared::unzip_keys(ops);
        sqlx::query(
            "DELETE FROM watch_hints \
             WHERE (tenant_id, op_id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))",
        )
        .bind(tenants)
        .bind(op_ids)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// BROADCAST operations on `network` whose latest attempt is a transfer (not a cancel)
    /// persisted more than `older_than_secs` ago: candidates for a fee bump.
    pub async fn stuck(
        &self,
        network: &str,
        older_than_secs: u64,
        limit: u32,
    ) -> Result<Vec<(TenantId, OperationId)>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id FROM withdrawal_ops o \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             JOIN LATERAL (SELECT kind, created_at FROM tx_attempts a \
               WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id \
               ORDER BY attempt DESC LIMIT 1) latest ON true \
             WHERE o.state = 'BROADCAST' AND p.network = $1 AND latest.kind <> 'CANCEL' \
               AND latest.created_at <= now() - $2::bigint * interval '1 second' \
             ORDER BY latest.created_at LIMIT $3",
        )
        .bind(network)
        .bind(i64::try_from(older_than_secs).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(t, o)| (TenantId::from_uuid(t), OperationId::from_uuid(o)))
            .collect())
    }
}
