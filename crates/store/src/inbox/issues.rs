//! What an operator must look at: dead letters, quarantined bodies and UNHANDLED events, their
//! replay and resolution (each logged with who and why), and the inbox gauges.

use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::ids::TenantId;
use sqlx::PgConnection;

/// One item an operator must look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxIssue {
    /// The inbox row (the handle for replay and resolve).
    pub inbox_id: i64,
    /// Why it needs an operator.
    pub kind: IssueKind,
    /// Provider label.
    pub source: String,
    /// Declared event type, if any.
    pub event_type: Option<String>,
    /// When it arrived (for a quarantine: the conflicting body).
    pub received_at: DateTime<Utc>,
    /// Owning team (dead letters).
    pub owner: Option<String>,
    /// Machine reason code.
    pub reason: String,
    /// Processing attempts (dead letters).
    pub attempts: i32,
}

/// Why an inbox item needs an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IssueKind {
    /// A work item that exhausted its attempts or failed permanently (`inbox_work.status` DEAD).
    DeadLetter,
    /// A delivery that reused an event id with a different body: kept apart, never processed.
    Quarantined,
    /// A verified event of a type or state nothing handles.
    Unhandled,
}

impl IssueKind {
    /// The name the issue query (and the operator CLI's JSON) uses.
    pub fn as_str(self) -> &'static str {
        match self {
            IssueKind::DeadLetter => "DEAD_LETTER",
            IssueKind::Quarantined => "QUARANTINED",
            IssueKind::Unhandled => "UNHANDLED",
        }
    }

    fn from_row(kind: &str) -> Result<IssueKind> {
        match kind {
            "DEAD_LETTER" => Ok(IssueKind::DeadLetter),
            "QUARANTINED" => Ok(IssueKind::Quarantined),
            "UNHANDLED" => Ok(IssueKind::Unhandled),
            _ => Err(StoreError::Corrupt {
                what: "inbox issue kind",
            }),
        }
    }
}

/// Gauges of the inbox for the metrics endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InboxSnapshot {
    /// Work items due or waiting.
    pub pending: i64,
    /// Work items parked on an operation's state.
    pub parked: i64,
    /// Unresolved dead letters.
    pub dead: i64,
    /// Unresolved quarantined bodies.
    pub quarantined: i64,
    /// Unresolved UNHANDLED events.
    pub unhandled: i64,
    /// Age in seconds of the oldest unresolved dead letter, quarantine or unhandled event.
    pub oldest_unresolved_secs: f64,
}

impl Store {
    /// Dead letters, quarantined bodies and UNHANDLED events of a tenant that nobody resolved yet,
    /// oldest first.
    pub async fn inbox_issues(&self, tenant_id: TenantId, limit: u32) -> Result<Vec<InboxIssue>> {
        type Row = (
            i64,
            String,
            String,
            Option<String>,
            DateTime<Utc>,
            Option<String>,
            Option<String>,
            i32,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT * FROM ( \
               SELECT w.inbox_id, 'DEAD_LETTER' AS kind, e.source, e.event_type, e.received_at, \
                 w.owner, COALESCE(w.outcome, w.last_error) AS reason, w.attempts \
               FROM inbox_work w \
               JOIN inbox_events e ON e.tenant_id = w.tenant_id AND e.inbox_id = w.inbox_id \
               WHERE w.tenant_id = $1 AND w.status = 'DEAD' \
               UNION ALL \
               SELECT q.inbox_id, 'QUARANTINED', e.source, e.event_type, q.received_at, NULL, \
                 'DIFFERENT_BODY', 0 \
               FROM inbox_quarantine q \
               JOIN inbox_events e ON e.tenant_id = q.tenant_id AND e.inbox_id = q.inbox_id \
               WHERE q.tenant_id = $1 AND q.resolved_at IS NULL \
               UNION ALL \
               SELECT inbox_id, 'UNHANDLED', source, event_type, received_at, NULL, \
                 upper(unhandled_reason), 0 \
               FROM inbox_events WHERE tenant_id = $1 AND kind = 'UNHANDLED' AND resolved_at IS NULL \
             ) issues ORDER BY received_at, inbox_id LIMIT $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(
                |(inbox_id, kind, source, event_type, received_at, owner, reason, attempts)| {
                    Ok(InboxIssue {
                        inbox_id,
                        kind: IssueKind::from_row(&kind)?,
                        source,
                        event_type,
                        received_at,
                        owner,
                        reason: reason.unwrap_or_default(),
                        attempts,
                    })
                },
            )
            .collect()
    }

    /// Puts a dead letter back to PENDING with fresh attempts, logging who and why.
    pub async fn replay_dead_letter(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE inbox_work SET status = 'PENDING', attempts = 0, due_at = now(), \
               updated_at = now() \
             WHERE tenant_id = $1 AND inbox_id = $2 AND status = 'DEAD'",
        )
        .bind(tenant_id.as_uuid())
        .bind(inbox_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if done != 1 {
            return Err(StoreError::NotFound {
                what: "dead letter",
            });
        }
        log_action(&mut tx, tenant_id, inbox_id, "REPLAY", actor_id, reason).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Resolves an inbox issue by hand (dead letter, quarantine or UNHANDLED event), logging who
    /// and why. Nothing is applied or deleted: the issue stops paging.
    pub async fn resolve_inbox_issue(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let tenant = tenant_id.as_uuid();
        let dead = sqlx::query(
            "UPDATE inbox_work SET status = 'RESOLVED', updated_at = now() \
             WHERE tenant_id = $1 AND inbox_id = $2 AND status = 'DEAD'",
        )
        .bind(tenant)
        .bind(inbox_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let quarantined = sqlx::query(
            "UPDATE inbox_quarantine SET resolved_at = now(), resolved_by = $3, resolution = $4 \
             WHERE tenant_id = $1 AND inbox_id = $2 AND resolved_at IS NULL",
        )
        .bind(tenant)
        .bind(inbox_id)
        .bind(actor_id)
        .bind(reason)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let unhandled = sqlx::query(
            "UPDATE inbox_events SET resolved_at = now(), resolved_by = $3, resolution = $4 \
             WHERE tenant_id = $1 AND inbox_id = $2 AND kind = 'UNHANDLED' AND resolved_at IS NULL",
        )
        .bind(tenant)
        .bind(inbox_id)
        .bind(actor_id)
        .bind(reason)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if dead + quarantined + unhandled == 0 {
            return Err(StoreError::NotFound {
                what: "unresolved inbox issue",
            });
        }
        log_action(&mut tx, tenant_id, inbox_id, "RESOLVE", actor_id, reason).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The inbox gauges (all tenants).
    pub async fn inbox_snapshot(&self) -> Result<InboxSnapshot> {
        let (pending, parked, dead, quarantined, unhandled, oldest): (
            i64,
            i64,
            i64,
            i64,
            i64,
            Option<f64>,
        ) = sqlx::query_as(
            "SELECT \
               (SELECT count(*) FROM inbox_work WHERE status = 'PENDING'), \
               (SELECT count(*) FROM inbox_work WHERE status = 'PARKED'), \
               (SELECT count(*) FROM inbox_work WHERE status = 'DEAD'), \
               (SELECT count(*) FROM inbox_quarantine WHERE resolved_at IS NULL), \
               (SELECT count(*) FROM inbox_events WHERE kind = 'UNHANDLED' AND resolved_at IS NULL), \
               (SELECT extract(epoch FROM now() - min(t))::float8 FROM ( \
                  SELECT min(updated_at) AS t FROM inbox_work WHERE status = 'DEAD' \
                  UNION ALL SELECT min(received_at) FROM inbox_quarantine WHERE resolved_at IS NULL \
                  UNION ALL SELECT min(received_at) FROM inbox_events \
                    WHERE kind = 'UNHANDLED' AND resolved_at IS NULL) o)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(InboxSnapshot {
            pending,
            parked,
            dead,
            quarantined,
            unhandled,
            oldest_unresolved_secs: oldest.unwrap_or(0.0).max(0.0),
        })
    }
}

async fn log_action(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    inbox_id: i64,
    action: &str,
    actor_id: &str,
    reason: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO inbox_actions (tenant_id, inbox_id, action, actor_id, reason) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(tenant_id.as_uuid())
    .bind(inbox_id)
    .bind(action)
    .bind(actor_id)
    .bind(reason)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
