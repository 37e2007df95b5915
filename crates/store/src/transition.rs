//! The one way an operation changes state.
//!
//! [`Store::transition`] checks the domain transition table (move and actor), then executes one
//! conditional `UPDATE ... WHERE state = $from [AND payload_hash = $hash] [AND lease ...]` in the
//! database: a real compare-and-swap. Zero rows means someone else moved first and nothing
//! changes. The update names its actor, actor id and reason, from which the database itself
//! writes the transition-log row (no service role may insert one); the ledger effect (release,
//! settle, reopen) is written in the same transaction.

use crate::{Result, Store, StoreError, ledger};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_domain::state::{Actor, HoldEffect, OperationState, check_transition};
use sqlx::PgConnection;
use std::time::Duration;

/// A lease condition on the operation row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseGuard<'a> {
    /// No lease condition.
    Any,
    /// The lease must be held by this owner and not have expired.
    HeldBy(&'a str),
    /// The lease must have expired (reclaiming an abandoned claim).
    Expired,
}

/// A requested state change.
#[derive(Debug, Clone)]
pub struct TransitionRequest<'a> {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The state the caller saw; the update applies only if the row is still in it.
    pub from: OperationState,
    /// The state to move to.
    pub to: OperationState,
    /// The role making the move, checked against the transition table.
    pub actor: Actor,
    /// The acting principal (a worker or API key id), recorded in the log and as lease owner.
    pub actor_id: &'a str,
    /// Why, recorded in the log. Never personal data.
    pub reason: &'a str,
    /// When set, the update also requires the stored payload hash to equal this one.
    pub expected_hash: Option<PayloadHash>,
    /// The lease condition.
    pub lease_guard: LeaseGuard<'a>,
    /// When set, the new state carries a lease owned by `actor_id` for this long; otherwise any
    /// lease is cleared.
    pub lease_for: Option<Duration>,
    /// When set, recorded as the operation's signed transaction reference (its first attempt's
    /// hash); an existing reference is never overwritten.
    pub signed_tx_ref: Option<&'a str>,
}

impl<'a> TransitionRequest<'a> {
    /// A plain transition: no hash or lease condition, no lease on the new state.
    pub fn new(
        tenant_id: TenantId,
        op_id: OperationId,
        from: OperationState,
        to: OperationState,
        actor: Actor,
        actor_id: &'a str,
        reason: &'a str,
    ) -> Self {
        TransitionRequest {
            tenant_id,
            op_id,
            from,
            to,
            actor,
            actor_id,
            reason,
            expected_hash: None,
            lease_guard: LeaseGuard::Any,
            lease_for: None,
            signed_tx_ref: None,
        }
    }
}

/// A transition that happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transitioned {
    /// The operation's version after the move.
    pub version: i64,
}

impl Store {
    /// Moves an operation in its own transaction; see [`transition_in`].
    pub async fn transition(&self, request: &TransitionRequest<'_>) -> Result<Transitioned> {
        // A move without a ledger effect is one statement (the conditional update and its log
        // row), atomic and durable on its own: no BEGIN and COMMIT round trips around it.
        if check_transition(request.from, request.to, request.actor)? == HoldEffect::Keep {
            let mut conn = self.pool.acquire().await?;
            return transition_in(&mut conn, request).await;
        }
        let mut tx = self.pool.begin().await?;
        let done = transition_in(&mut tx, request).await?;
        tx.commit().await?;
        Ok(done)
    }
}

/// Moves an operation inside the caller's transaction (so the caller can persist more in the same
/// commit). Refuses illegal moves and actors before touching the database; on a lost race returns
/// [`StoreError::Conflict`] with the current state. The caller must roll back on any error.
pub async fn transition_in(
    conn: &mut PgConnection,
    request: &TransitionRequest<'_>,
) -> Result<Transitioned> {
    let (done, effect) = move_in(conn, request).await?;
    ledger::apply_hold_effects(conn, &[(request.tenant_id, request.op_id, effect)]).await?;
    Ok(done)
}

/// [`transition_in`] without its ledger effect, which is returned for the caller to apply in the
/// same transaction (a batch moves its operations first and touches the shared balance rows
/// last, so it holds their locks for less time).
pub(crate) async fn move_in(
    conn: &mut PgConnection,
    request: &TransitionRequest<'_>,
) -> Result<(Transitioned, HoldEffect)> {
    let effect = check_transition(request.from, request.to, request.actor)?;
    let (lease_mode, lease_owner) = match request.lease_guard {
        LeaseGuard::Any => (0_i16, None),
        LeaseGuard::HeldBy(owner) => (1, Some(owner)),
        LeaseGuard::Expired => (2, None),
    };
    let lease_secs = request.lease_for.map(|d| d.as_secs_f64());
    // One statement: the conditional update, which names its actor, actor id and reason; the
    // database writes the transition-log row from them (migration 26; nothing is logged when the
    // update matches no row).
    let updated: Option<(i64,)> = sqlx::query_as(
        "UPDATE withdrawal_ops SET state = $4, version = version + 1, updated_at = now(), \
           last_actor = $11, last_actor_id = $9, last_reason = $12, \
           lease_owner = CASE WHEN $8::float8 IS NULL THEN NULL ELSE $9 END, \
           lease_expires_at = CASE WHEN $8::float8 IS NULL THEN NULL \
             ELSE now() + $8::float8 * interval '1 second' END, \
           signed_tx_ref = COALESCE(signed_tx_ref, $10) \
         WHERE tenant_id = $1 AND op_id = $2 AND state = $3 \
           AND ($5::bytea IS NULL OR payload_hash = $5) \
           AND ($6::smallint = 0 \
             OR ($6 = 1 AND lease_owner = $7 AND lease_expires_at > now()) \
             OR ($6 = 2 AND (lease_expires_at IS NULL OR lease_expires_at <= now()))) \
         RETURNING version",
    )
    .bind(request.tenant_id.as_uuid())
    .bind(request.op_id.as_uuid())
    .bind(request.from.as_str())
    .bind(request.to.as_str())
    .bind(request.expected_hash.map(|h| h.as_bytes().to_vec()))
    .bind(lease_mode)
    .bind(lease_owner)
    .bind(lease_secs)
    .bind(request.actor_id)
    .bind(request.signed_tx_ref)
    .bind(request.actor.as_str())
    .bind(request.reason)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((version,)) = updated else {
        let current: Option<(String,)> =
            sqlx::query_as("SELECT state FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2")
                .bind(request.tenant_id.as_uuid())
                .bind(request.op_id.as_uuid())
                .fetch_optional(&mut *conn)
                .await?;
        return match current {
            None => Err(StoreError::NotFound { what: "operation" }),
            Some((state,)) => Err(StoreError::Conflict {
                current: Some(crate::row::state(&state)?),
            }),
        };
    };
    Ok((Transitioned { version }, effect))
}

/// A batch of plain moves (each made by [`TransitionRequest::new`]: no hash or lease condition,
/// no lease, no transaction reference) inside the caller's transaction, set-based: each request is
/// checked against the transition table and its actor first, any refusal failing the batch before
/// the database is touched; then one statement locks the operation rows in (tenant, operation)
/// order and one moves every row still in its `from` state (the database writes their
/// transition-log rows) and inserts, for each moved operation, its inclusion in the same
/// statement. Returns, per request, whether it moved and the ledger effect left for the caller to
/// apply. An operation that is not there is [`StoreError::NotFound`]; two requests for one
/// operation are refused as [`StoreError::Corrupt`] (the caller sends each once).
pub(crate) async fn move_many_in(
    conn: &mut PgConnection,
    requests: &[(&TransitionRequest<'_>, &Inclusion)],
) -> Result<Vec<(bool, HoldEffect)>> {
    let effects = check_batch(requests)?;
    let tenants: Vec<uuid::Uuid> = requests
        .iter()
        .map(|(r, _)| r.tenant_id.as_uuid())
        .collect();
    let ops: Vec<uuid::Uuid> = requests.iter().map(|(r, _)| r.op_id.as_uuid()).collect();
    lock_batch(conn, &tenants, &ops, requests.len()).await?;
    let moved = move_and_include(conn, requests, &tenants, &ops).await?;
    Ok(requests
        .iter()
        .zip(effects)
        .map(|((r, _), effect)| {
            (
                moved.contains(&(r.tenant_id.as_uuid(), r.op_id.as_uuid())),
                effect,
            )
        })
        .collect())
}

/// The checks of [`move_many_in`] made before the database is touched: every request is plain
/// and allowed by the transition table for its actor (its ledger effect is returned, in request
/// order), and no operation is named twice.
fn check_batch(requests: &[(&TransitionRequest<'_>, &Inclusion)]) -> Result<Vec<HoldEffect>> {
    let mut effects = Vec::with_capacity(requests.len());
    for (request, _) in requests {
        let plain = request.expected_hash.is_none()
            && request.lease_guard == LeaseGuard::Any
            && request.lease_for.is_none()
            && request.signed_tx_ref.is_none();
        if !plain {
            return Err(StoreError::Corrupt {
                what: "batched transition with a condition",
            });
        }
        effects.push(check_transition(request.from, request.to, request.actor)?);
    }
    let keys: std::collections::BTreeSet<(uuid::Uuid, uuid::Uuid)> = requests
        .iter()
        .map(|(r, _)| (r.tenant_id.as_uuid(), r.op_id.as_uuid()))
        .collect();
    if keys.len() != requests.len() {
        return Err(StoreError::Corrupt {
            what: "an operation twice in one batch",
        });
    }
    Ok(effects)
}

/// Locks the batch's operation rows in (tenant, operation) order; [`StoreError::NotFound`] unless
/// all `expected` of them exist.
async fn lock_batch(
    conn: &mut PgConnection,
    tenants: &[uuid::Uuid],
    ops: &[uuid::Uuid],
    expected: usize,
) -> Result<()> {
    // Every batch locks its rows in one order, so two batches cannot deadlock on them.
    let (found,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM (SELECT 1 FROM withdrawal_ops o \
           WHERE o.tenant_id = ANY ($1) AND o.op_id = ANY ($2) \
             AND (o.tenant_id, o.op_id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[])) \
           ORDER BY o.tenant_id, o.op_id FOR UPDATE) locked",
    )
    .bind(tenants)
    .bind(ops)
    .fetch_one(&mut *conn)
    .await?;
    if usize::try_from(found).ok() != Some(expected) {
        return Err(StoreError::NotFound { what: "operation" });
    }
    Ok(())
}

/// The one statement of [`move_many_in`] that moves every locked row still in its `from` state
/// (the database writes their transition-log rows) and inserts each moved operation's inclusion;
/// returns the (tenant, operation) keys that moved.
async fn move_and_include(
    conn: &mut PgConnection,
    requests: &[(&TransitionRequest<'_>, &Inclusion)],
    tenants: &[uuid::Uuid],
    ops: &[uuid::Uuid],
) -> Result<std::collections::BTreeSet<(uuid::Uuid, uuid::Uuid)>> {
    let text = |f: &dyn Fn(&TransitionRequest<'_>) -> String| -> Vec<String> {
        requests.iter().map(|(r, _)| f(r)).collect()
    };
    let blocks = requests
        .iter()
        .map(|(_, i)| {
            i64::try_from(i.block_number).map_err(|_| StoreError::Corrupt { what: "block" })
        })
        .collect::<Result<Vec<i64>>>()?;
    let moved: Vec<(uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
        "WITH i AS ( \
           SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], \
             $6::text[], $7::text[], $8::text[], $9::bigint[], $10::text[]) \
             AS i(tenant_id, op_id, from_state, to_state, actor, actor_id, reason, tx_hash, \
               block_number, block_hash)), \
         moved AS ( \
           UPDATE withdrawal_ops o SET state = i.to_state, version = o.version + 1, \
             updated_at = now(), last_actor = i.actor, last_actor_id = i.actor_id, \
             last_reason = i.reason, lease_owner = NULL, lease_expires_at = NULL \
           FROM i WHERE o.tenant_id = i.tenant_id AND o.op_id = i.op_id \
             AND o.state = i.from_state \
           RETURNING o.tenant_id, o.op_id, i.tx_hash, i.block_number, i.block_hash), \
         included AS ( \
           INSERT INTO inclusions (tenant_id, op_id, tx_hash, block_number, block_hash) \
           SELECT tenant_id, op_id, tx_hash, block_number, block_hash FROM moved) \
         SELECT tenant_id, op_id FROM moved",
    )
    .bind(tenants)
    .bind(ops)
    .bind(text(&|r| r.from.as_str().to_owned()))
    .bind(text(&|r| r.to.as_str().to_owned()))
    .bind(text(&|r| r.actor.as_str().to_owned()))
    .bind(text(&|r| r.actor_id.to_owned()))
    .bind(text(&|r| r.reason.to_owned()))
    .bind(
        requests
            .iter()
            .map(|(_, i)| i.tx_hash.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(blocks)
    .bind(
        requests
            .iter()
            .map(|(_, i)| i.block_hash.as_str())
            .collect::<Vec<_>>(),
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(moved.into_iter().collect())
}

/// Where a confirmed operation's transfer was included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inclusion {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The included transaction.
    pub tx_hash: String,
    /// Its block.
    pub block_number: u64,
    /// That block's hash when it was confirmed.
    pub block_hash: String,
}
