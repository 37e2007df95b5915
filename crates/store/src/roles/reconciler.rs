//! The store as the reconciler (`opledger_reconciler` login): UNKNOWN operations, release
//! proposals, escalations.

use crate::broadcast::{Listed, Unresolved};
use crate::metrics::Snapshot;
use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::witness::{Principal, ReleaseEvidence};

super::role_handle! {
    /// The store as the reconciler (`opledger_reconciler` login): UNKNOWN operations, release
    /// proposals, escalations: exactly the calls that service makes.
    ReconcilerStore, reconciler
}

impl ReconcilerStore {
    /// See [`Store::unresolved`].
    pub async fn unresolved(&self, stale_secs: u64, limit: u32) -> Result<Vec<Unresolved>> {
        self.store.unresolved(stale_secs, limit).await
    }

    /// See [`Store::seconds_since_change`].
    pub async fn seconds_since_change(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<u64> {
        self.store.seconds_since_change(tenant_id, op_id).await
    }

    /// See [`Store::unresolved_for_tenant`].
    pub async fn unresolved_for_tenant(
        &self,
        tenant_id: TenantId,
        limit: u32,
    ) -> Result<Vec<Listed>> {
        self.store.unresolved_for_tenant(tenant_id, limit).await
    }

    /// See [`Store::metrics_snapshot`].
    pub async fn metrics_snapshot(&self) -> Result<Snapshot> {
        self.store.metrics_snapshot().await
    }

    /// See [`Store::propose_release`].
    pub async fn propose_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        principal: Principal,
        principal_id: &str,
        evidence: &ReleaseEvidence,
    ) -> Result<()> {
        self.store
            .propose_release(tenant_id, op_id, principal, principal_id, evidence)
            .await
    }

    /// See [`Store::release_witnessed`].
    pub async fn release_witnessed(&self, tenant_id: TenantId, op_id: OperationId) -> Result<bool> {
        self.store.release_witnessed(tenant_id, op_id).await
    }

    /// See [`Store::reopened_releases`].
    pub async fn reopened_releases(&self) -> Result<Vec<(String, i64)>> {
        self.store.reopened_releases().await
    }
}

super::shared_calls!(
    ReconcilerStore:
    attempts,
    confirm,
    escalate,
    pass_locks,
    record_security_event,
    trace_context,
    transition,
    withdrawal,
);
