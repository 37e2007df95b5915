//! The retention job: purging old bodies (metadata is kept) and old refused-request counts.

use crate::{Result, Store};
use std::time::Duration;

/// Bodies purged by one retention pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Bodies of processed events and of resolved or old unhandled events.
    pub events: u64,
    /// Quarantined bodies.
    pub quarantined: u64,
}

impl Store {
    /// Deletes refused-request counts older than `keep`; returns how many rows went.
    pub async fn purge_rejection_counts(&self, keep: Duration) -> Result<u64> {
        Ok(sqlx::query(
            "DELETE FROM webhook_rejection_counts \
             WHERE minute < now() - $1::float8 * interval '1 second'",
        )
        .bind(keep.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// Enforces body retention: processed events' bodies after `processed`; UNHANDLED events'
    /// and quarantined bodies after `quarantined` from arrival. Bodies of pending, parked and dead
    /// work are never purged. Metadata (ids, hashes, times) is kept.
    pub async fn purge_inbox_bodies(
        &self,
        processed: Duration,
        quarantined: Duration,
    ) -> Result<Purged> {
        let events = sqlx::query(
            "UPDATE inbox_events e SET body_key_id = NULL, body_nonce = NULL, \
               body_ciphertext = NULL, body_purged_at = now() \
             WHERE e.body_ciphertext IS NOT NULL AND ( \
               (e.kind = 'EVENT' AND EXISTS (SELECT 1 FROM inbox_work w \
                  WHERE w.tenant_id = e.tenant_id AND w.inbox_id = e.inbox_id \
                    AND w.status IN ('DONE', 'RESOLVED') \
                    AND w.updated_at < now() - $1::float8 * interval '1 second')) \
               OR (e.kind = 'UNHANDLED' AND e.received_at < now() - $2::float8 * interval '1 second'))",
        )
        .bind(processed.as_secs_f64())
        .bind(quarantined.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected();
        let quarantined = sqlx::query(
            "UPDATE inbox_quarantine SET body_key_id = NULL, body_nonce = NULL, \
               body_ciphertext = NULL, body_purged_at = now() \
             WHERE body_ciphertext IS NOT NULL \
               AND received_at < now() - $1::float8 * interval '1 second'",
        )
        .bind(quarantined.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(Purged {
            events,
            quarantined,
        })
    }
}
