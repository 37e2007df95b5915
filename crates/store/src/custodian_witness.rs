//! The witness's side of a custodian release (migrations 32 and 34): the executor's proposals it
//! has not decided yet, its attestation of one from its own lookup, and its refusal of one its
//! own lookup contradicts.
//!
//! The queue holds, per custodian withdrawal whose hold is still open and that no attestation
//! names yet, its newest proposal (an older one is the executor's earlier view of the same
//! record), unless the witness refused that one. The release itself is the database's rule
//! (`opledger_release_witnessed`), applied when the executor next moves the withdrawal.

use crate::operations::{Operation, OperationRow, operation_columns};
use crate::witness::parse_hash;
use crate::{Result, Store};
use chrono::{DateTime, Utc};
use opledger_domain::evidence::Hash32;
use opledger_domain::ids::{OperationId, TenantId};
use std::fmt;

/// A proposed custodian release the witness has not decided yet.
#[derive(Clone, PartialEq, Eq)]
pub struct CustodianReleaseToWitness {
    /// The withdrawal: its tenant, id, and the stored payload (network, asset, destination,
    /// amount) the witness looks the provider's record up with.
    pub operation: Operation,
    /// The proposed record.
    pub record_id: i64,
    /// Its status, as stored (the adapters' names).
    pub status: String,
    /// The hash it names (a proposal never should).
    pub tx_hash: Option<Hash32>,
    /// Whether any record of the withdrawal ever named a hash or replaced hashes.
    pub ever_broadcast: bool,
    /// When it was proposed.
    pub proposed_at: DateTime<Utc>,
    /// The provider transaction an operator bound to the withdrawal (`no_lookup`, migration
    /// 37): the witness reads it from its own listing instead of a lookup by our reference.
    pub bound: Option<String>,
    /// Whole seconds since the withdrawal's request was stored (the listing's window).
    pub since_request: i64,
    /// Whole seconds since its last send (none: `None`).
    pub since_last_send: Option<i64>,
}

impl fmt::Debug for CustodianReleaseToWitness {
    // Identifiers (the reference, the destination, a hash) are never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustodianReleaseToWitness")
            .field("status", &self.status)
            .field("tx_hash", &self.tx_hash.map(|_| "<redacted>"))
            .field("ever_broadcast", &self.ever_broadcast)
            .field("proposed_at", &self.proposed_at)
            .finish_non_exhaustive()
    }
}

impl CustodianReleaseToWitness {
    /// Where the page after this proposal starts.
    pub fn cursor(&self) -> CustodianCursor {
        CustodianCursor {
            proposed_at: self.proposed_at,
            tenant_id: self.operation.payload.tenant_id,
            op_id: self.operation.op_id,
            record_id: self.record_id,
        }
    }
}

/// A position in the witness's custodian queue (the last proposal of a page).
#[derive(Clone, PartialEq, Eq)]
pub struct CustodianCursor {
    proposed_at: DateTime<Utc>,
    tenant_id: TenantId,
    op_id: OperationId,
    record_id: i64,
}

impl fmt::Debug for CustodianCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CustodianCursor")
            .field("proposed_at", &self.proposed_at)
            .finish_non_exhaustive()
    }
}

/// What the witness refuses a proposal with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustodianRefusal<'a> {
    /// The reason code (UPPER_SNAKE).
    pub reason: &'a str,
    /// The status of the record its own lookup found, if it found one.
    pub status: Option<&'a str>,
    /// The SHA-256 of the provider's answer it read, if a whole answer arrived.
    pub answer_sha256: Option<[u8; 32]>,
}

#[derive(sqlx::FromRow)]
struct ToWitnessRow {
    #[sqlx(flatten)]
    operation: OperationRow,
    tenant_id: uuid::Uuid,
    record_id: i64,
    record_status: String,
    record_tx_hash: Option<String>,
    ever_broadcast: bool,
    proposed_at: DateTime<Utc>,
    bound: Option<String>,
    since_request: i64,
    since_last_send: Option<i64>,
}

impl ToWitnessRow {
    fn into_release(self) -> Result<CustodianReleaseToWitness> {
        Ok(CustodianReleaseToWitness {
            operation: self
                .operation
                .into_operation(TenantId::from_uuid(self.tenant_id))?,
            record_id: self.record_id,
            status: self.record_status,
            tx_hash: self.record_tx_hash.as_deref().map(parse_hash).transpose()?,
            ever_broadcast: self.ever_broadcast,
            proposed_at: self.proposed_at,
            bound: self.bound,
            since_request: self.since_request,
            since_last_send: self.since_last_send,
        })
    }
}

impl Store {
    /// Up to `limit` proposed custodian releases to witness, in proposal order after `after`
    /// (from the oldest when `None`): per withdrawal whose hold is open and that no attestation
    /// names, its newest proposal, unless the witness refused it. Read a page per pass, round
    /// robin, so that proposals it cannot decide yet never starve the ones behind them.
    pub async fn custodian_releases_to_witness(
        &self,
        after: Option<&CustodianCursor>,
        limit: u32,
    ) -> Result<Vec<CustodianReleaseToWitness>> {
        let rows: Vec<ToWitnessRow> = sqlx::query_as(concat!(
            "SELECT q.* FROM (SELECT DISTINCT ON (c.tenant_id, c.op_id) o.tenant_id, ",
            operation_columns!(),
            ", c.record_id, r.status AS record_status, r.tx_hash AS record_tx_hash, \
               EXISTS (SELECT 1 FROM custodian_records x \
                 WHERE x.tenant_id = c.tenant_id AND x.op_id = c.op_id \
                   AND (x.tx_hash IS NOT NULL OR cardinality(x.replaced_hashes) > 0)) \
                 AS ever_broadcast, \
               c.created_at AS proposed_at, coalesce(b.provider_id, n.provider_id) AS bound, \
               extract(epoch FROM now() - k.created_at)::int8 AS since_request, \
               (SELECT extract(epoch FROM now() - max(s.sent_at))::int8 FROM custodian_sends s \
                 WHERE s.tenant_id = c.tenant_id AND s.op_id = c.op_id) AS since_last_send \
             FROM custodian_release_proposals c \
             JOIN custodian_records r USING (tenant_id, op_id, record_id) \
             JOIN custodian_requests k USING (tenant_id, op_id) \
             LEFT JOIN custodian_bindings b USING (tenant_id, op_id) \
             JOIN withdrawal_ops o USING (tenant_id, op_id) \
             LEFT JOIN LATERAL (",
            crate::custodian::answered_transaction!("o", "k"),
            ") n ON true \
             JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             JOIN ledger_holds h USING (tenant_id, op_id) \
             WHERE h.status = 'OPEN' \
               AND NOT EXISTS (SELECT 1 FROM custodian_release_attestations t \
                 WHERE t.tenant_id = c.tenant_id AND t.op_id = c.op_id) \
             ORDER BY c.tenant_id, c.op_id, c.record_id DESC) q \
             WHERE NOT EXISTS (SELECT 1 FROM custodian_witness_refusals f \
                 WHERE (f.tenant_id, f.op_id, f.record_id) = (q.tenant_id, q.op_id, q.record_id)) \
               AND ($2::timestamptz IS NULL \
                    OR (q.proposed_at, q.tenant_id, q.op_id, q.record_id) > ($2, $3, $4, $5)) \
             ORDER BY q.proposed_at, q.tenant_id, q.op_id, q.record_id LIMIT $1"
        ))
        .bind(i64::from(limit))
        .bind(after.map(|a| a.proposed_at))
        .bind(after.map(|a| a.tenant_id.as_uuid()))
        .bind(after.map(|a| a.op_id.as_uuid()))
        .bind(after.map(|a| a.record_id))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(ToWitnessRow::into_release).collect()
    }

    /// The witness's attestation of proposal `record_id` with the status its own lookup found
    /// and the SHA-256 of the provider's answer (the witness's role only); idempotent.
    pub async fn attest_custodian_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record_id: i64,
        status: &str,
        answer_sha256: &[u8; 32],
        witness_id: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO custodian_release_attestations \
               (tenant_id, op_id, record_id, status, answer_sha256, witness_id) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(record_id)
        .bind(status)
        .bind(answer_sha256.as_slice())
        .bind(witness_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records that the witness refused proposal `record_id` for good (the witness's role only):
    /// it leaves the queue, unattested; the first refusal of a proposal stands.
    pub async fn refuse_custodian_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record_id: i64,
        refusal: &CustodianRefusal<'_>,
        witness_id: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO custodian_witness_refusals \
               (tenant_id, op_id, record_id, reason, status, answer_sha256, witness_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(record_id)
        .bind(refusal.reason)
        .bind(refusal.status)
        .bind(refusal.answer_sha256.as_ref().map(|s| s.as_slice()))
        .bind(witness_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}
