//! Rows every service role writes (security events), and helpers the role modules share.

use crate::Result;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::Actor;
use sqlx::PgConnection;

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

/// The tenant ids and operation ids of `ops`, as two arrays for `unnest`.
pub(crate) fn unzip_keys(ops: &[(TenantId, OperationId)]) -> (Vec<uuid::Uuid>, Vec<uuid::Uuid>) {
    ops.iter().map(|(t, o)| (t.as_uuid(), o.as_uuid())).unzip()
}
