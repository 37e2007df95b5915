//! The store as the approvals service (`opledger_approvals` login): records approvals and
//! rejections.

use crate::approvals::{Approve, Approved, AssetPolicy, Pending};
use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::AssetCode;

super::role_handle! {
    /// The store as the approvals service (`opledger_approvals` login): records approvals and
    /// rejections: exactly the calls that service makes.
    ApprovalsStore, approvals
}

impl ApprovalsStore {
    /// See [`Store::approval_policy`].
    pub async fn approval_policy(
        &self,
        tenant_id: TenantId,
        asset: &AssetCode,
    ) -> Result<AssetPolicy> {
        self.store.approval_policy(tenant_id, asset).await
    }

    /// See [`Store::approve`].
    pub async fn approve(&self, request: &Approve<'_>) -> Result<Approved> {
        self.store.approve(request).await
    }

    /// See [`Store::reject`].
    pub async fn reject(&self, request: &Approve<'_>, reason: &str) -> Result<()> {
        self.store.reject(request, reason).await
    }

    /// See [`Store::pending_approvals`].
    pub async fn pending_approvals(
        &self,
        tenant_id: TenantId,
        after: Option<OperationId>,
        limit: u32,
    ) -> Result<Vec<Pending>> {
        self.store.pending_approvals(tenant_id, after, limit).await
    }
}

super::shared_calls!(ApprovalsStore: trace_context, trust_statement);
