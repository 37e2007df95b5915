//! Releases that need two principals (migration 28): the reconciler's proposals, the witness's
//! attestations and refusals.
//!
//! The database releases the hold of a withdrawal with a signed attempt only when a proposal (the
//! reconciler's role) and an attestation (the witness's role) name the same evidence
//! (`opledger_release_witnessed`, the rule of [`opledger_domain::witness::release_allowed`]);
//! each table is insertable by its own role only. Hashes are stored as `0x` and 64 lowercase hex
//! digits.

use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::evidence::{BlockRef, Hash32};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::witness::{Principal, ReleaseEvidence};

/// A proposed release the witness has not attested yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRelease {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// Its network (from the payload), which names the witness's evidence endpoints.
    pub network: String,
    /// Who proposed it.
    pub principal: Principal,
    /// What the proposal rests on.
    pub evidence: ReleaseEvidence,
    /// When it was proposed.
    pub proposed_at: DateTime<Utc>,
}

/// `0x` and the lowercase hex of a 32-byte hash, as the tables store it.
pub fn hash_text(hash: &Hash32) -> String {
    format!("0x{}", hex::encode(hash))
}

/// A stored hash (`0x` and 64 lowercase hex digits) back to its bytes.
pub(crate) fn parse_hash(text: &str) -> Result<Hash32> {
    let digits = text
        .strip_prefix("0x")
        .ok_or(StoreError::Corrupt { what: "hash" })?;
    let mut out = [0_u8; 32];
    hex::decode_to_slice(digits, &mut out).map_err(|_| StoreError::Corrupt { what: "hash" })?;
    Ok(out)
}

fn block_number(evidence: &ReleaseEvidence) -> Result<i64> {
    i64::try_from(evidence.block.number).map_err(|_| StoreError::OutOfRange {
        what: "block number",
    })
}

type PendingRow = (
    uuid::Uuid,
    uuid::Uuid,
    String,
    String,
    String,
    i64,
    String,
    DateTime<Utc>,
);

impl Store {
    /// Records the proposer's evidence for releasing an operation's hold (the reconciler's role
    /// only); recording the same evidence again changes nothing.
    pub async fn propose_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        principal: Principal,
        principal_id: &str,
        evidence: &ReleaseEvidence,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO release_proposals \
               (tenant_id, op_id, tx_hash, block_number, block_hash, principal, principal_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) \
             ON CONFLICT (tenant_id, op_id, tx_hash, block_number, block_hash) DO NOTHING",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(hash_text(&evidence.tx_hash))
        .bind(block_number(evidence)?)
        .bind(hash_text(&evidence.block.hash))
        .bind(principal.as_str())
        .bind(principal_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Whether the database would release the operation's hold now: it has no signed attempt,
    /// or a proposal and an attestation of the same evidence name one of its attempts.
    pub async fn release_witnessed(&self, tenant_id: TenantId, op_id: OperationId) -> Result<bool> {
        let (witnessed,): (bool,) = sqlx::query_as("SELECT opledger_release_witnessed($1, $2)")
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .fetch_one(&self.pool)
            .await?;
        Ok(witnessed)
    }

    /// Up to `limit` proposals that have no attestation, whose hold is still open and that the
    /// witness has not refused for good, in proposal order after `after` (the last proposal of
    /// the previous page; from the oldest when `None`): the witness's queue, read a page per pass
    /// so that proposals it cannot decide yet never starve the ones behind them.
    pub async fn releases_to_witness(
        &self,
        after: Option<&PendingRelease>,
        limit: u32,
    ) -> Result<Vec<PendingRelease>> {
        let rows: Vec<PendingRow> = sqlx::query_as(
            "SELECT p.tenant_id, p.op_id, pl.network, p.principal, p.tx_hash, p.block_number, \
               p.block_hash, p.created_at \
             FROM release_proposals p \
             JOIN withdrawal_payloads pl USING (tenant_id, op_id) \
             JOIN ledger_holds h USING (tenant_id, op_id) \
             WHERE h.status = 'OPEN' \
               AND NOT EXISTS (SELECT 1 FROM release_attestations t \
                 WHERE (t.tenant_id, t.op_id, t.tx_hash, t.block_number, t.block_hash) \
                     = (p.tenant_id, p.op_id, p.tx_hash, p.block_number, p.block_hash)) \
               AND NOT EXISTS (SELECT 1 FROM witness_refusals r \
                 WHERE (r.tenant_id, r.op_id, r.tx_hash, r.block_number, r.block_hash) \
                     = (p.tenant_id, p.op_id, p.tx_hash, p.block_number, p.block_hash)) \
               AND ($2::timestamptz IS NULL \
                    OR (p.created_at, p.tenant_id, p.op_id, p.tx_hash, p.block_number, \
                        p.block_hash) > ($2, $3, $4, $5, $6, $7)) \
             ORDER BY p.created_at, p.tenant_id, p.op_id, p.tx_hash, p.block_number, \
               p.block_hash \
             LIMIT $1",
        )
        .bind(i64::from(limit))
        .bind(after.map(|a| a.proposed_at))
        .bind(after.map(|a| a.tenant_id.as_uuid()))
        .bind(after.map(|a| a.op_id.as_uuid()))
        .bind(after.map(|a| hash_text(&a.evidence.tx_hash)))
        .bind(after.map(|a| block_number(&a.evidence)).transpose()?)
        .bind(after.map(|a| hash_text(&a.evidence.block.hash)))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(
                |(tenant, op, network, principal, tx_hash, number, block_hash, proposed_at)| {
                    let principal = match principal.as_str() {
                        "reconciler" => Principal::Reconciler,
                        "operator" => Principal::Operator,
                        _ => return Err(StoreError::Corrupt { what: "principal" }),
                    };
                    Ok(PendingRelease {
                        tenant_id: TenantId::from_uuid(tenant),
                        op_id: OperationId::from_uuid(op),
                        network,
                        principal,
                        evidence: ReleaseEvidence {
                            tx_hash: parse_hash(&tx_hash)?,
                            block: BlockRef {
                                number: u64::try_from(number)
                                    .map_err(|_| StoreError::Corrupt { what: "block" })?,
                                hash: parse_hash(&block_hash)?,
                            },
                        },
                        proposed_at,
                    })
                },
            )
            .collect()
    }

    /// The witness's attestation of a proposal's evidence (the witness's role only).
    pub async fn attest_release(&self, pending: &PendingRelease, witness_id: &str) -> Result<()> {
        sqlx::query(
            "INSERT INTO release_attestations \
               (tenant_id, op_id, tx_hash, block_number, block_hash, witness_id) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (tenant_id, op_id, tx_hash, block_number, block_hash) DO NOTHING",
        )
        .bind(pending.tenant_id.as_uuid())
        .bind(pending.op_id.as_uuid())
        .bind(hash_text(&pending.evidence.tx_hash))
        .bind(block_number(&pending.evidence)?)
        .bind(hash_text(&pending.evidence.block.hash))
        .bind(witness_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records that the witness refused a proposal for good (`reason`, an UPPER_SNAKE code): it
    /// leaves the witness's queue and stays unwitnessed, its hold held, for an owner to examine.
    pub async fn refuse_release(
        &self,
        pending: &PendingRelease,
        reason: &str,
        witness_id: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO witness_refusals \
               (tenant_id, op_id, tx_hash, block_number, block_hash, reason, witness_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(pending.tenant_id.as_uuid())
        .bind(pending.op_id.as_uuid())
        .bind(hash_text(&pending.evidence.tx_hash))
        .bind(block_number(&pending.evidence)?)
        .bind(hash_text(&pending.evidence.block.hash))
        .bind(reason)
        .bind(witness_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Seconds since the oldest proposal whose hold is still open and that no attestation
    /// matches (refused ones included); `None` when there is none. The witness's lag.
    pub async fn oldest_unwitnessed_secs(&self) -> Result<Option<f64>> {
        let (age,): (Option<f64>,) = sqlx::query_as(
            "SELECT extract(epoch FROM now() - min(p.created_at))::float8 \
             FROM release_proposals p JOIN ledger_holds h USING (tenant_id, op_id) \
             WHERE h.status = 'OPEN' \
               AND NOT EXISTS (SELECT 1 FROM release_attestations t \
                 WHERE (t.tenant_id, t.op_id, t.tx_hash, t.block_number, t.block_hash) \
                     = (p.tenant_id, p.op_id, p.tx_hash, p.block_number, p.block_hash))",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(age)
    }
}

impl Store {
    /// Operations whose applied release a reorganization reopened (a proof marked in
    /// `release_reorgs`, migration 31), counted by their current state: those not
    /// VERIFIED_NOT_SENT or CONFIRMED again are still being decided, their funds held.
    pub async fn reopened_releases(&self) -> Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as(
            "SELECT o.state, count(*) FROM withdrawal_ops o \
             WHERE EXISTS (SELECT 1 FROM release_reorgs r \
                           WHERE r.tenant_id = o.tenant_id AND r.op_id = o.op_id) \
             GROUP BY o.state ORDER BY o.state",
        )
        .fetch_all(&self.pool)
        .await?)
    }
}

/// The Prometheus text of [`Store::reopened_releases`]: the gauge `opledger_reopened_releases`
/// by current state (the alert rules of `deploy/prometheus/alerts.yml` read it).
pub fn reopened_releases_text(by_state: &[(String, i64)]) -> String {
    let mut out = String::from(
        "# HELP opledger_reopened_releases Operations whose release a reorganization reopened, \
         by current state.\n# TYPE opledger_reopened_releases gauge\n",
    );
    for (state, count) in by_state {
        out.push_str(&format!(
            "opledger_reopened_releases{{state=\"{state}\"}} {count}\n"
        ));
    }
    out
}
