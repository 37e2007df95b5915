//! What the workers read: the due operations (`Due`, queued fairly by [`crate::queue`]), BROADCAST
//! operations with their attempts for the watcher, unresolved ones for the reconciler, inclusions
//! and escalations.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;

/// An operation the broadcaster should move: APPROVED (sign it first) or SIGNED (submit its
/// stored bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// APPROVED, SIGNING (lease expired) or SIGNED.
    pub state: OperationState,
    /// Its network id.
    pub network: String,
}

/// A BROADCAST operation as the watcher judges it: its attempts (oldest first) and what the
/// approved payload pays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watching {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The payload's destination (0x address text): never logged.
    pub destination: String,
    /// The payload's amount, minimal units.
    pub amount: u128,
    /// Every released attempt, oldest first (a held-back one is left out until its release:
    /// [`Store::attempts_of`]).
    pub attempts: Vec<crate::signing::Attempt>,
    /// True when a webhook asked the watcher to look at it now.
    pub hinted: bool,
}

impl Store {
    /// BROADCAST operations on `network` with their attempts: those a webhook hinted at first,
    /// then the oldest change first.
    pub async fn watching(&self, network: &str, limit: u32) -> Result<Vec<Watching>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, String, bool)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id, p.destination, p.amount::text, h.op_id IS NOT NULL \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             LEFT JOIN watch_hints h USING (tenant_id, op_id) \
             WHERE o.state = 'BROADCAST' AND p.network = $1 \
             ORDER BY h.op_id IS NULL, o.updated_at LIMIT $2",
        )
        .bind(network)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let keys: Vec<(TenantId, OperationId)> = rows
            .iter()
            .map(|(t, o, ..)| (TenantId::from_uuid(*t), OperationId::from_uuid(*o)))
            .collect();
        let mut attempts = self.attempts_of(&keys).await?;
        rows.into_iter()
            .map(|(tenant, op, destination, amount, hinted)| {
                let (tenant_id, op_id) = (TenantId::from_uuid(tenant), OperationId::from_uuid(op));
                Ok(Watching {
                    tenant_id,
                    op_id,
                    destination,
                    amount: amount
                        .parse()
                        .map_err(|_| StoreError::Corrupt { what: "amount" })?,
                    attempts: attempts.remove(&(tenant_id, op_id)).unwrap_or_default(),
                    hinted,
                })
            })
            .collect()
    }

    /// How many attempts each of `ops` has now (for re-reading after a chain reading).
    pub async fn attempt_counts(
        &self,
        ops: &[(TenantId, OperationId)],
    ) -> Result<std::collections::HashMap<(TenantId, OperationId), usize>> {
        let (tenants, op_ids) = crate::shared::unzip_keys(ops);
        let rows: Vec<(uuid::Uuid, uuid::Uuid, i64)> = sqlx::query_as(
            "SELECT a.tenant_id, a.op_id, count(*) FROM tx_attempts a \
             WHERE (a.tenant_id, a.op_id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[])) \
             GROUP BY a.tenant_id, a.op_id",
        )
        .bind(tenants)
        .bind(op_ids)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(t, o, n)| {
                (
                    (TenantId::from_uuid(t), OperationId::from_uuid(o)),
                    usize::try_from(n).unwrap_or(usize::MAX),
                )
            })
            .collect())
    }

    /// Forgets the webhook hints of `ops` (the watcher has looked at them).
    pub async fn clear_hints(&self, ops: &[(TenantId, OperationId)]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let (tenants, op_ids) = crate::shared::unzip_keys(ops);
        sqlx::query(
            "DELETE FROM watch_hints \
             WHERE (tenant_id, op_id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[]))",
        )
        .bind(tenants)
        .bind(op_ids)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// An operation whose outcome the reconciler must establish: UNKNOWN, or BROADCAST without news
/// for longer than the caller's staleness window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// UNKNOWN or BROADCAST.
    pub state: OperationState,
    /// Its network id.
    pub network: String,
}

impl Store {
    /// UNKNOWN operations, and BROADCAST ones unchanged for `stale_secs`, oldest change first.
    pub async fn unresolved(&self, stale_secs: u64, limit: u32) -> Result<Vec<Unresolved>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, String)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id, o.state, p.network FROM withdrawal_ops o \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             WHERE o.state = 'UNKNOWN' \
                OR (o.state = 'BROADCAST' AND o.updated_at <= now() - $1::bigint * interval '1 second') \
             ORDER BY o.updated_at LIMIT $2",
        )
        .bind(i64::try_from(stale_secs).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(tenant, op, state, network)| {
                Ok(Unresolved {
                    tenant_id: TenantId::from_uuid(tenant),
                    op_id: OperationId::from_uuid(op),
                    state: state
                        .parse()
                        .map_err(|_| StoreError::Corrupt { what: "state" })?,
                    network,
                })
            })
            .collect()
    }
}

pub use crate::transition::Inclusion;

impl Store {
    /// Moves an operation from `from` (BROADCAST or UNKNOWN) to CONFIRMED, settling its hold, and
    /// records where it was included, in one transaction.
    pub async fn confirm(
        &self,
        request: &crate::transition::TransitionRequest<'_>,
        inclusion: &Inclusion,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        crate::transition::transition_in(&mut tx, request).await?;
        insert_inclusion(&mut tx, inclusion).await?;
        tx.commit().await?;
        Ok(())
    }

    /// [`Store::confirm`] for several operations in ONE transaction (one durable commit, and the
    /// balance rows their settlements share are locked once), set-based: three statements for
    /// the whole batch, whatever its size. Each item moves only if its row is still in its `from`
    /// state: an item another worker already moved is skipped (`false` in its place) and the
    /// others still commit. Any other error (a refused transition, a missing operation, the same
    /// operation twice) rolls back every item.
    pub async fn confirm_many(
        &self,
        items: &[(crate::transition::TransitionRequest<'_>, Inclusion)],
    ) -> Result<Vec<bool>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // Rows are locked in one order by every batch, so two batches cannot deadlock on them.
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by_key(|&i| (items[i].0.tenant_id.as_uuid(), items[i].0.op_id.as_uuid()));
        let sorted: Vec<_> = order.iter().map(|&i| (&items[i].0, &items[i].1)).collect();
        let mut tx = self.pool.begin().await?;
        // One statement locks the rows, one moves them with their log rows and inclusions.
        let moves = crate::transition::move_many_in(&mut tx, &sorted).await?;
        // The settlements last, in one statement: the balance rows they share (which every
        // create of the same source account also needs) are locked for the settlements and the
        // commit only.
        let effects: Vec<_> = sorted
            .iter()
            .zip(&moves)
            .filter(|(_, (moved, _))| *moved)
            .map(|((request, _), (_, effect))| (request.tenant_id, request.op_id, *effect))
            .collect();
        crate::ledger::apply_hold_effects(&mut tx, &effects).await?;
        tx.commit().await?;
        let mut moved = vec![false; items.len()];
        for (&i, (did, _)) in order.iter().zip(&moves) {
            moved[i] = *did;
        }
        Ok(moved)
    }

    /// Records that the chain watcher of `network` no longer re-checks inclusions at or below
    /// `floor_block` for reorganizations (its pinned block minus its window). Signers keep a
    /// retiring wallet while a withdrawal it signed is CONFIRMED above the floor.
    pub async fn record_reorg_floor(&self, network: &str, floor_block: u64) -> Result<()> {
        let floor =
            i64::try_from(floor_block).map_err(|_| StoreError::Corrupt { what: "block" })?;
        sqlx::query(
            "INSERT INTO chain_reorg_floors (network, floor_block) VALUES ($1, $2) \
             ON CONFLICT (network) DO UPDATE SET floor_block = excluded.floor_block, \
               updated_at = now() \
             WHERE chain_reorg_floors.floor_block <> excluded.floor_block",
        )
        .bind(network)
        .bind(floor)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The distinct blocks (number, hash) holding confirmed inclusions on `network` from
    /// `from_block` to `to_block` (both included), lowest first: what a reorganization check must
    /// look at, one row per block however many withdrawals each holds.
    ///
    /// The distinct blocks are walked in the live-inclusions index, one probe each (a busy
    /// chain's window holds thousands of inclusions and a few dozen blocks), and each is kept if
    /// one of its inclusions is a CONFIRMED operation on `network`. `to_block` bounds the walk
    /// for the blocks of other networks, whose numbers may run far ahead.
    pub async fn recent_inclusion_blocks(
        &self,
        network: &str,
        from_block: u64,
        to_block: u64,
    ) -> Result<Vec<(u64, String)>> {
        let bound = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let rows: Vec<(i64, String)> = sqlx::query_as(
            "WITH RECURSIVE b (block_number, block_hash) AS ( \
               (SELECT i.block_number, i.block_hash FROM inclusions i \
                 WHERE i.reorged_at IS NULL AND i.block_number >= $2 AND i.block_number <= $3 \
                 ORDER BY i.block_number, i.block_hash LIMIT 1) \
               UNION ALL \
               SELECT n.block_number, n.block_hash FROM b, LATERAL ( \
                 SELECT i.block_number, i.block_hash FROM inclusions i \
                  WHERE i.reorged_at IS NULL \
                    AND (i.block_number, i.block_hash) > (b.block_number, b.block_hash) \
                    AND i.block_number <= $3 \
                  ORDER BY i.block_number, i.block_hash LIMIT 1) n) \
             SELECT b.block_number, b.block_hash FROM b \
             WHERE EXISTS (SELECT 1 FROM inclusions i \
                 JOIN withdrawal_ops o USING (tenant_id, op_id) \
                 JOIN withdrawal_payloads p USING (tenant_id, op_id) \
                 WHERE i.reorged_at IS NULL AND i.block_number = b.block_number \
                   AND i.block_hash = b.block_hash AND o.state = 'CONFIRMED' AND p.network = $1) \
             ORDER BY b.block_number, b.block_hash",
        )
        .bind(network)
        .bind(bound(from_block))
        .bind(bound(to_block))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(block, hash)| {
                let block =
                    u64::try_from(block).map_err(|_| StoreError::Corrupt { what: "block" })?;
                Ok((block, hash))
            })
            .collect()
    }

    /// The confirmed inclusions on `network` in exactly these blocks (number, hash), lowest first.
    pub async fn inclusions_in(
        &self,
        network: &str,
        blocks: &[(u64, String)],
    ) -> Result<Vec<Inclusion>> {
        if blocks.is_empty() {
            return Ok(Vec::new());
        }
        let numbers = blocks
            .iter()
            .map(|(n, _)| i64::try_from(*n).map_err(|_| StoreError::Corrupt { what: "block" }))
            .collect::<Result<Vec<i64>>>()?;
        let hashes: Vec<&str> = blocks.iter().map(|(_, h)| h.as_str()).collect();
        let rows: Vec<(uuid::Uuid, uuid::Uuid, String, i64, String)> = sqlx::query_as(
            "SELECT i.tenant_id, i.op_id, i.tx_hash, i.block_number, i.block_hash FROM inclusions i \
             JOIN withdrawal_ops o USING (tenant_id, op_id) \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             WHERE i.reorged_at IS NULL AND o.state = 'CONFIRMED' AND p.network = $1 \
               AND (i.block_number, i.block_hash) IN \
                   (SELECT * FROM unnest($2::int8[], $3::text[])) \
             ORDER BY i.block_number",
        )
        .bind(network)
        .bind(numbers)
        .bind(hashes)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(tenant, op, tx_hash, block, block_hash)| {
                Ok(Inclusion {
                    tenant_id: TenantId::from_uuid(tenant),
                    op_id: OperationId::from_uuid(op),
                    tx_hash,
                    block_number: u64::try_from(block)
                        .map_err(|_| StoreError::Corrupt { what: "block" })?,
                    block_hash,
                })
            })
            .collect()
    }

    /// A reorganization removed the inclusion: CONFIRMED -> BROADCAST (the settlement is reopened
    /// as a hold) and the inclusion marked, in one transaction.
    pub async fn reopen(&self, inclusion: &Inclusion, actor_id: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let request = crate::transition::TransitionRequest::new(
            inclusion.tenant_id,
            inclusion.op_id,
            OperationState::Confirmed,
            OperationState::Broadcast,
            opledger_domain::state::Actor::ChainWatcher,
            actor_id,
            "inclusion block no longer canonical (reorganization)",
        );
        crate::transition::transition_in(&mut tx, &request).await?;
        sqlx::query(
            "UPDATE inclusions SET reorged_at = now() \
             WHERE tenant_id = $1 AND op_id = $2 AND reorged_at IS NULL",
        )
        .bind(inclusion.tenant_id.as_uuid())
        .bind(inclusion.op_id.as_uuid())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The proof of an applied release as the watcher re-checks it: an attested proposal (migration
/// 28) of a VERIFIED_NOT_SENT operation whose hold is RELEASED, not marked reorganized (migration
/// 31). Hashes as the tables store them (`0x` and 64 lowercase hex digits); never logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedRelease {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The attempt whose inclusion proved that no transfer can happen (our cancel).
    pub tx_hash: String,
    /// Its block.
    pub block_number: u64,
    /// That block's hash when the witness attested it.
    pub block_hash: String,
}

/// What [`Store::reopen_release`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReopened {
    /// VERIFIED_NOT_SENT -> UNKNOWN, the hold OPEN again with its amount moved from available to
    /// held, the proof marked and an escalation recorded.
    Reopened,
    /// The proof is marked, but another witnessed proof of the operation stands: the release
    /// stands on it (and the watcher re-checks that one too).
    ProofMarked,
    /// The proof was marked before (another watcher instance, a retry): nothing changed.
    Already,
}

type AppliedRow = (uuid::Uuid, uuid::Uuid, String, i64, String);

impl Store {
    /// The proofs of applied releases on `network` in blocks `from_block` to `to_block` (both
    /// included), lowest block first: what the watcher's reorganization check re-reads besides
    /// the settlements' blocks.
    pub async fn applied_releases(
        &self,
        network: &str,
        from_block: u64,
        to_block: u64,
    ) -> Result<Vec<AppliedRelease>> {
        let bound = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let rows: Vec<AppliedRow> = sqlx::query_as(
            "SELECT t.tenant_id, t.op_id, t.tx_hash, t.block_number, t.block_hash \
             FROM release_attestations t \
             JOIN withdrawal_ops o USING (tenant_id, op_id) \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             JOIN ledger_holds h USING (tenant_id, op_id) \
             WHERE t.block_number >= $2 AND t.block_number <= $3 AND p.network = $1 \
               AND o.state = 'VERIFIED_NOT_SENT' AND h.status = 'RELEASED' \
               AND NOT EXISTS (SELECT 1 FROM release_reorgs r \
                 WHERE (r.tenant_id, r.op_id, r.tx_hash, r.block_number, r.block_hash) \
                     = (t.tenant_id, t.op_id, t.tx_hash, t.block_number, t.block_hash)) \
             ORDER BY t.block_number, t.block_hash, t.tenant_id, t.op_id",
        )
        .bind(network)
        .bind(bound(from_block))
        .bind(bound(to_block))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(tenant, op, tx_hash, block, block_hash)| {
                Ok(AppliedRelease {
                    tenant_id: TenantId::from_uuid(tenant),
                    op_id: OperationId::from_uuid(op),
                    tx_hash,
                    block_number: u64::try_from(block)
                        .map_err(|_| StoreError::Corrupt { what: "block" })?,
                    block_hash,
                })
            })
            .collect()
    }

    /// A reorganization removed the block of an applied release's proof: through
    /// `opledger_reopen_release` (migration 31; the broadcaster's role only), in one
    /// transaction, the proof is marked so that it never releases again and, unless another
    /// witnessed proof of the operation stands, the operation moves VERIFIED_NOT_SENT -> UNKNOWN
    /// as the chain watcher (checked against the domain's transition table here and the
    /// database's mirror there), its hold is OPEN again with the whole amount moved from
    /// available back to held (available may go negative: a debt that blocks new holds) and an
    /// escalation names `owner` (reason `RELEASE_REORGANIZED`). An operation that is not
    /// VERIFIED_NOT_SENT with its hold RELEASED, or a proof that is no witnessed release of it,
    /// is [`StoreError::Conflict`] (nothing changed).
    pub async fn reopen_release(
        &self,
        release: &AppliedRelease,
        actor_id: &str,
        owner: &str,
    ) -> Result<ReleaseReopened> {
        opledger_domain::state::check_transition(
            OperationState::VerifiedNotSent,
            OperationState::Unknown,
            opledger_domain::state::Actor::ChainWatcher,
        )?;
        let block = i64::try_from(release.block_number)
            .map_err(|_| StoreError::Corrupt { what: "block" })?;
        let answer: std::result::Result<(String,), sqlx::Error> =
            sqlx::query_as("SELECT opledger_reopen_release($1, $2, $3, $4, $5, $6, $7)")
                .bind(release.tenant_id.as_uuid())
                .bind(release.op_id.as_uuid())
                .bind(&release.tx_hash)
                .bind(block)
                .bind(&release.block_hash)
                .bind(actor_id)
                .bind(owner)
                .fetch_one(&self.pool)
                .await;
        match answer {
            Ok((done,)) => match done.as_str() {
                "REOPENED" => Ok(ReleaseReopened::Reopened),
                "PROOF_MARKED" => Ok(ReleaseReopened::ProofMarked),
                "ALREADY" => Ok(ReleaseReopened::Already),
                _ => Err(StoreError::Corrupt {
                    what: "reopen answer",
                }),
            },
            Err(sqlx::Error::Database(db))
                if db.code().as_deref() == Some(NOT_IN_PREREQUISITE_STATE) =>
            {
                let state: Option<(String,)> = sqlx::query_as(
                    "SELECT state FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2",
                )
                .bind(release.tenant_id.as_uuid())
                .bind(release.op_id.as_uuid())
                .fetch_optional(&self.pool)
                .await?;
                let current = state
                    .map(|(s,)| s.parse().map_err(|_| StoreError::Corrupt { what: "state" }))
                    .transpose()?;
                Err(StoreError::Conflict { current })
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// SQLSTATE `object_not_in_prerequisite_state`: `opledger_reopen_release` found no applied
/// release of that proof.
const NOT_IN_PREREQUISITE_STATE: &str = "55000";

impl Store {
    /// BROADCAST operations on `network` whose latest attempt is a transfer (not a cancel)
    /// persisted more than `older_than_secs` ago: candidates for a fee bump.
    pub async fn stuck(
        &self,
        network: &str,
        older_than_secs: u64,
        limit: u32,
    ) -> Result<Vec<(TenantId, OperationId)>> {
        let rows: Vec<(uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
            "SELECT o.tenant_id, o.op_id FROM withdrawal_ops o \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             JOIN LATERAL (SELECT kind, created_at FROM tx_attempts a \
               WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id \
               ORDER BY attempt DESC LIMIT 1) latest ON true \
             WHERE o.state = 'BROADCAST' AND p.network = $1 AND latest.kind <> 'CANCEL' \
               AND latest.created_at <= now() - $2::bigint * interval '1 second' \
             ORDER BY latest.created_at LIMIT $3",
        )
        .bind(network)
        .bind(i64::try_from(older_than_secs).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(t, o)| (TenantId::from_uuid(t), OperationId::from_uuid(o)))
            .collect())
    }
}

impl Store {
    /// Moves an operation to FAILED_TERMINAL (hold kept) and records its owner and reason code,
    /// in one transaction.
    pub async fn escalate(
        &self,
        request: &crate::transition::TransitionRequest<'_>,
        owner: &str,
        reason_code: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        crate::transition::transition_in(&mut tx, request).await?;
        sqlx::query("INSERT INTO escalations (tenant_id, op_id, owner, reason_code) VALUES ($1, $2, $3, $4)")
            .bind(request.tenant_id.as_uuid())
            .bind(request.op_id.as_uuid())
            .bind(owner)
            .bind(reason_code)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Seconds since the operation last changed state (for escalation windows).
    pub async fn seconds_since_change(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<u64> {
        let (secs,): (f64,) = sqlx::query_as(
            "SELECT extract(epoch FROM now() - updated_at)::float8 FROM withdrawal_ops \
             WHERE tenant_id = $1 AND op_id = $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_one(&self.pool)
        .await?;
        Ok(secs.max(0.0) as u64)
    }
}

/// op id, state, network, age in seconds, escalation owner, escalation reason code.
type ListedRow = (
    uuid::Uuid,
    String,
    String,
    f64,
    Option<String>,
    Option<String>,
);

/// An unresolved operation as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The operation.
    pub op_id: OperationId,
    /// UNKNOWN or FAILED_TERMINAL.
    pub state: OperationState,
    /// Its network id.
    pub network: String,
    /// Seconds in the current state.
    pub age_secs: i64,
    /// Owner and reason code of the latest escalation, if any.
    pub escalation: Option<(String, String)>,
}

impl Store {
    /// UNKNOWN and FAILED_TERMINAL operations of `tenant_id`, oldest first.
    pub async fn unresolved_for_tenant(
        &self,
        tenant_id: TenantId,
        limit: u32,
    ) -> Result<Vec<Listed>> {
        let rows: Vec<ListedRow> = sqlx::query_as(
            "SELECT o.op_id, o.state, p.network, extract(epoch FROM now() - o.updated_at)::float8, \
               e.owner, e.reason_code \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             LEFT JOIN LATERAL (SELECT owner, reason_code FROM escalations x \
               WHERE x.tenant_id = o.tenant_id AND x.op_id = o.op_id \
               ORDER BY escalation_id DESC LIMIT 1) e ON true \
             WHERE o.tenant_id = $1 AND o.state IN ('UNKNOWN', 'FAILED_TERMINAL') \
             ORDER BY o.updated_at LIMIT $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(op, state, network, age, owner, reason)| {
                Ok(Listed {
                    op_id: OperationId::from_uuid(op),
                    state: state
                        .parse()
                        .map_err(|_| StoreError::Corrupt { what: "state" })?,
                    network,
                    age_secs: age.max(0.0) as i64,
                    escalation: owner.zip(reason),
                })
            })
            .collect()
    }
}

async fn insert_inclusion(conn: &mut sqlx::PgConnection, inclusion: &Inclusion) -> Result<()> {
    sqlx::query(
        "INSERT INTO inclusions (tenant_id, op_id, tx_hash, block_number, block_hash) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(inclusion.tenant_id.as_uuid())
    .bind(inclusion.op_id.as_uuid())
    .bind(&inclusion.tx_hash)
    .bind(i64::try_from(inclusion.block_number).map_err(|_| StoreError::Corrupt { what: "block" })?)
    .bind(&inclusion.block_hash)
    .execute(&mut *conn)
    .await?;
    Ok(())
}
