//! What the broadcaster reads: operations due for signing or submission.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;

/// An operation the broadcaster should move: APPROVED (sign it first) or SIGNED (submit its
/// stored bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// APPROVED or SIGNED.
    pub state: OperationState,
    /// Its network id.
    pub network: String,
}

impl Store {
    /// Up to `limit` APPROVED or SIGNED operations, least recently changed first. Reads take no
    /// lock: several broadcasters may pick the same operation, which is safe because signing is
    /// idempotent, only stored bytes are submitted and the state moves by compare-and-swap.
    pub async fn due_for_broadcast(&self, limit: u32) -> Result<Vec<Due>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, String)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id, o.state, p.network FROM withdrawal_ops o \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             WHERE o.state IN ('APPROVED', 'SIGNED') ORDER BY o.updated_at LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(tenant, op, state, network)| {
                Ok(Due {
                    tenant_id: TenantId::from_uuid(tenant),
                    op_id: OperationId::from_uuid(op),
                    state: state
                        .parse()
                        .map_err(|_| StoreError::Corrupt { what: "state" })?,
                    network,
                })
            })
            .collect()
    }
}

/// A BROADCAST operation and the hashes of all its attempts, latest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InFlight {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// `0x` transaction hashes, latest attempt first.
    pub tx_hashes: Vec<String>,
}

impl Store {
    /// BROADCAST operations on `network` with every attempt's hash (latest first), oldest
    /// change first.
    pub async fn in_flight(&self, network: &str, limit: u32) -> Result<Vec<InFlight>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, Vec<String>)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id, \
               coalesce(array_agg(a.tx_hash ORDER BY a.attempt DESC) \
                 FILTER (WHERE a.tx_hash IS NOT NULL), '{}') \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             LEFT JOIN tx_attempts a USING (tenant_id, op_id) \
             WHERE o.state = 'BROADCAST' AND p.network = $1 \
             GROUP BY o.tenant_id, o.op_id, o.updated_at ORDER BY o.updated_at LIMIT $2",
        )
        .bind(network)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(tenant, op, tx_hashes)| InFlight {
                tenant_id: TenantId::from_uuid(tenant),
                op_id: OperationId::from_uuid(op),
                tx_hashes,
            })
            .collect())
    }
}

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
    /// UNKNOWN operations, and BROADCAST ones unchanged for `stale_secs`, oldest change first.
    pub async fn unresolved(&self, stale_secs: u64, limit: u32) -> Result<Vec<Unresolved>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, String)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id, o.state, p.network FROM withdrawal_ops o \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             WHERE o.state = 'UNKNOWN' \
                OR (o.state = 'BROADCAST' AND o.updated_at <= now() - $1::bigint * interval '1 second') \
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
                    state: state
                        .parse()
                        .map_err(|_| StoreError::Corrupt { what: "state" })?,
                    network,
                })
            })
            .collect()
    }
}
