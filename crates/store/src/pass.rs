//! One broadcaster's pass over an operation at a time.
//!
//! Broadcasters read the due queue without locking it ([`Store::next_due`]), so two replicas
//! often pick the same operation. Before its pass, a broadcaster takes the operation's session
//! advisory lock on a connection of its own ([`PassLocks::try_lock`]) and reads the state under
//! it: a pass another broadcaster holds is skipped, and the state a finished one left is the one
//! the next pass starts from, so only one replica calls the signer and submits the signed bytes;
//! a fee bump takes the same lock and checks the latest attempt's age under it, so two replicas'
//! watchers never bump one transfer together.
//! The lock ends with its session: a broadcaster that dies (or whose connection is cut) loses it
//! at once, and a pass that ends without [`PassLock::release`] closes its connection. Nothing here
//! changes an operation; safety never rests on it (signing is idempotent, only stored bytes are
//! submitted, states move by compare-and-swap), only the duplicate work does.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres};

/// The class of the two-key advisory locks of broadcaster passes ("opld" in ASCII).
const PASS_LOCK_CLASS: i32 = 0x6f70_6c64;

/// Connections that hold pass locks: one per pass in flight.
#[derive(Debug, Clone)]
pub struct PassLocks {
    pool: PgPool,
}

/// A held pass lock and the operation's state read under it.
#[derive(Debug)]
pub struct PassLock {
    conn: Option<PoolConnection<Postgres>>,
    key: i32,
    /// The operation's state when the lock was taken.
    pub state: OperationState,
    /// How long before the lock was taken its latest attempt was persisted (by the database's
    /// clock; `None`: no attempt).
    pub latest_attempt_age: Option<std::time::Duration>,
}

/// The lock key of an operation: its tenant and id folded to 32 bits. Two operations that share
/// a key only wait for each other's pass.
fn key(tenant_id: TenantId, op_id: OperationId) -> i32 {
    let folded = tenant_id.as_uuid().as_u128() ^ op_id.as_uuid().as_u128();
    let bits = (0..4).fold(0_u32, |acc, i| acc ^ (folded >> (32 * i)) as u32);
    i32::from_ne_bytes(bits.to_ne_bytes())
}

impl Store {
    /// A lazily connected pool of at most `max_connections` for pass locks, to the same database
    /// as this store (its own pool would be used up by passes waiting for their locks' queries).
    pub fn pass_locks(&self, max_connections: u32) -> PassLocks {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(self.config.acquire_timeout)
            .test_before_acquire(false)
            .connect_lazy_with((*self.pool.connect_options()).clone());
        PassLocks { pool }
    }
}

impl PassLocks {
    /// Takes the pass lock of the operation without waiting: `None` when another pass holds it,
    /// else the lock and the operation's state read after taking it.
    pub async fn try_lock(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<PassLock>> {
        let mut conn = self.pool.acquire().await?;
        let key = key(tenant_id, op_id);
        let (locked,): (bool,) = sqlx::query_as("SELECT pg_try_advisory_lock($1, $2)")
            .bind(PASS_LOCK_CLASS)
            .bind(key)
            .fetch_one(&mut *conn)
            .await?;
        if !locked {
            return Ok(None);
        }
        // From here on the guard owns the session's lock: any failure closes the connection.
        let mut lock = PassLock {
            conn: Some(conn),
            key,
            state: OperationState::Requested,
            latest_attempt_age: None,
        };
        let Some(conn) = lock.conn.as_mut() else {
            return Ok(None);
        };
        let found: Option<(String, Option<f64>)> = sqlx::query_as(
            "SELECT o.state, (SELECT extract(epoch FROM now() - max(a.created_at))::float8 \
               FROM tx_attempts a WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id) \
             FROM withdrawal_ops o WHERE o.tenant_id = $1 AND o.op_id = $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&mut **conn)
        .await?;
        let Some((state, age)) = found else {
            return Err(StoreError::NotFound { what: "operation" });
        };
        lock.state = state
            .parse()
            .map_err(|_| StoreError::Corrupt { what: "state" })?;
        lock.latest_attempt_age = age.map(|secs| std::time::Duration::from_secs_f64(secs.max(0.0)));
        Ok(Some(lock))
    }
}

impl PassLock {
    /// Gives the lock back and its connection to the pool (closed instead, if unlocking fails).
    pub async fn release(mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let unlocked: std::result::Result<(bool,), sqlx::Error> =
            sqlx::query_as("SELECT pg_advisory_unlock($1, $2)")
                .bind(PASS_LOCK_CLASS)
                .bind(self.key)
                .fetch_one(&mut *conn)
                .await;
        if !matches!(unlocked, Ok((true,))) {
            conn.close_on_drop();
        }
    }
}

impl Drop for PassLock {
    fn drop(&mut self) {
        // Not released (an error, a cancelled task): closing the session ends the lock.
        if let Some(conn) = self.conn.as_mut() {
            conn.close_on_drop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_by_operation_and_tenant() {
        let tenant = TenantId::from_uuid(uuid::Uuid::from_u128(7));
        let other = TenantId::from_uuid(uuid::Uuid::from_u128(8));
        let op = OperationId::from_uuid(uuid::Uuid::from_u128(1 << 40));
        let next = OperationId::from_uuid(uuid::Uuid::from_u128((1 << 40) + 1));
        assert_ne!(key(tenant, op), key(tenant, next));
        assert_ne!(key(tenant, op), key(other, op));
        assert_eq!(key(tenant, op), key(tenant, op));
    }
}
