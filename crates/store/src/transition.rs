//! The one way an operation changes state.
//!
//! [`Store::transition`] checks the domain transition table (move and actor), then executes one
//! conditional `UPDATE ... WHERE state = $from [AND payload_hash = $hash] [AND lease ...]` in the
//! database: a real compare-and-swap. Zero rows means someone else moved first and nothing
//! changes. The transition-log row and the ledger effect (release, settle, reopen) are written in
//! the same transaction.

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
    ledger::apply_hold_effect(conn, request.tenant_id, request.op_id, effect).await?;
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
    // One statement: the conditional update and its transition-log row (nothing is logged when
    // the update matches no row).
    let updated: Option<(i64,)> = sqlx::query_as(
        "WITH moved AS ( \
           UPDATE withdrawal_ops SET state = $4, version = version + 1, updated_at = now(), \
             last_actor = $11, \
             lease_owner = CASE WHEN $8::float8 IS NULL THEN NULL ELSE $9 END, \
             lease_expires_at = CASE WHEN $8::float8 IS NULL THEN NULL \
               ELSE now() + $8::float8 * interval '1 second' END, \
             signed_tx_ref = COALESCE(signed_tx_ref, $10) \
           WHERE tenant_id = $1 AND op_id = $2 AND state = $3 \
             AND ($5::bytea IS NULL OR payload_hash = $5) \
             AND ($6::smallint = 0 \
               OR ($6 = 1 AND lease_owner = $7 AND lease_expires_at > now()) \
               OR ($6 = 2 AND (lease_expires_at IS NULL OR lease_expires_at <= now()))) \
           RETURNING version), \
         logged AS ( \
           INSERT INTO operation_transitions \
             (tenant_id, op_id, from_state, to_state, actor, actor_id, reason, version) \
           SELECT $1, $2, $3, $4, $11, $9, $12, version FROM moved) \
         SELECT version FROM moved",
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
                current: Some(
                    state
                        .parse()
                        .map_err(|_| StoreError::Corrupt { what: "state" })?,
                ),
            }),
        };
    };
    Ok((Transitioned { version }, effect))
}
