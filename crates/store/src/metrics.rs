//! Operational gauges read from the database at scrape time, so every replica reports the same
//! truth and nothing is lost on restart.

use crate::{Result, Store};

/// A point-in-time view of the pipeline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Operations per state name.
    pub by_state: Vec<(String, i64)>,
    /// Age in seconds of the oldest UNKNOWN operation (0 when none).
    pub oldest_unknown_secs: f64,
    /// Age in seconds of the oldest FAILED_TERMINAL operation (0 when none).
    pub oldest_failed_terminal_secs: f64,
    /// Escalations recorded so far.
    pub escalations: i64,
}

impl Store {
    /// Reads the gauges.
    pub async fn metrics_snapshot(&self) -> Result<Snapshot> {
        let by_state: Vec<(String, i64)> = sqlx::query_as(
            "SELECT state, count(*) FROM withdrawal_ops GROUP BY state ORDER BY state",
        )
        .fetch_all(&self.pool)
        .await?;
        let (unknown, failed, escalations): (f64, f64, i64) = sqlx::query_as(
            "SELECT \
               coalesce((SELECT extract(epoch FROM now() - min(updated_at))::float8 \
                 FROM withdrawal_ops WHERE state = 'UNKNOWN'), 0), \
               coalesce((SELECT extract(epoch FROM now() - min(updated_at))::float8 \
                 FROM withdrawal_ops WHERE state = 'FAILED_TERMINAL'), 0), \
               (SELECT count(*) FROM escalations)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Snapshot {
            by_state,
            oldest_unknown_secs: unknown,
            oldest_failed_terminal_secs: failed,
            escalations,
        })
    }
}

impl Snapshot {
    /// Prometheus text exposition (version 0.0.4). Metric names are defined here, once.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP opledger_operations Withdrawal operations by state.\n");
        out.push_str("# TYPE opledger_operations gauge\n");
        for (state, count) in &self.by_state {
            out.push_str(&format!(
                "opledger_operations{{state=\"{state}\"}} {count}\n"
            ));
        }
        out.push_str(
            "# HELP opledger_oldest_unresolved_seconds Age of the oldest unresolved operation.\n",
        );
        out.push_str("# TYPE opledger_oldest_unresolved_seconds gauge\n");
        out.push_str(&format!(
            "opledger_oldest_unresolved_seconds{{state=\"UNKNOWN\"}} {}\n",
            self.oldest_unknown_secs
        ));
        out.push_str(&format!(
            "opledger_oldest_unresolved_seconds{{state=\"FAILED_TERMINAL\"}} {}\n",
            self.oldest_failed_terminal_secs
        ));
        out.push_str("# HELP opledger_escalations Operations escalated to an owner so far.\n");
        out.push_str("# TYPE opledger_escalations gauge\n");
        out.push_str(&format!("opledger_escalations {}\n", self.escalations));
        out
    }
}
