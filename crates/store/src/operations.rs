//! Creating and reading withdrawal operations.
//!
//! Creation follows the design's create step: one transaction inserts the operation (the unique
//! constraint on `(tenant_id, idempotency_key_hash)` is the serialization point), its payload and
//! its first transition-log row, then places the ledger hold, then commits. A replay is decided by
//! the stored, immutable payload hash, never by comparing mutable fields.

use crate::{Result, Store, StoreError, ledger};
use chrono::{DateTime, Utc};
use opledger_domain::amount::Amount;
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::operation::Executor;
use opledger_domain::payload::{
    AccountName, AssetCode, Destination, Memo, NetworkId, PayloadHash, WithdrawalPayload,
};
use opledger_domain::state::{CREATOR, INITIAL_STATE, OperationState};
use sqlx::{Connection, PgConnection};

/// A risk signal recorded on an operation (the domain's). Flags never merge, drop or block
/// operations.
pub use opledger_domain::risk::RiskFlag;

/// Decodes a stored flag name.
pub(crate) fn parse_risk_flag(s: &str) -> Result<RiskFlag> {
    RiskFlag::parse(s).ok_or(StoreError::Corrupt { what: "risk flag" })
}

pub use opledger_domain::operation::Operation;

/// What a create call asks for.
#[derive(Debug)]
pub struct NewWithdrawal<'a> {
    /// The identity to use if this creates a new operation.
    pub op_id: OperationId,
    /// The client's idempotency key; only its digest is stored.
    pub key: &'a IdempotencyKey,
    /// The payload; its `tenant_id` must be the authenticated tenant.
    pub payload: &'a WithdrawalPayload,
    /// Who is creating it (an API key id), for the transition log.
    pub actor_id: &'a str,
    /// Who will execute it (from the tenant's and network's configuration).
    pub executor: Executor,
}

/// The result of a create call.
#[derive(Debug, Clone)]
pub struct Created {
    /// The new or existing operation.
    pub operation: Operation,
    /// True when the key had already created this operation.
    pub replayed: bool,
}

/// Which operations to list, newest first.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only these states; all when empty.
    pub states: Vec<OperationState>,
    /// Only operations older than this one (the page cursor).
    pub before: Option<OperationId>,
    /// At most this many.
    pub limit: u32,
}

/// The columns of [`OperationRow`], from `withdrawal_ops o` and `withdrawal_payloads p`.
macro_rules! operation_columns {
    () => {
        "o.op_id, o.state, o.payload_hash, o.risk_flags, o.executor, o.version, \
     o.created_at, o.updated_at, p.source_account, p.asset, p.network, p.destination, p.memo, \
     p.amount::text AS amount, p.fee_cap::text AS fee_cap, p.policy_version"
    };
}
pub(crate) use operation_columns;

macro_rules! select_operation {
    () => {
        concat!(
            "SELECT ",
            operation_columns!(),
            " FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id)"
        )
    };
}

/// The replay lookup: `$1` tenant, `$2` key digest. Public so benchmarks run the exact same SQL.
pub const LOOKUP_BY_KEY_SQL: &str = concat!(
    select_operation!(),
    " WHERE o.tenant_id = $1 AND o.idempotency_key_hash = $2"
);

#[derive(sqlx::FromRow)]
pub(crate) struct OperationRow {
    op_id: uuid::Uuid,
    state: String,
    payload_hash: Vec<u8>,
    risk_flags: Vec<String>,
    executor: String,
    version: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    source_account: String,
    asset: String,
    network: String,
    destination: String,
    memo: Option<String>,
    amount: String,
    fee_cap: String,
    policy_version: i64,
}

impl OperationRow {
    pub(crate) fn into_operation(self, tenant_id: TenantId) -> Result<Operation> {
        fn corrupt<E>(what: &'static str) -> impl Fn(E) -> StoreError {
            move |_| StoreError::Corrupt { what }
        }
        let payload = WithdrawalPayload {
            tenant_id,
            source_account: AccountName::parse(&self.source_account)
                .map_err(corrupt("source account"))?,
            asset: AssetCode::parse(&self.asset).map_err(corrupt("asset"))?,
            network: NetworkId::parse(&self.network).map_err(corrupt("network"))?,
            destination: Destination::parse(&self.destination).map_err(corrupt("destination"))?,
            memo: self
                .memo
                .as_deref()
                .map(Memo::parse)
                .transpose()
                .map_err(corrupt("memo"))?,
            amount: Amount::parse(&self.amount).map_err(corrupt("amount"))?,
            fee_cap: Amount::parse(&self.fee_cap).map_err(corrupt("fee cap"))?,
            policy_version: u32::try_from(self.policy_version)
                .map_err(corrupt("policy version"))?,
        };
        Ok(Operation {
            op_id: OperationId::from_uuid(self.op_id),
            state: crate::row::state(&self.state)?,
            payload_hash: PayloadHash::try_from(self.payload_hash.as_slice()).map_err(|_| {
                StoreError::Corrupt {
                    what: "payload hash",
                }
            })?,
            payload,
            risk_flags: self
                .risk_flags
                .iter()
                .map(|f| parse_risk_flag(f))
                .collect::<Result<_>>()?,
            executor: Executor::parse(&self.executor)
                .ok_or(StoreError::Corrupt { what: "executor" })?,
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

impl Store {
    /// Creates a withdrawal with its hold, or returns the operation the key already created.
    ///
    /// Same key and same payload: the stored operation, `replayed = true`. Same key and another
    /// payload: [`StoreError::KeyReused`] naming the differing fields. Not enough available
    /// balance: [`StoreError::InsufficientFunds`], and nothing is stored.
    pub async fn create_withdrawal(&self, new: NewWithdrawal<'_>) -> Result<Created> {
        self.create_withdrawal_traced(new, None).await
    }

    /// [`Store::create_withdrawal`], storing `trace_context` (the W3C `traceparent` of the
    /// creating call) with a new operation; a replay keeps the stored one.
    pub async fn create_withdrawal_traced(
        &self,
        new: NewWithdrawal<'_>,
        trace_context: Option<&str>,
    ) -> Result<Created> {
        let tenant_id = new.payload.tenant_id;
        let key_digest = new.key.digest();
        let hash = new.payload.hash();
        // One connection for the whole call. A replay is answered from the stored row without a
        // write transaction. This read decides nothing on its own: a miss falls through to the
        // insert, where the unique constraint decides.
        let mut conn = self.pool.acquire().await?;
        if let Some(found) = replay(&mut conn, tenant_id, &key_digest, new.payload, hash).await? {
            return Ok(found);
        }
        let mut tx = conn.begin().await?;
        let inserted = insert_operation(
            &mut tx,
            &new,
            &key_digest,
            hash,
            self.config.risk_window,
            trace_context,
        )
        .await?;
        let Some(operation) = inserted else {
            tx.rollback().await?;
            // The key exists: another request won the insert. Report what it stored.
            return match replay(&mut conn, tenant_id, &key_digest, new.payload, hash).await? {
                Some(found) => Ok(found),
                None => Err(StoreError::Conflict { current: None }),
            };
        };
        opledger_failpoint::hit("create.after_operation_insert");
        if !ledger::place_hold(&mut tx, tenant_id, operation.op_id, new.payload).await? {
            tx.rollback().await?;
            return Err(StoreError::InsufficientFunds);
        }
        opledger_failpoint::hit("create.after_hold");
        tx.commit().await?;
        opledger_failpoint::hit("create.after_commit");
        Ok(Created {
            operation,
            replayed: false,
        })
    }

    /// One operation of `tenant_id`, or `None` (another tenant's operation is `None` too).
    pub async fn get_withdrawal(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<Operation>> {
        let sql = concat!(
            select_operation!(),
            " WHERE o.tenant_id = $1 AND o.op_id = $2"
        );
        let row: Option<OperationRow> = sqlx::query_as(sql)
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| r.into_operation(tenant_id)).transpose()
    }

    /// [`Store::get_withdrawal`], with a missing withdrawal as [`StoreError::NotFound`].
    pub async fn withdrawal(&self, tenant_id: TenantId, op_id: OperationId) -> Result<Operation> {
        self.get_withdrawal(tenant_id, op_id)
            .await?
            .ok_or(StoreError::NotFound { what: "withdrawal" })
    }

    /// REQUESTED operations of `tenant_id`, oldest first, after `after`.
    pub(crate) async fn list_requested(
        &self,
        tenant_id: TenantId,
        after: Option<OperationId>,
        limit: u32,
    ) -> Result<Vec<Operation>> {
        let sql = concat!(
            select_operation!(),
            " WHERE o.tenant_id = $1 AND o.state = 'REQUESTED' \
             AND ($2::uuid IS NULL OR o.op_id > $2) ORDER BY o.op_id LIMIT $3"
        );
        let rows: Vec<OperationRow> = sqlx::query_as(sql)
            .bind(tenant_id.as_uuid())
            .bind(after.map(|a| a.as_uuid()))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| r.into_operation(tenant_id))
            .collect()
    }

    /// Operations of `tenant_id`, newest first.
    pub async fn list_withdrawals(
        &self,
        tenant_id: TenantId,
        query: &ListQuery,
    ) -> Result<Vec<Operation>> {
        let states: Vec<&str> = query.states.iter().map(|s| s.as_str()).collect();
        let sql = concat!(
            select_operation!(),
            " WHERE o.tenant_id = $1 \
             AND (cardinality($2::text[]) = 0 OR o.state = ANY($2::text[])) \
             AND ($3::uuid IS NULL OR o.op_id < $3) ORDER BY o.op_id DESC LIMIT $4"
        );
        let rows: Vec<OperationRow> = sqlx::query_as(sql)
            .bind(tenant_id.as_uuid())
            .bind(&states)
            .bind(query.before.map(|b| b.as_uuid()))
            .bind(i64::from(query.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| r.into_operation(tenant_id))
            .collect()
    }

    /// The W3C trace context stored with an operation when it was created (`None` when tracing
    /// was off then, or for another tenant's operation).
    pub async fn trace_context(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<String>> {
        let row: Option<(Option<String>,)> = sqlx::query_as(
            "SELECT trace_context FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.and_then(|(t,)| t))
    }
}

/// The create insert, with an optional extra column and its value (see the constants below).
macro_rules! insert_operation_sql {
    ($column:literal, $value:literal) => {
        concat!(
            "WITH ins AS ( \
           INSERT INTO withdrawal_ops (tenant_id, op_id, idempotency_key_hash, payload_hash, state, risk_flags, \
             last_actor, last_actor_id, last_reason, executor",
            $column,
            ") VALUES ($1, $2, $3, $4, $5, CASE WHEN EXISTS ( \
               SELECT 1 FROM withdrawal_payloads r WHERE r.tenant_id = $1 AND r.destination = $9 \
                 AND r.asset = $7 AND r.network = $8 AND r.amount = $11::numeric \
                 AND r.created_at > now() - $14::bigint * interval '1 second') \
             THEN ARRAY['SAME_DESTINATION_AND_AMOUNT'] ELSE '{}'::text[] END, $15, $16, 'created', $17",
            $value,
            ") \
           ON CONFLICT (tenant_id, idempotency_key_hash) DO NOTHING \
           RETURNING tenant_id, op_id, risk_flags, created_at, updated_at), \
         pay AS ( \
           INSERT INTO withdrawal_payloads (tenant_id, op_id, source_account, asset, network, \
             destination, memo, amount, fee_cap, policy_version, created_at) \
           SELECT tenant_id, op_id, $6, $7, $8, $9, $10, $11::numeric, $12::numeric, $13, created_at \
           FROM ins) \
         SELECT risk_flags, created_at, updated_at FROM ins"
        )
    };
}

/// The first statement of the create transaction: inserts the operation (the unique constraint
/// decides key ownership) naming its creator, from which the database writes its first log row,
/// and its payload, and raises the risk flag. Parameters:
/// `$1` tenant, `$2` op id, `$3` key digest, `$4` payload hash, `$5` initial state, `$6`..`$13`
/// payload fields, `$14` risk window in seconds, `$15` actor, `$16` actor id, `$17` executor.
/// Returns no row when the key is taken. Public so benchmarks run the exact same SQL.
pub const INSERT_OPERATION_SQL: &str = insert_operation_sql!("", "");

/// [`INSERT_OPERATION_SQL`] also storing `$18`, the W3C trace context of the creating call.
pub const INSERT_TRACED_OPERATION_SQL: &str = insert_operation_sql!(", trace_context", ", $18");

/// Looks up the operation a key created; `None` when the key is unused, an error when it was used
/// with another payload.
async fn replay(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    key_digest: &[u8; 32],
    payload: &WithdrawalPayload,
    hash: PayloadHash,
) -> Result<Option<Created>> {
    let row: Option<OperationRow> = sqlx::query_as(LOOKUP_BY_KEY_SQL)
        .bind(tenant_id.as_uuid())
        .bind(key_digest.as_slice())
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let stored = row.into_operation(tenant_id)?;
    if stored.payload_hash == hash {
        Ok(Some(Created {
            operation: stored,
            replayed: true,
        }))
    } else {
        Err(StoreError::KeyReused {
            fields: stored.payload.differing_fields(payload),
        })
    }
}

/// Inserts the operation, its payload and its first log row in one statement; `None` when the
/// tenant already used the key.
async fn insert_operation(
    conn: &mut PgConnection,
    new: &NewWithdrawal<'_>,
    key_digest: &[u8; 32],
    hash: PayloadHash,
    risk_window: std::time::Duration,
    trace_context: Option<&str>,
) -> Result<Option<Operation>> {
    let p = new.payload;
    let sql = match trace_context {
        Some(_) => INSERT_TRACED_OPERATION_SQL,
        None => INSERT_OPERATION_SQL,
    };
    let mut insert = sqlx::query_as(sql)
        .bind(p.tenant_id.as_uuid())
        .bind(new.op_id.as_uuid())
        .bind(key_digest.as_slice())
        .bind(hash.as_bytes().as_slice())
        .bind(INITIAL_STATE.as_str())
        .bind(p.source_account.as_str())
        .bind(p.asset.as_str())
        .bind(p.network.as_str())
        .bind(p.destination.as_str())
        .bind(p.memo.as_ref().map(|m| m.as_str()))
        .bind(p.amount.to_string())
        .bind(p.fee_cap.to_string())
        .bind(i64::from(p.policy_version))
        .bind(i64::try_from(risk_window.as_secs()).unwrap_or(i64::MAX))
        .bind(CREATOR.as_str())
        .bind(new.actor_id)
        .bind(new.executor.as_str());
    if let Some(trace_context) = trace_context {
        insert = insert.bind(trace_context);
    }
    let row: Option<(Vec<String>, DateTime<Utc>, DateTime<Utc>)> =
        insert.fetch_optional(&mut *conn).await?;
    let Some((flags, created_at, updated_at)) = row else {
        return Ok(None);
    };
    Ok(Some(Operation {
        op_id: new.op_id,
        state: INITIAL_STATE,
        payload_hash: hash,
        payload: p.clone(),
        risk_flags: flags
            .iter()
            .map(|f| parse_risk_flag(f))
            .collect::<Result<_>>()?,
        executor: new.executor,
        version: 0,
        created_at,
        updated_at,
    }))
}
