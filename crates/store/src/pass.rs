//! One broadcaster's pass over an operation at a time.
//!
//! Broadcasters read the due queue without locking it ([`Store::next_due`]), so two replicas
//! often pick the same operation. Before its pass, a broadcaster takes the operation's pass lock
//! on a connection of its own ([`PassLocks::try_lock`], one round trip: `BEGIN` and
//! `opledger_pass_lock`) and reads the state under it: a pass another broadcaster holds is
//! skipped, and the state a finished one left is the one the next pass starts from, so only one
//! replica calls the signer and submits the signed bytes; a fee bump takes the same lock and
//! checks the latest attempt's age under it, so two replicas never bump one transfer together.
//! The lock is a row lock in that connection's transaction (migration 26) on the operation's
//! payload row, which no login may update and so none may lock: no other login can take it or
//! hold it against the workers. It ends with its transaction: a broadcaster that dies (or whose
//! connection is cut) loses it at once, and a pass that ends without [`PassLock::release`] closes
//! its connection. Nothing here changes an operation; safety never rests on it (signing is
//! idempotent, only stored bytes are submitted, states move by compare-and-swap), only the
//! duplicate work does.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres};

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
    /// The operation's state when the lock was taken.
    pub state: OperationState,
    /// How long before the lock was taken its latest attempt was persisted (by the database's
    /// clock; `None`: no attempt).
    pub latest_attempt_age: Option<std::time::Duration>,
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
        // One round trip: the transaction that holds the lock, the lock, and the state read after
        // it (migration 26). No parameters in a multi-statement query: the values are two UUIDs,
        // formatted here.
        let sql = format!(
            "BEGIN; SELECT locked, state, attempt_age FROM opledger_pass_lock('{}', '{}')",
            tenant_id.as_uuid(),
            op_id.as_uuid()
        );
        let found = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut *conn)
            .await
            .map_err(StoreError::from)
            .and_then(|rows| lock_row(&rows));
        let (state, age) = match found {
            Ok(Some((true, Some(state), age))) => (state, age),
            Ok(Some((false, _, _))) => {
                end_transaction(conn);
                return Ok(None);
            }
            // No such operation: the function took no lock.
            Ok(None) => {
                end_transaction(conn);
                return Err(StoreError::NotFound { what: "operation" });
            }
            failed => {
                // The lock may be held with nothing to show for it: ending the session ends it.
                conn.close_on_drop();
                return Err(match failed {
                    Err(e) => e,
                    Ok(_) => StoreError::Corrupt { what: "state" },
                });
            }
        };
        let state = match crate::row::state(&state) {
            Ok(state) => state,
            Err(corrupt) => {
                conn.close_on_drop();
                return Err(corrupt);
            }
        };
        Ok(Some(PassLock {
            conn: Some(conn),
            state,
            latest_attempt_age: age.map(|secs| std::time::Duration::from_secs_f64(secs.max(0.0))),
        }))
    }
}

/// The answer of `opledger_pass_lock` among the rows of its multi-statement query (at most one).
fn lock_row(rows: &[sqlx::postgres::PgRow]) -> Result<Option<LockRow>> {
    use sqlx::Row as _;
    match rows {
        [] => Ok(None),
        [row] => Ok(Some((
            row.try_get("locked")?,
            row.try_get("state")?,
            row.try_get("attempt_age")?,
        ))),
        _ => Err(StoreError::Corrupt { what: "pass lock" }),
    }
}

/// Ends the connection's transaction in the background and gives the connection back to the pool
/// (closed instead, if the rollback fails): the pass is over or never started, and until the
/// rollback lands another pass of the same operation is only skipped, never wrong.
fn end_transaction(mut conn: PoolConnection<Postgres>) {
    tokio::spawn(async move {
        if sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.is_err() {
            conn.close_on_drop();
        }
    });
}

impl PassLock {
    /// Gives the lock back (its transaction ends) and its connection to the pool, in the
    /// background.
    pub async fn release(mut self) {
        if let Some(conn) = self.conn.take() {
            end_transaction(conn);
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

/// The lease of one network's watcher among the instances on one database: a session advisory
/// lock held on a connection of its own, whose key only the broadcaster's role may learn or
/// replace (`opledger_watch_lease`, migration 26). Of several broadcasters only the holder
/// watches the network and fee-bumps its transfers; the others try again each pass and take over
/// within a pass once the holder's session ends (it died, its connection was cut, the primary
/// failed over). A key held by a session of any other role (it read the key in `pg_locks` and took
/// it when the holder's session ended) is replaced by a fresh one, held before it is published.
/// Safety never rests on it (every move is a compare-and-swap, each bump is under its operation's
/// pass lock), only the duplicate chain reads and records do.
#[derive(Debug)]
pub struct WatchLease {
    options: sqlx::postgres::PgConnectOptions,
    network: String,
    /// The lease's own connection (kept while the lease is only tried, so a standby does not
    /// open a session every pass), and the key its session holds.
    conn: tokio::sync::Mutex<Option<(sqlx::PgConnection, Option<i32>)>>,
}

impl Store {
    /// The watcher lease of `network` on this store's database (not yet taken).
    pub fn watch_lease(&self, network: &str) -> WatchLease {
        WatchLease {
            options: (*self.pool.connect_options()).clone(),
            network: network.to_owned(),
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
            *slot = Some((fresh, None));
        }
        let Some((conn, held)) = slot.as_mut() else {
            return false;
        };
        let answer: std::result::Result<(Option<i32>,), sqlx::Error> =
            sqlx::query_as("SELECT opledger_watch_lease($1, $2)")
                .bind(&self.network)
                .bind(*held)
                .fetch_one(&mut *conn)
                .await;
        match answer {
            Ok((key,)) => {
                *held = key;
                key.is_some()
            }
            Err(_) => {
                // The session is gone, and with it any lock it held: a new one next pass.
                *slot = None;
                false
            }
        }
    }
}
