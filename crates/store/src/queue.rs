//! The broadcaster's queue: which due operations to work on next, fairly across tenants, and the
//! back-off of operations a pass could not move.
//!
//! A due operation is APPROVED (to be signed), SIGNED (to be submitted) or SIGNING with an expired
//! lease (its signer died mid-claim). [`Store::next_due`] takes every tenant's due operations in
//! turn (each tenant's oldest first, then each tenant's second oldest, ...) and skips operations
//! whose back-off has not expired, so neither a tenant with many withdrawals nor withdrawals that
//! keep being refused can hold back another tenant's. Nothing here changes an operation's state.

use crate::broadcast::Due;
use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use std::time::Duration;

/// Exponential back-off with a cap: how long an operation waits after consecutive passes that
/// could not move it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
}

impl Backoff {
    /// Back-off from `base`, doubling, never longer than `max` (nor shorter than `base`).
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max: max.max(base),
        }
    }

    /// The wait after the `failures`-th consecutive failed pass: none after the first (one
    /// failed call, a signer restart or a reset connection, is retried at the next pass), then
    /// `base`, `2 base`, `4 base`, ... up to `max`. Saturates instead of overflowing.
    pub fn delay(&self, failures: u32) -> Duration {
        let Some(doublings) = failures.checked_sub(2) else {
            return Duration::ZERO;
        };
        // 2^31 times any base of a millisecond or more is already past any sensible cap.
        let factor = 1_u32.checked_shl(doublings).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }
}

/// A due operation and how many consecutive passes failed to move it so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// The operation.
    pub due: Due,
    /// Consecutive failed passes (0: not in back-off).
    pub failures: u32,
}

/// A pass that could not move an operation: record it and when to try again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackOff<'a> {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// Consecutive failed passes, this one included (at least 1).
    pub failures: u32,
    /// How long from now it is skipped.
    pub retry_in: Duration,
    /// Why, from the broadcaster's fixed vocabulary: UPPER_SNAKE, at most 64 characters (a gRPC
    /// code or an `ErrorInfo` reason), never a message or an identifier.
    pub reason: &'a str,
}

/// Operations in back-off, for the broadcaster's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackoffSummary {
    /// Due operations whose back-off has not expired.
    pub waiting: i64,
    /// The most consecutive failed passes of any due operation (0 when none).
    pub max_failures: i64,
}

/// The predicate of a due operation `o` (the old queue's, kept): the local signer's withdrawals
/// only (a custodian's are its executor's).
macro_rules! due {
    () => {
        "o.executor = 'local_signer' AND (o.state IN ('APPROVED', 'SIGNED') \
          OR (o.state = 'SIGNING' AND o.lease_expires_at <= now()))"
    };
}

impl Store {
    /// Up to `limit` due operations, fairly across tenants: ranked by their turn within their
    /// tenant (fewest failed passes first, then oldest change), then by age, so every tenant with
    /// a due operation gets one before any gets a second, and a tenant's new withdrawal does not
    /// queue behind its own retries. Operations whose back-off has not expired are left out.
    ///
    /// Reads take no lock: several broadcasters may pick the same operation, which is safe
    /// because signing is idempotent, only stored bytes are submitted and the state moves by
    /// compare-and-swap.
    pub async fn next_due(&self, limit: u32) -> Result<Vec<Queued>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, String, i32)> = sqlx::query_as(concat!(
            "WITH due AS ( \
               SELECT o.tenant_id, o.op_id, o.state, o.updated_at, p.network, \
                 coalesce(b.failures, 0) AS failures, \
                 row_number() OVER (PARTITION BY o.tenant_id \
                   ORDER BY coalesce(b.failures, 0), o.updated_at, o.op_id) AS turn \
               FROM withdrawal_ops o \
               JOIN withdrawal_payloads p USING (tenant_id, op_id) \
               LEFT JOIN broadcast_backoff b USING (tenant_id, op_id) \
               WHERE ",
            due!(),
            " AND (b.next_attempt_at IS NULL OR b.next_attempt_at <= now())) \
             SELECT tenant_id, op_id, state, network, failures FROM due WHERE turn <= $1 \
             ORDER BY turn, updated_at, op_id LIMIT $1"
        ))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(tenant, op, state, network, failures)| {
                Ok(Queued {
                    due: Due {
                        tenant_id: TenantId::from_uuid(tenant),
                        op_id: OperationId::from_uuid(op),
                        state: crate::row::state(&state)?,
                        network,
                    },
                    failures: u32::try_from(failures)
                        .map_err(|_| StoreError::Corrupt { what: "failures" })?,
                })
            })
            .collect()
    }

    /// Records a pass that could not move the operation: it is skipped until `retry_in` from now.
    /// Never shortens a back-off another worker recorded meanwhile. False (nothing recorded) when
    /// the operation is no longer due: it left the queue on its own.
    pub async fn back_off(&self, b: &BackOff<'_>) -> Result<bool> {
        let retry_ms = i64::try_from(b.retry_in.as_millis()).unwrap_or(i64::MAX);
        let failures = i32::try_from(b.failures.max(1)).unwrap_or(i32::MAX);
        let done = sqlx::query(
            "INSERT INTO broadcast_backoff \
               (tenant_id, op_id, failures, next_attempt_at, last_reason, updated_at) \
             SELECT o.tenant_id, o.op_id, $3, \
               now() + least($4::bigint, 31536000000) * interval '1 millisecond', $5, now() \
             FROM withdrawal_ops o \
             WHERE o.tenant_id = $1 AND o.op_id = $2 \
               AND (o.state IN ('APPROVED', 'SIGNED', 'SIGNING')) \
             ON CONFLICT (tenant_id, op_id) DO UPDATE SET \
               failures = greatest(broadcast_backoff.failures, EXCLUDED.failures), \
               next_attempt_at = greatest(broadcast_backoff.next_attempt_at, \
                                          EXCLUDED.next_attempt_at), \
               last_reason = EXCLUDED.last_reason, updated_at = EXCLUDED.updated_at",
        )
        .bind(b.tenant_id.as_uuid())
        .bind(b.op_id.as_uuid())
        .bind(failures)
        .bind(retry_ms)
        .bind(b.reason)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Clears the operation's back-off (it moved, or it was signed at last); true when there was
    /// one. Leaving the due states clears it too, by trigger, whoever made the move.
    pub async fn clear_backoff(&self, tenant_id: TenantId, op_id: OperationId) -> Result<bool> {
        let done = sqlx::query("DELETE FROM broadcast_backoff WHERE tenant_id = $1 AND op_id = $2")
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// How many due operations wait in back-off now, and the longest run of failed passes.
    pub async fn backoff_summary(&self) -> Result<BackoffSummary> {
        let (waiting, max_failures): (i64, i64) = sqlx::query_as(concat!(
            "SELECT count(*) FILTER (WHERE b.next_attempt_at > now()), \
               coalesce(max(b.failures), 0)::bigint \
             FROM broadcast_backoff b JOIN withdrawal_ops o USING (tenant_id, op_id) \
             WHERE ",
            due!()
        ))
        .fetch_one(&self.pool)
        .await?;
        Ok(BackoffSummary {
            waiting,
            max_failures,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_failure_is_retried_at_once_then_the_wait_doubles() {
        let b = Backoff::new(ms(500), ms(60_000));
        let waits: Vec<u64> = (0..=9)
            .map(|n| u64::try_from(b.delay(n).as_millis()).unwrap_or(u64::MAX))
            .collect();
        assert_eq!(
            waits,
            [
                0, 0, 500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000
            ]
        );
    }

    #[test]
    fn the_wait_is_capped_and_never_overflows() {
        let b = Backoff::new(ms(1_000), ms(300_000));
        assert_eq!(b.delay(10), ms(256_000), "the last doubling below the cap");
        for n in [11, 31, 32, 33, 63, 64, 1_000, u32::MAX - 1, u32::MAX] {
            assert_eq!(b.delay(n), ms(300_000), "failures {n}");
        }
        // A huge base saturates instead of overflowing, and the cap still holds.
        let huge = Backoff::new(Duration::MAX, Duration::MAX);
        assert_eq!(huge.delay(2), Duration::MAX);
        assert_eq!(huge.delay(u32::MAX), Duration::MAX);
        // The wait never decreases with more failures.
        let mut last = Duration::ZERO;
        for n in 0..200 {
            let d = b.delay(n);
            assert!(d >= last, "failures {n}: {d:?} < {last:?}");
            last = d;
        }
    }

    #[test]
    fn a_cap_below_the_base_is_the_base() {
        let b = Backoff::new(ms(2_000), ms(100));
        assert_eq!(b.delay(2), ms(2_000));
        assert_eq!(b.delay(50), ms(2_000));
    }
}
