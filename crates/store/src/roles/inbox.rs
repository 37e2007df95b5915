//! The store as the inbox (`opledger_inbox` login): deliveries, work items, operator issues,
//! retention.

use crate::inbox::{Delivery, Endpoint, InboxIssue, InboxSnapshot, Purged, Recorded, WorkTx};
use crate::{Result, Store};
use opledger_domain::ids::TenantId;
use std::time::Duration;

super::role_handle! {
    /// The store as the inbox (`opledger_inbox` login): deliveries, work items, operator issues,
    /// retention: exactly the calls that service makes.
    InboxStore, inbox
}

impl InboxStore {
    /// See [`Store::claim_work`].
    pub async fn claim_work(&self) -> Result<Option<WorkTx>> {
        self.store.claim_work().await
    }

    /// See [`Store::record_delivery`].
    pub async fn record_delivery(&self, delivery: &Delivery<'_>) -> Result<Recorded> {
        self.store.record_delivery(delivery).await
    }

    /// See [`Store::record_deliveries`].
    pub async fn record_deliveries(&self, deliveries: &[Delivery<'_>]) -> Result<Vec<Recorded>> {
        self.store.record_deliveries(deliveries).await
    }

    /// See [`Store::record_webhook_rejection`].
    pub async fn record_webhook_rejection(
        &self,
        tenant_id: Option<TenantId>,
        source: &str,
        endpoint_id_prefix: &str,
        reason: &str,
    ) -> Result<()> {
        self.store
            .record_webhook_rejection(tenant_id, source, endpoint_id_prefix, reason)
            .await
    }

    /// See [`Store::webhook_endpoint`].
    pub async fn webhook_endpoint(&self, endpoint_id: &str) -> Result<Option<Endpoint>> {
        self.store.webhook_endpoint(endpoint_id).await
    }

    /// See [`Store::inbox_issues`].
    pub async fn inbox_issues(&self, tenant_id: TenantId, limit: u32) -> Result<Vec<InboxIssue>> {
        self.store.inbox_issues(tenant_id, limit).await
    }

    /// See [`Store::replay_dead_letter`].
    pub async fn replay_dead_letter(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        self.store
            .replay_dead_letter(tenant_id, inbox_id, actor_id, reason)
            .await
    }

    /// See [`Store::resolve_inbox_issue`].
    pub async fn resolve_inbox_issue(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        self.store
            .resolve_inbox_issue(tenant_id, inbox_id, actor_id, reason)
            .await
    }

    /// See [`Store::inbox_snapshot`].
    pub async fn inbox_snapshot(&self) -> Result<InboxSnapshot> {
        self.store.inbox_snapshot().await
    }

    /// See [`Store::purge_rejection_counts`].
    pub async fn purge_rejection_counts(&self, keep: Duration) -> Result<u64> {
        self.store.purge_rejection_counts(keep).await
    }

    /// See [`Store::purge_inbox_bodies`].
    pub async fn purge_inbox_bodies(
        &self,
        processed: Duration,
        quarantined: Duration,
    ) -> Result<Purged> {
        self.store.purge_inbox_bodies(processed, quarantined).await
    }

    /// See [`Store::wake_parked_work`].
    pub async fn wake_parked_work(&self) -> Result<u64> {
        self.store.wake_parked_work().await
    }

    /// See [`Store::defer_work`].
    pub async fn defer_work(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        reason: &str,
        retry_in: Duration,
    ) -> Result<()> {
        self.store
            .defer_work(tenant_id, inbox_id, reason, retry_in)
            .await
    }

    /// See [`Store::fail_work`].
    pub async fn fail_work(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        error: &str,
        retry_in: Duration,
        max_attempts: i32,
        owner: &str,
    ) -> Result<bool> {
        self.store
            .fail_work(tenant_id, inbox_id, error, retry_in, max_attempts, owner)
            .await
    }
}

super::shared_calls!(InboxStore: trace_context);
