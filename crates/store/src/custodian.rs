//! Withdrawals a custodian executes (migration 32): the executor's queue, its claim, the request
//! persisted before the first call in the same transaction that moves SIGNING -> SIGNED, every
//! send and answer, the provider's records, and the proposal of a release the witness must
//! attest. State changes go through [`crate::transition`] like every other.

use crate::operations::{Operation, OperationRow, operation_columns};
use crate::transition::{LeaseGuard, TransitionRequest, Transitioned, transition_in};
use crate::{Result, Store, StoreError};
use opledger_domain::custodian::Profile;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState};
use std::time::Duration;

/// The request stored for a custodian withdrawal: sent as is, every time.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredRequest {
    /// The configured provider account it was sent to.
    pub account: String,
    /// The account's profile when it was stored.
    pub profile: Profile,
    /// The exact body bytes.
    pub body: Vec<u8>,
    /// Their SHA-256.
    pub body_sha256: [u8; 32],
    /// The chain as the executor's evidence showed it just before the request was stored: a
    /// payout must be included after it (migration 41). `None`: the network was not watched then.
    pub bound: Option<opledger_domain::custodian::token::RequestBound>,
}

impl std::fmt::Debug for StoredRequest {
    // The body names the destination and amount: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredRequest")
            .field("account", &self.account)
            .field("profile", &self.profile)
            .field("body_len", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// A custodian withdrawal due for its executor, with what it stored so far.
#[derive(Debug, Clone)]
pub struct CustodianDue {
    /// The operation (its executor is the custodian).
    pub operation: Operation,
    /// Whether its lease (a claim, or a follow) has expired or was never taken.
    pub lease_free: bool,
    /// The request, once stored.
    pub request: Option<StoredRequest>,
    /// How many sends were recorded.
    pub sends: i32,
    /// How many of them got an answer recorded.
    pub answers: i32,
    /// Seconds since the last send (none sent: `None`).
    pub since_last_send: Option<f64>,
    /// Seconds since the request was stored (none stored: `None`).
    pub since_request: Option<f64>,
    /// The provider transaction an operator bound to it (`no_lookup`: migration 37), if any.
    pub bound: Option<String>,
    /// Seconds since it was bound (not bound: `None`).
    pub since_bound: Option<f64>,
    /// The provider transaction an accepted answer to its request named (`no_lookup` only: the
    /// other profiles are looked up by our reference), if any.
    pub answered: Option<String>,
    /// Seconds since that answer was recorded.
    pub since_answered: Option<f64>,
}

impl CustodianDue {
    /// The provider transaction a `no_lookup` withdrawal follows: the one an operator bound, else
    /// the one the provider's answer named; with the seconds since either was recorded.
    pub fn followed(&self) -> Option<(&str, Option<f64>)> {
        match (&self.bound, &self.answered) {
            (Some(bound), _) => Some((bound, self.since_bound)),
            (None, Some(answered)) => Some((answered, self.since_answered)),
            (None, None) => None,
        }
    }
}

/// A record of the provider's, as the executor's lookup found it.
#[derive(Debug, Clone)]
pub struct NewRecord<'a> {
    /// Our status name (the profile's states mapped to Fireblocks' names).
    pub status: &'a str,
    /// The provider's sub-status, if any.
    pub sub_status: Option<&'a str>,
    /// The transaction hash it names (`0x` and 64 lowercase hex digits), if any.
    pub tx_hash: Option<&'a str>,
    /// Hashes it says were replaced.
    pub replaced_hashes: &'a [String],
    /// The provider's id of the transaction.
    pub provider_id: Option<&'a str>,
    /// SHA-256 of the answer as received.
    pub answer_sha256: [u8; 32],
}

#[derive(sqlx::FromRow)]
struct DueRow {
    #[sqlx(flatten)]
    operation: OperationRow,
    tenant_id: uuid::Uuid,
    lease_free: bool,
    account: Option<String>,
    profile: Option<String>,
    body: Option<Vec<u8>>,
    body_sha256: Option<Vec<u8>>,
    final_block_before: Option<i64>,
    head_block_before: Option<i64>,
    head_hash_before: Option<Vec<u8>>,
    sends: i32,
    answers: i32,
    since_last_send: Option<f64>,
    since_request: Option<f64>,
    bound: Option<String>,
    since_bound: Option<f64>,
    answered: Option<String>,
    since_answered: Option<f64>,
}

impl DueRow {
    fn into_due(self) -> Result<CustodianDue> {
        let corrupt = |what| StoreError::Corrupt { what };
        let request = match (self.account, self.profile, self.body, self.body_sha256) {
            (Some(account), Some(profile), Some(body), Some(sha)) => Some(StoredRequest {
                account,
                profile: Profile::ALL
                    .into_iter()
                    .find(|p| p.as_str() == profile)
                    .ok_or(corrupt("custodian profile"))?,
                body,
                body_sha256: sha.try_into().map_err(|_| corrupt("custodian body hash"))?,
                bound: stored_bound(
                    self.final_block_before,
                    self.head_block_before,
                    self.head_hash_before,
                )?,
            }),
            _ => None,
        };
        Ok(CustodianDue {
            operation: self
                .operation
                .into_operation(TenantId::from_uuid(self.tenant_id))?,
            lease_free: self.lease_free,
            request,
            sends: self.sends,
            answers: self.answers,
            since_last_send: self.since_last_send,
            since_request: self.since_request,
            bound: self.bound,
            since_bound: self.since_bound,
            answered: self.answered,
            since_answered: self.since_answered,
        })
    }
}

/// A block number as PostgreSQL's bigint.
fn block_number(number: Option<u64>) -> Result<Option<i64>> {
    number
        .map(i64::try_from)
        .transpose()
        .map_err(|_| StoreError::Corrupt {
            what: "custodian request bound",
        })
}

/// The bound stored with a request (all three columns, or none: the table's check).
fn stored_bound(
    final_block: Option<i64>,
    head: Option<i64>,
    hash: Option<Vec<u8>>,
) -> Result<Option<opledger_domain::custodian::token::RequestBound>> {
    let corrupt = || StoreError::Corrupt {
        what: "custodian request bound",
    };
    match (final_block, head, hash) {
        (None, None, None) => Ok(None),
        (Some(final_block), Some(head), Some(hash)) => {
            Ok(Some(opledger_domain::custodian::token::RequestBound {
                final_block: u64::try_from(final_block).map_err(|_| corrupt())?,
                head: opledger_domain::evidence::BlockRef {
                    number: u64::try_from(head).map_err(|_| corrupt())?,
                    hash: hash.try_into().map_err(|_| corrupt())?,
                },
            }))
        }
        _ => Err(corrupt()),
    }
}

/// The transaction the first accepted answer to a `no_lookup` request named (`o`: the operation's
/// alias, `q`: its request's), as a subquery of `provider_id` and `answered_at`.
macro_rules! answered_transaction {
    ($o:literal, $q:literal) => {
        concat!(
            "SELECT a.provider_id, a.answered_at FROM custodian_answers a \
             WHERE a.tenant_id = ",
            $o,
            ".tenant_id AND a.op_id = ",
            $o,
            ".op_id AND a.answer = 'ACCEPTED' AND a.provider_id IS NOT NULL AND ",
            $q,
            ".profile = 'no_lookup' ORDER BY a.send_no LIMIT 1"
        )
    };
}
pub(crate) use answered_transaction;

/// The columns of a [`DueRow`] and the joins they read (`o` the operation, `q` its request, `f`
/// its follow lease, `b` its binding, `n` the transaction a `no_lookup` answer named).
macro_rules! due_select {
    () => {
        concat!(
            "SELECT o.tenant_id, ",
            operation_columns!(),
            ", coalesce(o.lease_expires_at <= now(), true) AS lease_free, \
             q.account, q.profile, q.body, q.body_sha256, \
             q.final_block_before, q.head_block_before, q.head_hash_before, \
             (SELECT count(*)::int4 FROM custodian_sends s \
               WHERE s.tenant_id = o.tenant_id AND s.op_id = o.op_id) AS sends, \
             (SELECT count(*)::int4 FROM custodian_answers a \
               WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id) AS answers, \
             (SELECT extract(epoch FROM now() - max(s.sent_at))::float8 FROM custodian_sends s \
               WHERE s.tenant_id = o.tenant_id AND s.op_id = o.op_id) AS since_last_send, \
             extract(epoch FROM now() - q.created_at)::float8 AS since_request, \
             b.provider_id AS bound, \
             extract(epoch FROM now() - b.created_at)::float8 AS since_bound, \
             n.provider_id AS answered, \
             extract(epoch FROM now() - n.answered_at)::float8 AS since_answered \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             LEFT JOIN custodian_requests q USING (tenant_id, op_id) \
             LEFT JOIN custodian_follows f USING (tenant_id, op_id) \
             LEFT JOIN custodian_bindings b USING (tenant_id, op_id) \
             LEFT JOIN LATERAL (",
            answered_transaction!("o", "q"),
            ") n ON true"
        )
    };
}

impl Store {
    /// One custodian withdrawal of `tenant_id` as its executor sees it (`None`: no such
    /// withdrawal, or another executor's).
    pub async fn custodian_withdrawal(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<CustodianDue>> {
        let row: Option<DueRow> = sqlx::query_as(concat!(
            due_select!(),
            " WHERE o.tenant_id = $1 AND o.op_id = $2 AND o.executor = 'custodian'"
        ))
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&self.pool)
        .await?;
        row.map(DueRow::into_due).transpose()
    }

    /// Up to `limit` custodian withdrawals due for an executor, least recently followed first:
    /// APPROVED ones to claim, SIGNING ones whose claim expired (an executor stopped before
    /// storing the request), and SIGNED, BROADCAST and UNKNOWN ones to follow whose claim and
    /// follow lease are free and which were not followed for `follow_every`, or which a verified
    /// status webhook hinted since they were last followed (migration 35; those first).
    /// APPROVED ones of the networks in `held_back` are left out: the executor cannot send them
    /// now (its evidence of their chain has no agreement), and they must not take the places of
    /// withdrawals it can move.
    pub async fn custodian_due(
        &self,
        follow_every: Duration,
        limit: u32,
        held_back: &[String],
    ) -> Result<Vec<CustodianDue>> {
        let rows: Vec<DueRow> = sqlx::query_as(concat!(
            due_select!(),
            " WHERE o.executor = 'custodian' \
               AND (o.state = 'APPROVED' AND NOT p.network = ANY($3) \
               OR (o.state = 'SIGNING' AND coalesce(o.lease_expires_at <= now(), true)) \
               OR (o.state IN ('SIGNED', 'BROADCAST', 'UNKNOWN') \
                   AND coalesce(o.lease_expires_at <= now(), true) \
                   AND coalesce(f.leased_until <= now(), true) \
                   AND (coalesce(f.followed_at <= now() - $1::float8 * interval '1 second', \
                                 true) \
                        OR EXISTS (SELECT 1 FROM custodian_hints h \
                          WHERE h.tenant_id = o.tenant_id AND h.op_id = o.op_id \
                            AND h.hinted_at > f.followed_at)))) \
             ORDER BY EXISTS (SELECT 1 FROM custodian_hints h \
                 WHERE h.tenant_id = o.tenant_id AND h.op_id = o.op_id \
                   AND h.hinted_at > f.followed_at) DESC, \
               coalesce(f.followed_at, o.updated_at) LIMIT $2"
        ))
        .bind(follow_every.as_secs_f64())
        .bind(i64::from(limit))
        .bind(held_back)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(DueRow::into_due).collect()
    }

    /// Takes the follow lease of a custodian withdrawal for `owner` (free, expired or already
    /// `owner`'s), so that one executor instance at a time sends or looks it up. False when
    /// another instance holds it.
    pub async fn take_custodian_lease(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        lease: Duration,
    ) -> Result<bool> {
        let taken: Option<(i32,)> = sqlx::query_as(
            "INSERT INTO custodian_follows AS f (tenant_id, op_id, owner, leased_until) \
             VALUES ($1, $2, $3, now() + $4::float8 * interval '1 second') \
             ON CONFLICT (tenant_id, op_id) DO UPDATE SET owner = EXCLUDED.owner, \
               leased_until = EXCLUDED.leased_until \
             WHERE f.leased_until <= now() OR f.owner = EXCLUDED.owner RETURNING 1",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(owner)
        .bind(lease.as_secs_f64())
        .fetch_optional(&self.pool)
        .await?;
        Ok(taken.is_some())
    }

    /// Gives the follow lease of a custodian withdrawal back (only `owner`'s) and notes that it
    /// was followed now: the next pass after `follow_every` may look it up again.
    pub async fn release_custodian_lease(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE custodian_follows SET leased_until = now(), followed_at = now() \
             WHERE tenant_id = $1 AND op_id = $2 AND owner = $3",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records that a custodian withdrawal needs `owner` (an operator's decision: no lookup, a
    /// record that differs from the request), without moving it.
    pub async fn record_custodian_escalation(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        reason_code: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO escalations (tenant_id, op_id, owner, reason_code) \
             SELECT $1, $2, $3, $4 WHERE NOT EXISTS (SELECT 1 FROM escalations \
               WHERE tenant_id = $1 AND op_id = $2 AND reason_code = $4)",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(owner)
        .bind(reason_code)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Stores the request of a claimed withdrawal and moves it SIGNING -> SIGNED in one
    /// transaction (`request` names the move, `owner`'s claim, and the payload hash). From the
    /// commit on, the request may reach the provider: the withdrawal never becomes payable again.
    pub async fn persist_custodian_request(
        &self,
        request: &TransitionRequest<'_>,
        stored: &StoredRequest,
    ) -> Result<Transitioned> {
        let hash = request.expected_hash.ok_or(StoreError::Corrupt {
            what: "payload hash",
        })?;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO custodian_requests (tenant_id, op_id, account, profile, body, \
               body_sha256, payload_hash, executor_id, final_block_before, head_block_before, \
               head_hash_before) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(request.tenant_id.as_uuid())
        .bind(request.op_id.as_uuid())
        .bind(&stored.account)
        .bind(stored.profile.as_str())
        .bind(&stored.body)
        .bind(stored.body_sha256.as_slice())
        .bind(hash.as_bytes().as_slice())
        .bind(request.actor_id)
        .bind(block_number(stored.bound.map(|b| b.final_block))?)
        .bind(block_number(stored.bound.map(|b| b.head.number))?)
        .bind(stored.bound.map(|b| b.head.hash.to_vec()))
        .execute(&mut *tx)
        .await?;
        let done = transition_in(&mut tx, request).await?;
        tx.commit().await?;
        Ok(done)
    }

    /// Records a send of the stored request before it is made; returns its number (1 for the
    /// first), or `None` when `executor_id` may not send now: the withdrawal is not SIGNED,
    /// BROADCAST or UNKNOWN, or `executor_id` holds no live lease on it (its claim on the
    /// operation row, or its follow lease), or `first` is asked and a send was already recorded
    /// (another instance sent meanwhile). A second instance whose lease lapsed sends nothing, and
    /// the number, not the caller's memory, says whether a send is the first.
    pub async fn begin_custodian_send(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        executor_id: &str,
        first: bool,
    ) -> Result<Option<i32>> {
        let row: Option<(i32,)> = sqlx::query_as(
            "INSERT INTO custodian_sends (tenant_id, op_id, send_no, executor_id) \
             SELECT $1, $2, coalesce((SELECT max(s.send_no) FROM custodian_sends s \
               WHERE s.tenant_id = $1 AND s.op_id = $2), 0) + 1, $3 \
             FROM withdrawal_ops o \
             WHERE o.tenant_id = $1 AND o.op_id = $2 AND o.executor = 'custodian' \
               AND o.state IN ('SIGNED', 'BROADCAST', 'UNKNOWN') \
               AND ((o.lease_owner = $3 AND o.lease_expires_at > now()) \
                    OR EXISTS (SELECT 1 FROM custodian_follows f \
                      WHERE f.tenant_id = $1 AND f.op_id = $2 AND f.owner = $3 \
                        AND f.leased_until > now())) \
               AND (NOT $4 OR NOT EXISTS (SELECT 1 FROM custodian_sends s \
                      WHERE s.tenant_id = $1 AND s.op_id = $2)) \
             RETURNING send_no",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(executor_id)
        .bind(first)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(n,)| n))
    }

    /// Records the answer class of send `send_no` (`ACCEPTED`, `REFUSED`, `TIMEOUT`, ...).
    pub async fn record_custodian_answer(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        send_no: i32,
        answer: &str,
        provider_id: Option<&str>,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO custodian_answers (tenant_id, op_id, send_no, answer, provider_id) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(send_no)
        .bind(answer)
        .bind(provider_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Appends a record of the provider's; returns its id.
    pub async fn record_custodian_record(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record: &NewRecord<'_>,
        executor_id: &str,
    ) -> Result<i64> {
        let mut conn = self.pool.acquire().await?;
        insert_record(&mut conn, tenant_id, op_id, record, executor_id).await
    }

    /// Proposes releasing on record `record_id` (terminal, no hash); idempotent.
    pub async fn propose_custodian_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record_id: i64,
        executor_id: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO custodian_release_proposals (tenant_id, op_id, record_id, executor_id) \
             VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(record_id)
        .bind(executor_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// A move of a custodian withdrawal by `executor_id` as the custodian actor.
pub fn custodian_move<'a>(
    tenant_id: TenantId,
    op_id: OperationId,
    from: OperationState,
    to: OperationState,
    executor_id: &'a str,
    reason: &'a str,
) -> TransitionRequest<'a> {
    let mut request = TransitionRequest::new(
        tenant_id,
        op_id,
        from,
        to,
        Actor::Custodian,
        executor_id,
        reason,
    );
    request.lease_guard = LeaseGuard::Any;
    request
}

/// Inserts a provider record of the withdrawal; its id.
pub(crate) async fn insert_record(
    conn: &mut sqlx::PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
    record: &NewRecord<'_>,
    executor_id: &str,
) -> Result<i64> {
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO custodian_records (tenant_id, op_id, status, sub_status, tx_hash, \
           replaced_hashes, provider_id, answer_sha256, executor_id) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING record_id",
    )
    .bind(tenant_id.as_uuid())
    .bind(op_id.as_uuid())
    .bind(record.status)
    .bind(record.sub_status)
    .bind(record.tx_hash)
    .bind(record.replaced_hashes)
    .bind(record.provider_id)
    .bind(record.answer_sha256.as_slice())
    .bind(executor_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
}
