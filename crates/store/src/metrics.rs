//! Operational gauges read from the database at scrape time, so every replica reports the same
//! truth and nothing is lost on restart.

use crate::{Result, Store};

/// The states the pipeline leaves on its own, without a person or the chain deciding: an
/// operation that stays in one of them is a payout that is not moving.
pub const WAITING_STATES: [&str; 3] = ["APPROVED", "SIGNING", "SIGNED"];

/// A point-in-time view of the pipeline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Operations per state name.
    pub by_state: Vec<(String, i64)>,
    /// Age in seconds of the oldest UNKNOWN operation (0 when none).
    pub oldest_unknown_secs: f64,
    /// Age in seconds of the oldest FAILED_TERMINAL operation (0 when none).
    pub oldest_failed_terminal_secs: f64,
    /// Age in seconds of the oldest operation in each of [`WAITING_STATES`] (0 when none): a
    /// payout that is not moving.
    pub oldest_waiting_secs: [f64; 3],
    /// Escalations recorded so far.
    pub escalations: i64,
    /// FAILED_TERMINAL operations by the owner and reason code of their latest escalation: what
    /// each owning team must resolve now (owners and reason codes are a checked vocabulary, never
    /// an identifier).
    pub open_escalations: Vec<(String, String, i64)>,
}

impl Store {
    /// Reads the gauges.
    pub async fn metrics_snapshot(&self) -> Result<Snapshot> {
        let by_state: Vec<(String, i64)> = sqlx::query_as(
            "SELECT state, count(*) FROM withdrawal_ops GROUP BY state ORDER BY state",
        )
        .fetch_all(&self.pool)
        .await?;
        let (unknown, failed, escalations, approved, signing, signed): (
            f64,
            f64,
            i64,
            f64,
            f64,
            f64,
        ) = sqlx::query_as(
            "SELECT \
               coalesce((SELECT extract(epoch FROM now() - min(updated_at))::float8 \
                 FROM withdrawal_ops WHERE state = 'UNKNOWN'), 0), \
               coalesce((SELECT extract(epoch FROM now() - min(updated_at))::float8 \
                 FROM withdrawal_ops WHERE state = 'FAILED_TERMINAL'), 0), \
               (SELECT count(*) FROM escalations), \
               coalesce((SELECT extract(epoch FROM now() - min(updated_at))::float8 \
                 FROM withdrawal_ops WHERE state = 'APPROVED'), 0), \
               coalesce((SELECT extract(epoch FROM now() - min(updated_at))::float8 \
                 FROM withdrawal_ops WHERE state = 'SIGNING'), 0), \
               coalesce((SELECT extract(epoch FROM now() - min(updated_at))::float8 \
                 FROM withdrawal_ops WHERE state = 'SIGNED'), 0)",
        )
        .fetch_one(&self.pool)
        .await?;
        let open_escalations: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT owner, reason_code, count(*) FROM ( \
               SELECT DISTINCT ON (e.tenant_id, e.op_id) e.owner, e.reason_code \
                 FROM escalations e JOIN withdrawal_ops o USING (tenant_id, op_id) \
                WHERE o.state = 'FAILED_TERMINAL' \
                ORDER BY e.tenant_id, e.op_id, e.escalated_at DESC, e.escalation_id DESC) latest \
             GROUP BY owner, reason_code ORDER BY owner, reason_code",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(Snapshot {
            by_state,
            oldest_unknown_secs: unknown,
            oldest_failed_terminal_secs: failed,
            oldest_waiting_secs: [approved, signing, signed],
            escalations,
            open_escalations,
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
        out.push_str(
            "# HELP opledger_oldest_waiting_seconds Age of the oldest operation in a state the \
             pipeline leaves on its own.\n",
        );
        out.push_str("# TYPE opledger_oldest_waiting_seconds gauge\n");
        for (state, secs) in WAITING_STATES.iter().zip(self.oldest_waiting_secs) {
            out.push_str(&format!(
                "opledger_oldest_waiting_seconds{{state=\"{state}\"}} {secs}\n"
            ));
        }
        out.push_str("# HELP opledger_escalations Operations escalated to an owner so far.\n");
        out.push_str("# TYPE opledger_escalations gauge\n");
        out.push_str(&format!("opledger_escalations {}\n", self.escalations));
        out.push_str(
            "# HELP opledger_open_escalations FAILED_TERMINAL operations by the owner and reason \
             of their latest escalation (funds held until the owner resolves them).\n",
        );
        out.push_str("# TYPE opledger_open_escalations gauge\n");
        for (owner, reason, count) in &self.open_escalations {
            out.push_str(&format!(
                "opledger_open_escalations{{owner=\"{owner}\",reason=\"{reason}\"}} {count}\n"
            ));
        }
        out
    }
}
