//! The custodian executor's gauges, read from the database at scrape time through its own login
//! (`opledger_custodian` reads `withdrawal_ops`, `custodian_requests` and `escalations`,
//! migration 32), so every instance reports the same truth and nothing is lost on restart: its
//! withdrawals in flight and the age of the oldest, and the open escalations of custodian
//! withdrawals. Read-only: nothing here writes.

use crate::{Result, Store};

/// The states of a custodian withdrawal in flight: claimed for its provider or sent to it, not
/// yet settled or released (its funds are held).
pub const IN_FLIGHT_STATES: [&str; 4] = ["SIGNING", "SIGNED", "BROADCAST", "UNKNOWN"];

/// The custodian path at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CustodianGauges {
    /// Custodian withdrawals in each of [`IN_FLIGHT_STATES`], in that order.
    pub in_flight: [i64; 4],
    /// Seconds since the oldest custodian withdrawal in flight left APPROVED: since its request
    /// was persisted (SIGNED and after: the request may have reached the provider from then on),
    /// or since its claim (SIGNING, nothing stored yet). 0 when none is in flight.
    pub oldest_in_flight_secs: f64,
    /// Custodian withdrawals with an open escalation, by the escalation's owner and reason code
    /// (a checked vocabulary, never an identifier): (owner, reason, withdrawals). An escalation
    /// is open while its withdrawal is unresolved, neither CONFIRMED, VERIFIED_NOT_SENT nor
    /// REJECTED; a withdrawal escalated for two reasons counts under each.
    pub open_escalations: Vec<(String, String, i64)>,
}

impl Store {
    /// Reads the custodian executor's gauges.
    pub async fn custodian_gauges(&self) -> Result<CustodianGauges> {
        let rows: Vec<(String, i64, f64)> = sqlx::query_as(
            "SELECT o.state, count(*), \
               coalesce(extract(epoch FROM now() - min(coalesce(q.created_at, o.updated_at))), 0)::float8 \
             FROM withdrawal_ops o LEFT JOIN custodian_requests q USING (tenant_id, op_id) \
             WHERE o.executor = 'custodian' \
               AND o.state IN ('SIGNING', 'SIGNED', 'BROADCAST', 'UNKNOWN') \
             GROUP BY o.state",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut gauges = CustodianGauges::default();
        for (state, count, age) in rows {
            if let Some(i) = IN_FLIGHT_STATES.iter().position(|s| *s == state) {
                gauges.in_flight[i] = count;
            }
            gauges.oldest_in_flight_secs = gauges.oldest_in_flight_secs.max(age.max(0.0));
        }
        gauges.open_escalations = sqlx::query_as(
            "SELECT owner, reason_code, count(*) FROM ( \
               SELECT DISTINCT e.tenant_id, e.op_id, e.owner, e.reason_code \
                 FROM escalations e JOIN withdrawal_ops o USING (tenant_id, op_id) \
                WHERE o.executor = 'custodian' \
                  AND o.state NOT IN ('CONFIRMED', 'VERIFIED_NOT_SENT', 'REJECTED')) open \
             GROUP BY owner, reason_code ORDER BY owner, reason_code",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(gauges)
    }
}
