//! One broadcaster's pass over an operation at a time.
//!
//! Broadcasters read the due queue without locking it ([`Store::next_due`]), so two replicas
//! often pick the same operation. Before its pass, a broadcaster takes the operation's session
//! advisory lock on a connection of its own ([`PassLocks::try_lock`], one round trip through
//! `opledger_pass_lock`) and reads the state under it: a pass another broadcaster holds is
//! skipped, and the state a finished one left is the one the next pass starts from, so only one
//! replica calls the signer and submits the signed bytes; a fee bump takes the same lock and
//! checks the latest attempt's age under it, so two replicas never bump one transfer together.
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

/// What `opledger_pass_lock` answers: taken, and then the state and the latest attempt's age.
type LockRow = (bool, Option<String>, Option<f64>);

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
        // One round trip: the lock, and the state read after it (migration 20).
        let found: std::result::Result<Option<LockRow>, sqlx::Error> = sqlx::query_as(
            "SELECT locked, state, attempt_age FROM opledger_pass_lock($1, $2, $3, $4)",
        )
        .bind(PASS_LOCK_CLASS)
        .bind(key)
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&mut *conn)
        .await;
        let (state, age) = match found {
            Ok(Some((false, _, _))) => return Ok(None),
            Ok(Some((true, Some(state), age))) => (state, age),
            // No such operation: the function gave the lock back before answering.
            Ok(None) => return Err(StoreError::NotFound { what: "operation" }),
            failed => {
                // The lock may be held with nothing to show for it: ending the session ends it.
                conn.close_on_drop();
                return Err(match failed {
                    Err(e) => e.into(),
                    Ok(_) => StoreError::Corrupt { what: "state" },
                });
            }
        };
        let state = match state.parse() {
            Ok(state) => state,
            Err(_) => {
                conn.close_on_drop();
                return Err(StoreError::Corrupt { what: "state" });
            }
        };
        Ok(Some(PassLock {
            conn: Some(conn),
            key,
            state,
            latest_attempt_age: age.map(|secs| std::time::Duration::from_secs_f64(secs.max(0.0))),
        }))
    }
}

impl PassLock {
    /// Gives the lock back and its connection to the pool (closed instead, if unlocking fails).
    /// The unlock runs in the background: the pass is over, and until the unlock lands another
    /// pass of the same operation is only skipped, never wrong.
    pub async fn release(mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let key = self.key;
        tokio::spawn(async move {
            let unlocked: std::result::Result<(bool,), sqlx::Error> =
                sqlx::query_as("SELECT pg_advisory_unlock($1, $2)")
                    .bind(PASS_LOCK_CLASS)
                    .bind(key)
                    .fetch_one(&mut *conn)
                    .await;
            if !matches!(unlocked, Ok((true,))) {
                conn.close_on_drop();
            }
        });
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

/// The class of the advisory locks that elect one watcher per network ("watc" in ASCII).
const WATCH_LOCK_CLASS: i32 = 0x7761_7463;

/// The lock key of a network: its name folded to 32 bits (FNV-1a). Two networks that share a key
/// are watched by the same instance, which is harmless.
fn network_key(network: &str) -> i32 {
    let hash = network.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    i32::from_ne_bytes(hash.to_ne_bytes())
}

/// The lease of one network's watcher among the instances on one database: a session advisory
/// lock held on a connection of its own. Of several broadcasters only the holder watches the
/// network and fee-bumps its transfers; the others try again each pass and take over within a
/// pass once the holder's session ends (it died, its connection was cut, the primary failed
/// over). Safety never rests on it (every move is a compare-and-swap, each bump is under its
/// operation's pass lock), only the duplicate chain reads and records do.
#[derive(Debug)]
pub struct WatchLease {
    options: sqlx::postgres::PgConnectOptions,
    key: i32,
    /// The lease's own connection (kept while the lease is only tried, so a standby does not
    /// open a session every pass), and whether its session holds the lock.
    conn: tokio::sync::Mutex<Option<(sqlx::PgConnection, bool)>>,
}

impl Store {
    /// The watcher lease of `network` on this store's database (not yet taken).
    pub fn watch_lease(&self, network: &str) -> WatchLease {
        WatchLease {
            options: (*self.pool.connect_options()).clone(),
            key: network_key(network),
            conn: tokio::sync::Mutex::new(None),
        }
    }
}

impl WatchLease {
    /// Whether this instance holds the lease now: kept (its session still answers, and a
    /// session advisory lock lasts as long as its session), or taken now without waiting. False
    /// while another instance holds it, and when the database cannot be reached (nothing is
    /// watched without the store anyway). One query.
    pub async fn hold(&self) -> bool {
        use sqlx::Connection as _;
        let mut slot = self.conn.lock().await;
        if slot.is_none() {
            let Ok(fresh) = sqlx::PgConnection::connect_with(&self.options).await else {
                return false;
            };
            *slot = Some((fresh, false));
        }
        let Some((conn, held)) = slot.as_mut() else {
            return false;
        };
        let answer: std::result::Result<(bool,), sqlx::Error> = if *held {
            sqlx::query_as("SELECT true").fetch_one(&mut *conn).await
        } else {
            sqlx::query_as("SELECT pg_try_advisory_lock($1, $2)")
                .bind(WATCH_LOCK_CLASS)
                .bind(self.key)
                .fetch_one(&mut *conn)
                .await
        };
        match answer {
            Ok((now,)) => {
                *held = now;
                now
            }
            Err(_) => {
                // The session is gone, and with it any lock it held: a new one next pass.
                *slot = None;
                false
            }
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

    #[test]
    fn network_keys_are_stable_and_differ_by_name() {
        assert_eq!(network_key("anvil"), network_key("anvil"));
        assert_ne!(network_key("anvil"), network_key("ethereum-mainnet"));
        assert_ne!(network_key(""), network_key("a"));
    }
}
