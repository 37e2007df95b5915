//! PostgreSQL store of opledger: operations, their payloads, the ledger and the transition log.
//!
//! This crate knows SQL and domain types only. It never sees protobuf types, and it never changes
//! an operation's state except through [`Store::transition`], which checks the domain transition
//! table and the acting role before one conditional `UPDATE` executed by the database.
//!
//! A service reaches the store through its role's handle in [`roles`] (exactly the calls that
//! service makes, matching its database login's grants); the whole [`Store`] is the
//! administrator's (`opledger-admin`), the benchmarks' and the tests'.

pub mod approvals;
pub mod broadcast;
pub mod credits;
pub mod custodian;
pub mod custodian_bindings;
pub mod custodian_metrics;
pub mod custodian_witness;
mod error;
pub mod executors;
pub mod inbox;
pub mod invariants;
pub mod keys;
pub mod ledger;
pub mod metrics;
pub mod operations;
pub mod pass;
pub mod probe;
pub mod queue;
pub mod roles;
mod row;
mod shared;
pub mod signing;
pub mod transition;
pub mod trust;
pub mod wallets;
pub mod witness;

pub use error::{Result, StoreError};

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The embedded schema migrations, applied by the admin CLI, the dev stack and the test harness.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// How to reach the database and how the store behaves.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Maximum pooled connections.
    pub max_connections: u32,
    /// How long a call waits for a free connection before failing as unavailable.
    pub acquire_timeout: Duration,
    /// How far back the "same destination and amount" risk signal looks.
    pub risk_window: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            risk_window: Duration::from_secs(24 * 3600),
        }
    }
}

/// A handle on the database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    config: StoreConfig,
    stale: Arc<Staleness>,
}

/// Which pooled connections may predate a lost primary: those opened before `marked` (nanoseconds
/// after `base`; 0: none). Checked in-process when a connection is handed out, no round trip.
#[derive(Debug)]
struct Staleness {
    base: Instant,
    marked: AtomicU64,
}

impl Staleness {
    fn new() -> Staleness {
        Staleness {
            base: Instant::now(),
            marked: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether a connection of this age was opened after the latest mark.
    fn fresh(&self, age: Duration) -> bool {
        let marked = self.marked.load(Ordering::Relaxed);
        let age = u64::try_from(age.as_nanos()).unwrap_or(u64::MAX);
        marked == 0 || self.now().saturating_sub(age) > marked
    }
}

impl Store {
    /// Connects a pool to `url` (the URL itself is never logged: it may carry a password).
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Store> {
        let options = PgConnectOptions::from_str(url)?.application_name("opledger");
        // No ping before every acquire: it would add a round trip to every call. A connection
        // that died while idle fails its first statement instead, and every write path is safe to
        // retry (idempotency keys, conditional updates).
        // A connection opened before the database was last seen lost (a failover: it may still
        // lead to the old primary, or be cut) is closed when handed out, instead of failing a
        // call each; see `Store::mark_connections_stale`.
        let stale = Arc::new(Staleness::new());
        let check = stale.clone();
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .acquire_timeout(config.acquire_timeout)
            .test_before_acquire(false)
            .before_acquire(move |_conn, meta| {
                let fresh = check.fresh(meta.age);
                Box::pin(async move { Ok(fresh) })
            })
            .connect_with(options)
            .await?;
        Ok(Store {
            pool,
            config,
            stale,
        })
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: PgPool, config: StoreConfig) -> Store {
        Store {
            pool,
            config,
            stale: Arc::new(Staleness::new()),
        }
    }

    /// The database was seen lost (the readiness probe's connection failed, or it reached a
    /// standby): every connection pooled until now is closed when next handed out, and a new one
    /// is opened in its place (through the router, to the current primary). Pools built by
    /// [`Store::connect`] only.
    pub fn mark_connections_stale(&self) {
        self.stale
            .marked
            .store(self.stale.now().max(1), Ordering::Relaxed);
    }

    /// The underlying pool, for health checks and tests.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[cfg(test)]
mod tests {
    use super::Staleness;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    #[test]
    fn connections_opened_before_the_mark_are_stale_and_later_ones_fresh() {
        let stale = Staleness::new();
        std::thread::sleep(Duration::from_millis(20));
        // Nothing marked: every connection is fresh, however old.
        assert!(stale.fresh(Duration::from_millis(15)));
        stale.marked.store(stale.now(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        // Opened 15 ms ago: after the mark (20 ms ago). Opened 30 ms ago: before it.
        assert!(stale.fresh(Duration::from_millis(15)));
        assert!(!stale.fresh(Duration::from_millis(30)));
    }
}
