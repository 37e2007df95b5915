//! The signed-bytes gate (`docs/serialization.md`): attempts are persisted held back and released
//! for submission only once a commit made after theirs was seen acknowledged; the signer's sweep
//! probes and releases the ones left held back.

use super::attempts::Attempt;
use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use std::time::Duration;

impl Store {
    /// The signed-bytes gate, step two: releases attempts of `tenant_id`/`op_id` for submission
    /// after the caller saw the commit that persisted them acknowledged. A failure leaves them
    /// held back (the signer's sweep, [`Store::release_held`], releases them later) and is not
    /// an error of the signing: the attempts are persisted.
    pub(super) async fn release_acknowledged(
        &self,
        attempts: &mut [Attempt],
        tenant_id: TenantId,
        op_id: OperationId,
    ) {
        let keys: Vec<(TenantId, OperationId, u32)> = attempts
            .iter()
            .map(|a| (tenant_id, op_id, a.attempt))
            .collect();
        if self.release(&keys).await.is_ok() {
            for attempt in attempts {
                attempt.released = true;
            }
        }
    }

    /// Releases `keys` (tenant, operation, attempt number) for submission. Call this ONLY after
    /// seeing acknowledged a commit that was made after the attempts' own commit (their signing
    /// commit, or a probe: [`Store::release_held`]): with synchronous replication that proves
    /// they reached the standby. Releasing is idempotent.
    ///
    /// The release itself commits asynchronously (`synchronous_commit` off for its own
    /// transaction only): it waits for no flush and no standby. Its durability does not matter,
    /// only that of the attempts it releases, which is already proven: a release lost in a crash
    /// or a promotion leaves the attempt held back until the sweep probes and releases it again,
    /// and bytes sent under a lost release are the same stored bytes, sent again at most.
    pub async fn release(&self, keys: &[(TenantId, OperationId, u32)]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let (tenants, ops, numbers) = unzip_attempt_keys(keys)?;
        sqlx::query(
            "WITH quick AS (SELECT set_config('synchronous_commit', 'off', true)) \
             UPDATE attempt_releases SET released_at = now() FROM quick \
             WHERE (tenant_id, op_id, attempt) IN \
                   (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int4[])) \
               AND released_at IS NULL",
        )
        .bind(tenants)
        .bind(ops)
        .bind(numbers)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The signer's sweep: attempts persisted at least `min_age` ago (database clock) and still
    /// held back, because the answer to their signing commit was lost or their release failed.
    /// First a probe is committed on their release rows (`probed_at`); only if that commit is
    /// acknowledged are they released, in a second transaction. The probe's commit comes after
    /// the attempts' in the write-ahead log, so its acknowledgement proves theirs. Returns how
    /// many were released.
    pub async fn release_held(&self, min_age: Duration, limit: u32) -> Result<usize> {
        let min_age_ms = i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
        // Tenant by tenant, so that each claim stays within one tenant (docs/distribution.md).
        let tenants: Vec<(uuid::Uuid,)> = sqlx::query_as(
            "SELECT DISTINCT tenant_id FROM attempt_releases WHERE released_at IS NULL LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut released = 0;
        for (tenant,) in tenants {
            let probed: Vec<(uuid::Uuid, i32)> = sqlx::query_as(
                "UPDATE attempt_releases r SET probed_at = now() \
                 FROM (SELECT h.tenant_id, h.op_id, h.attempt FROM attempt_releases h \
                         JOIN tx_attempts a USING (tenant_id, op_id, attempt) \
                        WHERE h.tenant_id = $3 AND h.released_at IS NULL \
                          AND a.created_at < now() - make_interval(secs => $1::float8 / 1000) \
                        ORDER BY a.created_at LIMIT $2 FOR UPDATE OF h SKIP LOCKED) held \
                 WHERE (r.tenant_id, r.op_id, r.attempt) = (held.tenant_id, held.op_id, held.attempt) \
                 RETURNING r.op_id, r.attempt",
            )
            .bind(min_age_ms)
            .bind(i64::from(limit))
            .bind(tenant)
            .fetch_all(&self.pool)
            .await?;
            opledger_failpoint::hit("release.after_probe");
            let tenant = TenantId::from_uuid(tenant);
            let keys = probed
                .into_iter()
                .map(|(o, a)| {
                    let number =
                        u32::try_from(a).map_err(|_| StoreError::Corrupt { what: "attempt" })?;
                    Ok((tenant, OperationId::from_uuid(o), number))
                })
                .collect::<Result<Vec<_>>>()?;
            self.release(&keys).await?;
            released += keys.len();
        }
        Ok(released)
    }

    /// [`Store::release_held`] for one operation, now, whatever the age of its held-back
    /// attempts: a probe committed on their release rows, then (that commit acknowledged) their
    /// release. Rows another session holds (the sweep probing them) are skipped. Returns the
    /// numbers of the attempts it released.
    pub async fn release_held_of(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<u32>> {
        let probed: Vec<(i32,)> = sqlx::query_as(
            "UPDATE attempt_releases r SET probed_at = now() \
             FROM (SELECT attempt FROM attempt_releases \
                    WHERE tenant_id = $1 AND op_id = $2 AND released_at IS NULL \
                    FOR UPDATE SKIP LOCKED) held \
             WHERE (r.tenant_id, r.op_id, r.attempt) = ($1, $2, held.attempt) \
             RETURNING r.attempt",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_all(&self.pool)
        .await?;
        opledger_failpoint::hit("release.after_probe");
        let numbers = probed
            .into_iter()
            .map(|(a,)| u32::try_from(a).map_err(|_| StoreError::Corrupt { what: "attempt" }))
            .collect::<Result<Vec<_>>>()?;
        let keys: Vec<_> = numbers.iter().map(|n| (tenant_id, op_id, *n)).collect();
        self.release(&keys).await?;
        Ok(numbers)
    }
}

fn unzip_attempt_keys(
    keys: &[(TenantId, OperationId, u32)],
) -> Result<(Vec<uuid::Uuid>, Vec<uuid::Uuid>, Vec<i32>)> {
    let mut tenants = Vec::with_capacity(keys.len());
    let mut ops = Vec::with_capacity(keys.len());
    let mut numbers = Vec::with_capacity(keys.len());
    for (tenant, op, number) in keys {
        tenants.push(tenant.as_uuid());
        ops.push(op.as_uuid());
        numbers.push(i32::try_from(*number).map_err(|_| StoreError::Corrupt { what: "attempt" })?);
    }
    Ok((tenants, ops, numbers))
}
