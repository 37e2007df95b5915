//! Applied releases (VERIFIED_NOT_SENT with the hold released) as the watcher re-checks their
//! proofs, and reopening one whose proof a reorganization removed.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;

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
                let current = state.map(|(s,)| crate::row::state(&s)).transpose()?;
                Err(StoreError::Conflict { current })
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// SQLSTATE `object_not_in_prerequisite_state`: `opledger_reopen_release` found no applied
/// release of that proof.
const NOT_IN_PREREQUISITE_STATE: &str = "55000";
