//! PostgreSQL store of opledger: operations, their payloads, the ledger and the transition log.
//!
//! This crate knows SQL and domain types only. It never sees protobuf types, and it never changes
//! an operation's state except through [`Store::transition`], which checks the domain transition
//! table and the acting role before one conditional `UPDATE` executed by the database.

pub mod approvals;
pub mod broadcast;
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
pub mod signing;
pub mod transition;
pub mod trust;
pub mod wallets;

pub use error::{Result, StoreError};

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::str::FromStr;
use std::time::Duration;

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
}

impl Store {
    /// Connects a pool to `url` (the URL itself is never logged: it may carry a password).
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Store> {
        let options = PgConnectOptions::from_str(url)?.application_name("opledger");
        // No ping before every acquire: it would add a round trip to every call. A connection
        // that died while idle fails its first statement instead, and every write path is safe to
        // retry (idempotency keys, conditional updates).
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .acquire_timeout(config.acquire_timeout)
            .test_before_acquire(false)
            .connect_with(options)
            .await?;
        Ok(Store { pool, config })
    }

    /// Wraps an existing pool.
    pub fn from_pool(pool: PgPool, config: StoreConfig) -> Store {
        Store { pool, config }
    }

    /// The underlying pool, for health checks and tests.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// True when the database answers a trivial query.
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }
}
