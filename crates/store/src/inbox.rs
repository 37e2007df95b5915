//! The webhook inbox: endpoints and their keys, verified deliveries recorded together with their
//! work item in one transaction, the processor's claim-apply-finish transaction (including the
//! watch hints it records), dead letters, and the retention job.
//!
//! This module stores what the ingress verified; it never verifies, decrypts or parses (that is
//! `opledger-webhook`, in the service). Bodies arrive here sealed.
//!
//! Its parts: `sealed` (the sealed body every part stores), `endpoints` (endpoints and their
//! keys), `deliveries` (recording verified deliveries, duplicates, quarantine and refusals),
//! `work` (a claimed item's transaction, parked items and failed attempts), `issues` (dead
//! letters, quarantine and UNHANDLED events for operators, and the gauges) and `retention`
//! (purges). The queue claim itself, one of the serialization points of docs/serialization.md, is
//! here.

mod deliveries;
mod endpoints;
mod issues;
mod retention;
mod sealed;
mod work;

pub use deliveries::{
    Delivery, DeliveryClass, RECORD_DELIVERIES_SQL, RECORD_DELIVERY_SQL, Recorded,
};
pub use endpoints::{Endpoint, NewEndpoint, NewSecret, SecretKind, StoredSecret, new_endpoint_id};
pub use issues::{InboxIssue, InboxSnapshot, IssueKind};
pub use retention::Purged;
pub use sealed::SealedBody;
pub use work::{CreditOutcome, Finish, SignedAttemptRef, WorkItem, WorkTx, deposit_credit_digest};

use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};

/// How many of the oldest due items name the tenants a claim tries, in order. More than the
/// processors that can hold a claim at once, so that some candidate is always unlocked.
const CLAIM_CANDIDATES: i64 = 128;

impl Store {
    /// Claims the next due item (many processors are safe: `SKIP LOCKED`) in a transaction that
    /// will carry its effects; `None` when nothing is due.
    ///
    /// Every claim stays within one tenant, so that a tenant-distributed deployment routes it to
    /// one shard (docs/distribution.md): first the tenants of the oldest due items, oldest first
    /// (a read without locks), then, tenant by tenant, that tenant's oldest due item not locked
    /// by another processor. The order across tenants is the same as before, oldest due item
    /// first.
    pub async fn claim_work(&self) -> Result<Option<WorkTx>> {
        let tenants: Vec<(uuid::Uuid,)> = sqlx::query_as(
            "SELECT tenant_id FROM ( \
               SELECT tenant_id, due_at, inbox_id FROM inbox_work \
               WHERE status = 'PENDING' AND due_at <= now() \
               ORDER BY due_at, inbox_id LIMIT $1) oldest \
             GROUP BY tenant_id ORDER BY min(due_at), min(inbox_id)",
        )
        .bind(CLAIM_CANDIDATES)
        .fetch_all(&self.pool)
        .await?;
        for (tenant,) in tenants {
            if let Some(work) = self.claim_work_of(tenant).await? {
                return Ok(Some(work));
            }
        }
        Ok(None)
    }

    /// Claims the tenant's oldest due item that no other processor holds.
    async fn claim_work_of(&self, tenant: uuid::Uuid) -> Result<Option<WorkTx>> {
        let mut tx = self.pool.begin().await?;
        type Row = (
            i64,
            uuid::Uuid,
            String,
            String,
            i32,
            Option<i16>,
            Option<Vec<u8>>,
            Option<Vec<u8>>,
            i64,
            Option<Vec<u8>>,
            Option<String>,
            Option<uuid::Uuid>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT w.inbox_id, w.tenant_id, e.source, e.event_id, w.attempts, \
               e.body_key_id, e.body_nonce, e.body_ciphertext, \
               extract(epoch FROM e.sent_at)::int8 AS sent_at, e.signature, e.event_type, w.op_id \
             FROM inbox_work w \
             JOIN inbox_events e ON e.tenant_id = w.tenant_id AND e.inbox_id = w.inbox_id \
             WHERE w.tenant_id = $1 AND w.status = 'PENDING' AND w.due_at <= now() \
             ORDER BY w.due_at, w.inbox_id LIMIT 1 FOR UPDATE OF w SKIP LOCKED",
        )
        .bind(tenant)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((
            inbox_id,
            tenant,
            source,
            event_id,
            attempts,
            key_id,
            nonce,
            ciphertext,
            sent_at,
            signature,
            event_type,
            op_id,
        )) = row
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        let body = match (key_id, nonce, ciphertext) {
            (Some(key_id), Some(nonce), Some(ciphertext)) => Some(SealedBody {
                key_id,
                nonce,
                ciphertext,
            }),
            _ => None,
        };
        Ok(Some(WorkTx {
            tx,
            item: WorkItem {
                inbox_id,
                tenant_id: TenantId::from_uuid(tenant),
                source,
                event_id,
                attempts,
                body,
                sent_at,
                signature,
                event_type,
                op_id: op_id.map(OperationId::from_uuid),
            },
        }))
    }
}
