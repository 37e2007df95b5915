//! Inclusions: confirming operations with where they were included (one or a batch), the
//! watcher's reorganization floor, the blocks and inclusions a reorganization check reads, and
//! reopening an inclusion a reorganization removed.

use crate::transition::Inclusion;
use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;

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

pub(crate) async fn insert_inclusion(
    conn: &mut sqlx::PgConnection,
    inclusion: &Inclusion,
) -> Result<()> {
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
