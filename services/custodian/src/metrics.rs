//! `GET /metrics`: the custodian path read from the database at scrape time through the
//! executor's own login (its withdrawals in flight by state and the age of the oldest, the open
//! escalations of custodian withdrawals), so every instance serves the same truth; then the
//! evidence readers' no-verdict counters and this process's gRPC metrics. Labels are states,
//! owners and reason codes, never an identifier. The alert rules in
//! `deploy/prometheus/alerts.yml` use these names.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use opledger_store::custodian_metrics::{CustodianGauges, IN_FLIGHT_STATES};
use opledger_store::roles::CustodianStore;
use std::fmt::Write as _;

/// Seconds since the oldest custodian withdrawal in flight left APPROVED (0 when none).
pub const OLDEST_IN_FLIGHT: &str = "opledger_custodian_oldest_in_flight_seconds";
/// Custodian withdrawals in flight, by state (SIGNING, SIGNED, BROADCAST, UNKNOWN).
pub const IN_FLIGHT: &str = "opledger_custodian_in_flight";
/// Custodian withdrawals with an open escalation, by owner and reason code.
pub const OPEN_ESCALATIONS: &str = "opledger_custodian_open_escalations";

/// The Prometheus text (version 0.0.4) of `gauges`.
pub fn render(gauges: &CustodianGauges) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP {OLDEST_IN_FLIGHT} Seconds since the oldest custodian withdrawal in flight left \
         APPROVED (its request persisted, or its claim).\n\
         # TYPE {OLDEST_IN_FLIGHT} gauge\n{OLDEST_IN_FLIGHT} {}",
        gauges.oldest_in_flight_secs
    );
    let _ = writeln!(
        out,
        "# HELP {IN_FLIGHT} Custodian withdrawals in flight (funds held), by state.\n\
         # TYPE {IN_FLIGHT} gauge"
    );
    for (state, count) in IN_FLIGHT_STATES.iter().zip(gauges.in_flight) {
        let _ = writeln!(out, "{IN_FLIGHT}{{state=\"{state}\"}} {count}");
    }
    let _ = writeln!(
        out,
        "# HELP {OPEN_ESCALATIONS} Unresolved custodian withdrawals with an escalation, by its \
         owner and reason (funds held until the owner resolves them).\n\
         # TYPE {OPEN_ESCALATIONS} gauge"
    );
    for (owner, reason, count) in &gauges.open_escalations {
        let _ = writeln!(
            out,
            "{OPEN_ESCALATIONS}{{owner=\"{owner}\",reason=\"{reason}\"}} {count}"
        );
    }
    out
}

/// The metrics router over `store`.
pub fn router(store: CustodianStore) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(store)
}

async fn scrape(State(store): State<CustodianStore>) -> axum::response::Response {
    let gauges = store.custodian_gauges().await.map(|gauges| {
        render(&gauges) + &opledger_chain::evidence::no_evidence().render("custodian")
    });
    opledger_grpc::metrics::store_scrape(gauges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_in_flight_state_is_served_and_escalations_by_owner_and_reason() {
        let gauges = CustodianGauges {
            in_flight: [0, 1, 3, 2],
            oldest_in_flight_secs: 7201.5,
            open_escalations: vec![
                ("operations".to_owned(), "CUSTODIAN_NO_LOOKUP".to_owned(), 2),
                (
                    "security".to_owned(),
                    "CUSTODIAN_RECORD_MISMATCH".to_owned(),
                    1,
                ),
            ],
        };
        let text = render(&gauges);
        for line in [
            "# TYPE opledger_custodian_oldest_in_flight_seconds gauge\n",
            "opledger_custodian_oldest_in_flight_seconds 7201.5\n",
            "# TYPE opledger_custodian_in_flight gauge\n",
            "opledger_custodian_in_flight{state=\"SIGNING\"} 0\n",
            "opledger_custodian_in_flight{state=\"SIGNED\"} 1\n",
            "opledger_custodian_in_flight{state=\"BROADCAST\"} 3\n",
            "opledger_custodian_in_flight{state=\"UNKNOWN\"} 2\n",
            "# TYPE opledger_custodian_open_escalations gauge\n",
            "opledger_custodian_open_escalations{owner=\"operations\",reason=\"CUSTODIAN_NO_LOOKUP\"} 2\n",
            "opledger_custodian_open_escalations{owner=\"security\",reason=\"CUSTODIAN_RECORD_MISMATCH\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn nothing_in_flight_reads_zero_and_no_escalation_serves_no_sample() {
        let text = render(&CustodianGauges::default());
        assert!(text.contains("opledger_custodian_oldest_in_flight_seconds 0\n"));
        for state in IN_FLIGHT_STATES {
            let line = format!("opledger_custodian_in_flight{{state=\"{state}\"}} 0\n");
            assert!(text.contains(&line), "{line}");
        }
        assert!(!text.contains("opledger_custodian_open_escalations{"));
        // Every sample line is a name, an optional label set and a number.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap_or_default();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(line.starts_with("opledger_custodian_"), "{line}");
        }
    }
}
