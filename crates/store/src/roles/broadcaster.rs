//! The store as the broadcaster and chain watcher (`opledger_broadcaster` login): the send queue,
//! inclusions, confirmations, re-opened releases.

use crate::broadcast::{AppliedRelease, ReleaseReopened, Watching};
use crate::pass::WatchLease;
use crate::queue::{BackOff, BackoffSummary, Queued};
use crate::transition::Inclusion;
use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};

super::role_handle! {
    /// The store as the broadcaster and chain watcher (`opledger_broadcaster` login): the send
    /// queue, inclusions, confirmations, re-opened releases: exactly the calls that service makes.
    BroadcasterStore, broadcaster
}

impl BroadcasterStore {
    /// See [`Store::confirm_many`].
    pub async fn confirm_many(
        &self,
        items: &[(crate::transition::TransitionRequest<'_>, Inclusion)],
    ) -> Result<Vec<bool>> {
        self.store.confirm_many(items).await
    }

    /// See [`Store::record_reorg_floor`].
    pub async fn record_reorg_floor(&self, network: &str, floor_block: u64) -> Result<()> {
        self.store.record_reorg_floor(network, floor_block).await
    }

    /// See [`Store::recent_inclusion_blocks`].
    pub async fn recent_inclusion_blocks(
        &self,
        network: &str,
        from_block: u64,
        to_block: u64,
    ) -> Result<Vec<(u64, String)>> {
        self.store
            .recent_inclusion_blocks(network, from_block, to_block)
            .await
    }

    /// See [`Store::inclusions_in`].
    pub async fn inclusions_in(
        &self,
        network: &str,
        blocks: &[(u64, String)],
    ) -> Result<Vec<Inclusion>> {
        self.store.inclusions_in(network, blocks).await
    }

    /// See [`Store::reopen`].
    pub async fn reopen(&self, inclusion: &Inclusion, actor_id: &str) -> Result<()> {
        self.store.reopen(inclusion, actor_id).await
    }

    /// See [`Store::applied_releases`].
    pub async fn applied_releases(
        &self,
        network: &str,
        from_block: u64,
        to_block: u64,
    ) -> Result<Vec<AppliedRelease>> {
        self.store
            .applied_releases(network, from_block, to_block)
            .await
    }

    /// See [`Store::reopen_release`].
    pub async fn reopen_release(
        &self,
        release: &AppliedRelease,
        actor_id: &str,
        owner: &str,
    ) -> Result<ReleaseReopened> {
        self.store.reopen_release(release, actor_id, owner).await
    }

    /// See [`Store::watching`].
    pub async fn watching(&self, network: &str, limit: u32) -> Result<Vec<Watching>> {
        self.store.watching(network, limit).await
    }

    /// See [`Store::attempt_counts`].
    pub async fn attempt_counts(
        &self,
        ops: &[(TenantId, OperationId)],
    ) -> Result<std::collections::HashMap<(TenantId, OperationId), usize>> {
        self.store.attempt_counts(ops).await
    }

    /// See [`Store::clear_hints`].
    pub async fn clear_hints(&self, ops: &[(TenantId, OperationId)]) -> Result<()> {
        self.store.clear_hints(ops).await
    }

    /// See [`Store::stuck`].
    pub async fn stuck(
        &self,
        network: &str,
        older_than_secs: u64,
        limit: u32,
    ) -> Result<Vec<(TenantId, OperationId)>> {
        self.store.stuck(network, older_than_secs, limit).await
    }

    /// See [`Store::watch_lease`].
    pub fn watch_lease(&self, network: &str) -> WatchLease {
        self.store.watch_lease(network)
    }

    /// See [`Store::next_due`].
    pub async fn next_due(&self, limit: u32) -> Result<Vec<Queued>> {
        self.store.next_due(limit).await
    }

    /// See [`Store::back_off`].
    pub async fn back_off(&self, b: &BackOff<'_>) -> Result<bool> {
        self.store.back_off(b).await
    }

    /// See [`Store::backoff_summary`].
    pub async fn backoff_summary(&self) -> Result<BackoffSummary> {
        self.store.backoff_summary().await
    }
}

super::shared_calls!(
    BroadcasterStore:
    attempts,
    confirm,
    escalate,
    pass_locks,
    record_security_event,
    trace_context,
    transition,
);
