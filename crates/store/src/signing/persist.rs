//! Persisting signed attempts at the nonces the module root allocates: originals (one claim, or a
//! batch of one sender in one transaction) moving their operations SIGNING -> SIGNED, and
//! replacements (fee bump, cancel) under a guard checked with the operation's row locked.

use super::attempts::{
    Attempt, AttemptKind, AttemptRow, NewAttempt, SELECT_SIGNED_ATTEMPTS, insert_attempt,
};
use super::claims::{Sender, SignClaim};
use super::take_nonces;
use crate::transition::{LeaseGuard, TransitionRequest, transition_in};
use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState};
use sqlx::PgConnection;
use std::time::Duration;

/// What must hold, under the operation's row lock, before a replacement is signed.
#[derive(Debug, Clone, Copy)]
pub struct ReplacementGuard<'a> {
    /// The states the operation may be in.
    pub states: &'a [OperationState],
    /// The least age of the latest attempt (from its `created_at`, by the database clock).
    pub min_age: Duration,
}

/// Why a replacement guard refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardRefusal {
    /// The operation is in a state the guard does not allow.
    State(OperationState),
    /// The latest attempt is younger than the guard's minimum age.
    TooRecent {
        /// Its age.
        age: Duration,
        /// The minimum.
        min_age: Duration,
    },
}

/// Why no replacement was persisted (besides a store failure).
#[derive(Debug)]
pub enum ReplacementError<E> {
    /// The guard refused: nothing was signed.
    Refused(GuardRefusal),
    /// Signing failed.
    Sign(E),
}

impl Store {
    /// In one transaction: takes the sender's next nonce (starting at `initial_nonce` for a new
    /// sender), calls `sign` with it, persists the original attempt, advances the nonce and moves
    /// the operation SIGNING -> SIGNED under `owner`'s lease. Nothing is kept if any step fails.
    pub async fn persist_signed<E>(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        sender: &Sender<'_>,
        sign: impl FnOnce(u64) -> std::result::Result<NewAttempt, E>,
    ) -> Result<std::result::Result<Attempt, E>> {
        let mut tx = self.pool.begin().await?;
        let nonce = take_nonces(&mut tx, sender, 1).await?;
        let signed = match sign(nonce) {
            Ok(signed) => signed,
            Err(e) => return Ok(Err(e)),
        };
        let claim = SignClaim {
            tenant_id,
            op_id,
            owner,
        };
        let mut attempt = record_signed(&mut tx, sender, &claim, nonce, &signed).await?;
        opledger_failpoint::hit("sign.before_commit");
        tx.commit().await?;
        opledger_failpoint::hit("sign.after_commit");
        self.release_acknowledged(std::slice::from_mut(&mut attempt), tenant_id, op_id)
            .await;
        Ok(Ok(attempt))
    }

    /// [`Store::persist_signed`] for several claimed operations of one sender in ONE transaction:
    /// one lock of the sender's nonce row, consecutive nonces in `claims` order, one durable
    /// commit. `sign(i, nonce)` signs `claims[i]`. All or nothing: when any claim is no longer held
    /// (lease lost) or any signing fails, everything is rolled back (no attempt, no nonce used) and
    /// `None` is returned, so the caller persists each claim on its own and each gets its own
    /// answer.
    pub async fn persist_signed_batch<E>(
        &self,
        sender: &Sender<'_>,
        claims: &[SignClaim<'_>],
        mut sign: impl FnMut(usize, u64) -> std::result::Result<NewAttempt, E>,
    ) -> Result<Option<Vec<Attempt>>> {
        let count =
            u64::try_from(claims.len()).map_err(|_| StoreError::Corrupt { what: "batch" })?;
        let mut tx = self.pool.begin().await?;
        let first = take_nonces(&mut tx, sender, count).await?;
        let mut attempts = Vec::with_capacity(claims.len());
        for (i, (claim, nonce)) in claims.iter().zip(first..).enumerate() {
            let Ok(signed) = sign(i, nonce) else {
                return Ok(None);
            };
            match record_signed(&mut tx, sender, claim, nonce, &signed).await {
                Ok(attempt) => attempts.push(attempt),
                // The claim was lost (lease expired and reclaimed): nothing of the batch is kept.
                Err(StoreError::Conflict { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        opledger_failpoint::hit("sign.before_commit");
        tx.commit().await?;
        opledger_failpoint::hit("sign.after_commit");
        let keys: Vec<(TenantId, OperationId, u32)> = claims
            .iter()
            .zip(&attempts)
            .map(|(c, a)| (c.tenant_id, c.op_id, a.attempt))
            .collect();
        if self.release(&keys).await.is_ok() {
            for attempt in &mut attempts {
                attempt.released = true;
            }
        }
        Ok(Some(attempts))
    }

    /// Persists a replacement (fee bump or cancel) of the latest attempt as the next attempt;
    /// `sign` receives every attempt, oldest first (the original, whose sender and nonce every
    /// replacement must keep, and the latest, which it replaces). In the transaction that locks the operation's row, the
    /// operation must be in one of `guard.states` and its latest attempt at least `guard.min_age`
    /// old (measured by the database clock); otherwise nothing is signed or written and the
    /// refusal says why.
    pub async fn persist_replacement<E>(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        guard: &ReplacementGuard<'_>,
        sign: impl FnOnce(&[Attempt]) -> std::result::Result<NewAttempt, E>,
    ) -> Result<std::result::Result<Attempt, ReplacementError<E>>> {
        let mut tx = self.pool.begin().await?;
        let row: Option<(String, DateTime<Utc>)> = sqlx::query_as(
            "SELECT state, now() FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2 FOR UPDATE",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&mut *tx)
        .await?;
        let Some((state, now)) = row else {
            return Err(StoreError::NotFound { what: "withdrawal" });
        };
        let state: OperationState = crate::row::state(&state)?;
        if !guard.states.contains(&state) {
            return Ok(Err(ReplacementError::Refused(GuardRefusal::State(state))));
        }
        let rows: Vec<AttemptRow> = sqlx::query_as(SELECT_SIGNED_ATTEMPTS)
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .fetch_all(&mut *tx)
            .await?;
        let attempts = rows
            .into_iter()
            .map(AttemptRow::into_attempt)
            .collect::<Result<Vec<_>>>()?;
        let (Some(original), Some(latest)) = (attempts.first(), attempts.last()) else {
            return Err(StoreError::Corrupt {
                what: "signed operation without attempt",
            });
        };
        let age = (now - latest.created_at).to_std().unwrap_or(Duration::ZERO);
        if age < guard.min_age {
            return Ok(Err(ReplacementError::Refused(GuardRefusal::TooRecent {
                age,
                min_age: guard.min_age,
            })));
        }
        let signed = match sign(&attempts) {
            Ok(signed) => signed,
            Err(e) => return Ok(Err(ReplacementError::Sign(e))),
        };
        // A replacement keeps the original's sender, nonce and chain: a transaction of another
        // account at that nonce could not replace the original, and could be mined beside it.
        // (The database refuses such a row too.)
        if signed.nonce != original.signed.nonce
            || signed.sender != original.signed.sender
            || signed.chain_id != original.signed.chain_id
            || signed.kind == AttemptKind::Original
        {
            return Err(StoreError::Corrupt {
                what: "replacement attempt",
            });
        }
        let attempt = insert_attempt(
            &mut tx,
            tenant_id,
            op_id,
            latest.attempt + 1,
            &latest.network,
            &signed,
        )
        .await?;
        tx.commit().await?;
        let mut attempt = attempt;
        self.release_acknowledged(std::slice::from_mut(&mut attempt), tenant_id, op_id)
            .await;
        Ok(Ok(attempt))
    }
}

/// Persists the original attempt `signed` of a claimed operation (it must use `nonce` and come
/// from the sender) and moves the operation SIGNING -> SIGNED under the claim's lease; a lost
/// lease is [`StoreError::Conflict`].
async fn record_signed(
    conn: &mut PgConnection,
    sender: &Sender<'_>,
    claim: &SignClaim<'_>,
    nonce: u64,
    signed: &NewAttempt,
) -> Result<Attempt> {
    if signed.nonce != nonce
        || signed.kind != AttemptKind::Original
        || signed.sender != sender.address
    {
        return Err(StoreError::Corrupt {
            what: "signed attempt",
        });
    }
    let attempt = insert_attempt(
        conn,
        claim.tenant_id,
        claim.op_id,
        1,
        sender.network,
        signed,
    )
    .await?;
    let mut done = TransitionRequest::new(
        claim.tenant_id,
        claim.op_id,
        OperationState::Signing,
        OperationState::Signed,
        Actor::Signer,
        claim.owner,
        "signed and persisted",
    );
    done.lease_guard = LeaseGuard::HeldBy(claim.owner);
    done.signed_tx_ref = Some(&signed.tx_hash);
    transition_in(conn, &done).await?;
    Ok(attempt)
}
