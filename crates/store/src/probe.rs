//! Whether the database can take this service's writes now: the readiness a service reports.

use sqlx::Connection;
use sqlx::PgConnection;
use sqlx::postgres::PgConnectOptions;
use std::time::Duration;

/// A probe of the store's database on a connection of its own, outside the pool, so that a pool
/// busy with work never reads as an unready database and a dead primary is seen at once.
#[derive(Debug)]
pub struct DatabaseProbe {
    store: crate::Store,
    options: PgConnectOptions,
    conn: Option<PgConnection>,
    timeout: Duration,
}

impl DatabaseProbe {
    /// A probe that connects like `store` and gives each check at most `timeout`.
    pub fn new(store: &crate::Store, timeout: Duration) -> DatabaseProbe {
        DatabaseProbe {
            store: store.clone(),
            options: (*store.pool().connect_options()).clone(),
            conn: None,
            timeout,
        }
    }

    /// True when the database answers within the timeout and is a primary (not in recovery:
    /// a node demoted by a failover takes no writes). A failed check drops the probe's
    /// connection; the next one connects afresh (through the router, to the new primary). It
    /// also marks the store's pooled connections stale ([`crate::Store::mark_connections_stale`]),
    /// so that calls after the failover do not each meet a connection of the old primary.
    pub async fn accepts_writes(&mut self) -> bool {
        let ready = self.try_accepts_writes().await;
        if !ready {
            self.store.mark_connections_stale();
        }
        ready
    }

    async fn try_accepts_writes(&mut self) -> bool {
        let checked = tokio::time::timeout(self.timeout, self.check()).await;
        match checked {
            Ok(Ok(true)) => true,
            Ok(Ok(false)) => {
                self.conn = None;
                false
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %crate::StoreError::from(e).log_safe(), "database probe failed");
                self.conn = None;
                false
            }
            Err(_) => {
                self.conn = None;
                false
            }
        }
    }

    async fn check(&mut self) -> Result<bool, sqlx::Error> {
        let conn = match &mut self.conn {
            Some(conn) => conn,
            None => self
                .conn
                .insert(PgConnection::connect_with(&self.options).await?),
        };
        let (in_recovery,): (bool,) = sqlx::query_as("SELECT pg_is_in_recovery()")
            .fetch_one(conn)
            .await?;
        Ok(!in_recovery)
    }
}
