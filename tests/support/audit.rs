//! What the fault harness and the failover suite read back when they audit a tenant: its signed
//! attempts and its holds, as stored.

use opledger_domain::ids::TenantId;
use sqlx::PgPool;
use std::collections::BTreeMap;

/// Every attempt of the tenant: (operation, tx hash, kind, nonce).
pub async fn attempts(
    pool: &PgPool,
    tenant: TenantId,
) -> anyhow::Result<Vec<(uuid::Uuid, String, String, i64)>> {
    Ok(
        sqlx::query_as("SELECT op_id, tx_hash, kind, nonce FROM tx_attempts WHERE tenant_id = $1")
            .bind(tenant.as_uuid())
            .fetch_all(pool)
            .await?,
    )
}

/// Each hold's status by operation id (as text).
pub async fn holds(pool: &PgPool, tenant: TenantId) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(sqlx::query_as::<_, (uuid::Uuid, String)>(
        "SELECT op_id, status FROM ledger_holds WHERE tenant_id = $1",
    )
    .bind(tenant.as_uuid())
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|(id, s)| (id.to_string(), s))
    .collect())
}
