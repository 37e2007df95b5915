//! Attempts as stored and read: their kinds, the rows of `released_attempts` (bytes of released
//! attempts only) and `tx_attempts` (the signer's: every attempt's bytes), and the insert of a new
//! attempt with its held-back release row.

use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::ids::{OperationId, TenantId};
use sqlx::PgConnection;

pub use opledger_domain::evidence::AttemptKind;

/// The kind stored in a row.
fn parse_kind(text: &str) -> Result<AttemptKind> {
    text.parse().map_err(|_| StoreError::Corrupt {
        what: "attempt kind",
    })
}

/// A signed transaction to persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttempt {
    /// Original, fee bump or cancel.
    pub kind: AttemptKind,
    /// Chain id the transaction is signed for.
    pub chain_id: u64,
    /// Sender address, 0x-prefixed lowercase.
    pub sender: String,
    /// The nonce it uses.
    pub nonce: u64,
    /// 0x-prefixed transaction hash.
    pub tx_hash: String,
    /// EIP-2718 bytes: exactly what may be broadcast.
    pub raw_tx: Vec<u8>,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei.
    pub max_fee_per_gas: u128,
    /// Wei.
    pub max_priority_fee_per_gas: u128,
}

/// A persisted attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the original, then 2, 3, ...
    pub attempt: u32,
    /// The network it was signed for.
    pub network: String,
    /// The signed transaction.
    pub signed: NewAttempt,
    /// When it was persisted.
    pub created_at: DateTime<Utc>,
    /// True once the signer has seen this attempt's commit acknowledged (the signed-bytes gate,
    /// `docs/serialization.md`): only released attempts may be submitted to a chain. A held-back
    /// attempt read by a worker ([`Store::attempts`]) carries no bytes: `signed.raw_tx` is empty
    /// (the database gives worker roles the bytes of released attempts only).
    pub released: bool,
}

impl Attempt {
    /// What a reader of the chain judges of this attempt: its bytes, stored kind and stored hash.
    pub fn as_stored(&self) -> opledger_domain::evidence::StoredAttempt<'_> {
        opledger_domain::evidence::StoredAttempt {
            raw: &self.signed.raw_tx,
            kind: self.signed.kind,
            tx_hash: &self.signed.tx_hash,
        }
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct AttemptRow {
    attempt: i32,
    kind: String,
    network: String,
    chain_id: i64,
    sender: String,
    nonce: i64,
    tx_hash: String,
    /// NULL when read through `released_attempts` while held back.
    raw_tx: Option<Vec<u8>>,
    gas_limit: i64,
    max_fee_per_gas: String,
    max_priority_fee_per_gas: String,
    created_at: DateTime<Utc>,
    released: bool,
}

impl AttemptRow {
    pub(super) fn into_attempt(self) -> Result<Attempt> {
        let corrupt = |_| StoreError::Corrupt { what: "attempt" };
        // Bytes are missing only while held back; a released attempt always has them.
        let raw_tx = match (self.raw_tx, self.released) {
            (Some(raw), _) => raw,
            (None, false) => Vec::new(),
            (None, true) => return Err(StoreError::Corrupt { what: "attempt" }),
        };
        Ok(Attempt {
            attempt: u32::try_from(self.attempt).map_err(corrupt)?,
            network: self.network,
            signed: NewAttempt {
                kind: parse_kind(&self.kind)?,
                chain_id: u64::try_from(self.chain_id).map_err(corrupt)?,
                sender: self.sender,
                nonce: u64::try_from(self.nonce).map_err(corrupt)?,
                tx_hash: self.tx_hash,
                raw_tx,
                gas_limit: u64::try_from(self.gas_limit).map_err(corrupt)?,
                max_fee_per_gas: self
                    .max_fee_per_gas
                    .parse()
                    .map_err(|_| StoreError::Corrupt {
                        what: "attempt fee",
                    })?,
                max_priority_fee_per_gas: self.max_priority_fee_per_gas.parse().map_err(|_| {
                    StoreError::Corrupt {
                        what: "attempt fee",
                    }
                })?,
            },
            created_at: self.created_at,
            released: self.released,
        })
    }
}

#[derive(sqlx::FromRow)]
struct KeyedAttemptRow {
    tenant_id: uuid::Uuid,
    op_id: uuid::Uuid,
    #[sqlx(flatten)]
    attempt: AttemptRow,
}

/// An operation's attempts as any service reads them: through `released_attempts`, whose `raw_tx`
/// is NULL while an attempt is held back (worker roles may not read `tx_attempts.raw_tx`).
const SELECT_ATTEMPTS: &str = "SELECT attempt, kind, network, chain_id, sender, nonce, tx_hash, \
     raw_tx, gas_limit, max_fee_per_gas::text AS max_fee_per_gas, \
     max_priority_fee_per_gas::text AS max_priority_fee_per_gas, created_at, released \
     FROM released_attempts WHERE tenant_id = $1 AND op_id = $2 ORDER BY attempt";

/// An operation's attempts with their bytes, held back or not: the signer's login only.
pub(super) const SELECT_SIGNED_ATTEMPTS: &str = "SELECT a.attempt, kind, network, chain_id, sender, nonce, \
     tx_hash, raw_tx, gas_limit, max_fee_per_gas::text AS max_fee_per_gas, \
     max_priority_fee_per_gas::text AS max_priority_fee_per_gas, created_at, \
     r.released_at IS NOT NULL AS released \
     FROM tx_attempts a LEFT JOIN attempt_releases r USING (tenant_id, op_id, attempt) \
     WHERE a.tenant_id = $1 AND a.op_id = $2 ORDER BY a.attempt";

impl Store {
    /// The released attempts of each of `ops`, oldest first, in one query: what a reader of the
    /// chain can judge by content. A held-back attempt is left out (its bytes are the signer's
    /// until released); [`Store::attempt_counts`] still counts it, so a reader that re-counts
    /// before acting (the watcher) waits for its release.
    pub async fn attempts_of(
        &self,
        ops: &[(TenantId, OperationId)],
    ) -> Result<std::collections::HashMap<(TenantId, OperationId), Vec<Attempt>>> {
        let mut out: std::collections::HashMap<(TenantId, OperationId), Vec<Attempt>> =
            std::collections::HashMap::new();
        if ops.is_empty() {
            return Ok(out);
        }
        let (tenants, op_ids) = crate::shared::unzip_keys(ops);
        let rows: Vec<KeyedAttemptRow> = sqlx::query_as(
            "SELECT tenant_id, op_id, attempt, kind, network, chain_id, sender, nonce, tx_hash, \
             raw_tx, gas_limit, max_fee_per_gas::text AS max_fee_per_gas, \
             max_priority_fee_per_gas::text AS max_priority_fee_per_gas, created_at, released \
             FROM released_attempts \
             WHERE (tenant_id, op_id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[])) \
               AND released \
             ORDER BY tenant_id, op_id, attempt",
        )
        .bind(tenants)
        .bind(op_ids)
        .fetch_all(&self.pool)
        .await?;
        for row in rows {
            let key = (
                TenantId::from_uuid(row.tenant_id),
                OperationId::from_uuid(row.op_id),
            );
            out.entry(key)
                .or_default()
                .push(row.attempt.into_attempt()?);
        }
        Ok(out)
    }

    /// Every attempt of the operation, oldest first; a held-back one without its bytes (see
    /// [`Attempt::released`]). Readable by every service role.
    pub async fn attempts(&self, tenant_id: TenantId, op_id: OperationId) -> Result<Vec<Attempt>> {
        self.read_attempts(SELECT_ATTEMPTS, tenant_id, op_id).await
    }

    /// Every attempt of the operation, oldest first, each with its bytes, held back or not. Only
    /// the signer's login may read them (a worker's is refused by the database); bytes of a
    /// held-back attempt must not leave the signer.
    pub async fn signed_attempts(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<Attempt>> {
        self.read_attempts(SELECT_SIGNED_ATTEMPTS, tenant_id, op_id)
            .await
    }

    async fn read_attempts(
        &self,
        sql: &'static str,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<Attempt>> {
        let rows: Vec<AttemptRow> = sqlx::query_as(sql)
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(AttemptRow::into_attempt).collect()
    }
}

pub(super) async fn insert_attempt(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
    number: u32,
    network: &str,
    signed: &NewAttempt,
) -> Result<Attempt> {
    let as_i64 = |v: u64| i64::try_from(v).map_err(|_| StoreError::Corrupt { what: "attempt" });
    // The attempt and its release row (held back) in one statement: see `Store::release`.
    let (created_at,): (DateTime<Utc>,) = sqlx::query_as(
        "WITH a AS ( \
           INSERT INTO tx_attempts (tenant_id, op_id, attempt, kind, network, chain_id, sender, \
             nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, max_priority_fee_per_gas) \
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::numeric, $13::numeric) \
           RETURNING tenant_id, op_id, attempt, created_at), \
         r AS (INSERT INTO attempt_releases (tenant_id, op_id, attempt) \
           SELECT tenant_id, op_id, attempt FROM a) \
         SELECT created_at FROM a",
    )
    .bind(tenant_id.as_uuid())
    .bind(op_id.as_uuid())
    .bind(i32::try_from(number).map_err(|_| StoreError::Corrupt { what: "attempt" })?)
    .bind(signed.kind.as_str())
    .bind(network)
    .bind(as_i64(signed.chain_id)?)
    .bind(&signed.sender)
    .bind(as_i64(signed.nonce)?)
    .bind(&signed.tx_hash)
    .bind(&signed.raw_tx)
    .bind(as_i64(signed.gas_limit)?)
    .bind(signed.max_fee_per_gas.to_string())
    .bind(signed.max_priority_fee_per_gas.to_string())
    .fetch_one(&mut *conn)
    .await
    .map_err(StoreError::wallet)?;
    Ok(Attempt {
        attempt: number,
        network: network.to_owned(),
        signed: signed.clone(),
        created_at,
        released: false,
    })
}
