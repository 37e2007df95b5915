//! An operator's binding of a provider transaction to a `no_lookup` custodian withdrawal
//! (migration 37): once, with the operator's key, the reason and the digest of the list answer it
//! was seen in. The database refuses a withdrawal that is not a `no_lookup` one BROADCAST or
//! UNKNOWN, a second binding, and a provider transaction another withdrawal's answer, record or
//! binding names.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};

/// A binding to record.
#[derive(Clone)]
pub struct NewBinding<'a> {
    /// The provider's id of the transaction.
    pub provider_id: &'a str,
    /// Its status as the list showed it.
    pub status: &'a str,
    /// The hashes the list showed for it (`0x` and 64 lowercase hex digits each).
    pub tx_hashes: &'a [String],
    /// SHA-256 of the list answer it was seen in.
    pub answer_sha256: [u8; 32],
    /// The operator's API key id (its public half).
    pub operator_key_id: &'a str,
    /// Why, 1 to 200 characters.
    pub reason: &'a str,
    /// The executor instance recording it.
    pub executor_id: &'a str,
    /// The record the list showed, in the executor's status names, stored with the binding when
    /// it names a hash: once a transaction was seen, the withdrawal is never released.
    pub record: Option<crate::custodian::NewRecord<'a>>,
}

impl std::fmt::Debug for NewBinding<'_> {
    // The provider id and hashes identify a payment: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewBinding")
            .field("status", &self.status)
            .field("tx_hashes", &self.tx_hashes.len())
            .finish_non_exhaustive()
    }
}

/// What recording a binding did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Recorded.
    Recorded,
    /// Not a `no_lookup` custodian withdrawal BROADCAST or UNKNOWN: nothing recorded.
    NotBindable,
    /// The withdrawal is already bound, or the transaction is another withdrawal's: nothing
    /// recorded.
    Taken,
}

impl Store {
    /// Records `binding` for the withdrawal, as the database's rule allows.
    pub async fn bind_custodian_transaction(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        binding: &NewBinding<'_>,
    ) -> Result<Bound> {
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO custodian_bindings (tenant_id, op_id, provider_id, status, tx_hashes, \
               answer_sha256, operator_key_id, reason, executor_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(binding.provider_id)
        .bind(binding.status)
        .bind(binding.tx_hashes)
        .bind(binding.answer_sha256.as_slice())
        .bind(binding.operator_key_id)
        .bind(binding.reason)
        .bind(binding.executor_id)
        .execute(&mut *tx)
        .await;
        match inserted {
            Ok(_) => {
                if let Some(record) = &binding.record {
                    crate::custodian::insert_record(
                        &mut tx,
                        tenant_id,
                        op_id,
                        record,
                        binding.executor_id,
                    )
                    .await?;
                }
                tx.commit().await?;
                Ok(Bound::Recorded)
            }
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("23505") => {
                Ok(Bound::Taken)
            }
            // The trigger's refusal (and a request row missing: the foreign key).
            Err(sqlx::Error::Database(db))
                if matches!(db.code().as_deref(), Some("23514" | "23503")) =>
            {
                Ok(Bound::NotBindable)
            }
            Err(e) => Err(StoreError::Database(e)),
        }
    }

    /// Which of `provider_ids` another withdrawal of ours accounts for: one of the same tenant
    /// (a `no_lookup` wallet serves one tenant), network, asset, destination and amount as
    /// (`tenant_id`, `op_id`), whose hold is open or settled, and that follows the transaction
    /// (an operator bound it, else its first accepted answer named it: the rule the executor and
    /// the witness follow by). A binding or an answer of any other withdrawal (another
    /// destination or amount, released, or following something else) accounts for nothing,
    /// whoever wrote it: two withdrawals with one destination and amount that cross their
    /// transactions settle and release one each, matching the one payment.
    pub async fn bound_elsewhere(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        provider_ids: &[String],
    ) -> Result<Vec<String>> {
        if provider_ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(sqlx::query_scalar(concat!(
            "SELECT DISTINCT x.provider_id FROM ( \
               SELECT b.tenant_id, b.op_id, b.provider_id FROM custodian_bindings b \
                 WHERE b.tenant_id = $1 AND b.provider_id = ANY($3) \
               UNION SELECT a.tenant_id, a.op_id, a.provider_id FROM custodian_answers a \
                 WHERE a.tenant_id = $1 AND a.provider_id = ANY($3) AND a.answer = 'ACCEPTED' \
             ) x \
             JOIN withdrawal_ops o USING (tenant_id, op_id) \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             JOIN custodian_requests q USING (tenant_id, op_id) \
             JOIN ledger_holds h USING (tenant_id, op_id) \
             JOIN withdrawal_payloads mine ON mine.tenant_id = $1 AND mine.op_id = $2 \
             LEFT JOIN custodian_bindings f ON f.tenant_id = x.tenant_id AND f.op_id = x.op_id \
             LEFT JOIN LATERAL (",
            crate::custodian::answered_transaction!("o", "q"),
            ") n ON true \
             WHERE x.op_id <> $2 AND q.profile = 'no_lookup' AND o.executor = 'custodian' \
               AND coalesce(f.provider_id, n.provider_id) = x.provider_id \
               AND p.network = mine.network AND p.asset = mine.asset \
               AND lower(p.destination) = lower(mine.destination) AND p.amount = mine.amount \
               AND h.status IN ('OPEN', 'SETTLED')"
        ))
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(provider_ids)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Settles a custodian withdrawal on `inclusion` (BROADCAST -> CONFIRMED with its inclusion,
    /// as [`Store::confirm`]) unless another withdrawal's provider record or live inclusion
    /// names the same transaction: one transfer never settles two withdrawals, whatever a
    /// provider (or an operator's binding) says. Settlements of one transaction are taken one at a time.
    pub async fn confirm_custodian(
        &self,
        request: &crate::transition::TransitionRequest<'_>,
        inclusion: &crate::transition::Inclusion,
    ) -> Result<Settled> {
        let mut tx = self.pool.begin().await?;
        if named_elsewhere(&mut tx, request, &inclusion.tx_hash).await? {
            return Ok(Settled::SettlesAnother);
        }
        crate::transition::transition_in(&mut tx, request).await?;
        crate::broadcast::inclusions::insert_inclusion(&mut tx, inclusion).await?;
        tx.commit().await?;
        Ok(Settled::Confirmed)
    }

    /// Settles a custodian withdrawal on a network the executor does not watch, on the
    /// provider's COMPLETED record naming `tx_hash` (`0x` and 64 lowercase hex digits), with the
    /// guard of [`Store::confirm_custodian`]: unless another withdrawal's provider record or live
    /// inclusion names the same transaction. No inclusion is written: the chain was not read.
    pub async fn settle_custodian_unwatched(
        &self,
        request: &crate::transition::TransitionRequest<'_>,
        tx_hash: &str,
    ) -> Result<Settled> {
        let mut tx = self.pool.begin().await?;
        if named_elsewhere(&mut tx, request, tx_hash).await? {
            return Ok(Settled::SettlesAnother);
        }
        crate::transition::transition_in(&mut tx, request).await?;
        tx.commit().await?;
        Ok(Settled::Confirmed)
    }
}

/// Whether a provider record, or a live inclusion (a settlement by any executor, the local
/// signer's included), of a withdrawal other than `request`'s names `tx_hash`, read under a
/// transaction-scoped lock on the hash (settlements of one transaction one at a time).
async fn named_elsewhere(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    request: &crate::transition::TransitionRequest<'_>,
    tx_hash: &str,
) -> Result<bool> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('custodian_tx:' || $1, 0))")
        .bind(tx_hash)
        .execute(&mut **tx)
        .await?;
    let (elsewhere,): (bool,) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM custodian_records r WHERE r.tx_hash = $3 \
           AND (r.tenant_id, r.op_id) <> ($1, $2)) \
         OR EXISTS (SELECT 1 FROM inclusions i WHERE i.tx_hash = $3 AND i.reorged_at IS NULL \
           AND (i.tenant_id, i.op_id) <> ($1, $2))",
    )
    .bind(request.tenant_id.as_uuid())
    .bind(request.op_id.as_uuid())
    .bind(tx_hash)
    .fetch_one(&mut **tx)
    .await?;
    Ok(elsewhere)
}

/// What settling a custodian withdrawal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// CONFIRMED, with its inclusion.
    Confirmed,
    /// Another withdrawal's provider record names the same transaction: nothing changed.
    SettlesAnother,
}
