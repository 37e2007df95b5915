//! `GET /metrics`: the witness's lag (ages of the oldest proposed release no attestation matches
//! and of the oldest undecided credit, read from the database at scrape time) and its outcomes
//! since start. The alert rules in
//! `deploy/prometheus/alerts.yml` use these names.

use crate::outcome::{CustodianOutcome, Outcome};
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use opledger_store::roles::WitnessStore;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Age in seconds of the oldest proposed release whose hold is open and that no attestation
/// matches (0 when there is none).
pub const OLDEST_UNWITNESSED: &str = "opledger_witness_oldest_unwitnessed_seconds";
/// Proposals examined, by outcome (`attested`, `no_verdict`, `refused`).
pub const EXAMINED: &str = "opledger_witness_examined_total";
/// Age in seconds of the oldest proposed credit neither attested nor refused (0 when none).
pub const OLDEST_UNWITNESSED_CREDIT: &str = "opledger_witness_oldest_unwitnessed_credit_seconds";
/// Proposed credits examined, by outcome (`attested`, `no_verdict`, `refused`).
pub const CREDITS_EXAMINED: &str = "opledger_witness_credits_examined_total";
/// Proposed custodian releases examined, by outcome (`attested`, `waiting`, `refused`,
/// `no_account`).
pub const CUSTODIAN_EXAMINED: &str = "opledger_witness_custodian_examined_total";
/// The outcome labels of [`CUSTODIAN_EXAMINED`], in counter order.
const CUSTODIAN_LABELS: [&str; 4] = ["attested", "waiting", "refused", "no_account"];

/// The witness's outcome counters.
#[derive(Debug, Default)]
pub struct Counters {
    attested: AtomicU64,
    no_verdict: AtomicU64,
    refused: AtomicU64,
    credits: [AtomicU64; 3],
    custodian: [AtomicU64; 4],
}

impl Counters {
    /// Counts one outcome.
    pub fn count(&self, outcome: Outcome) {
        let counter = match outcome {
            Outcome::Attested => &self.attested,
            Outcome::NoVerdict => &self.no_verdict,
            Outcome::Refused(_) => &self.refused,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one outcome of the credit pass.
    pub fn count_credit(&self, outcome: Outcome) {
        let index = match outcome {
            Outcome::Attested => 0,
            Outcome::NoVerdict => 1,
            Outcome::Refused(_) => 2,
        };
        self.credits[index].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one outcome of the custodian pass.
    pub fn count_custodian(&self, outcome: CustodianOutcome) {
        let index = match outcome {
            CustodianOutcome::Attested => 0,
            CustodianOutcome::Waiting(_) => 1,
            CustodianOutcome::Refused(_) => 2,
            CustodianOutcome::NoAccount => 3,
        };
        self.custodian[index].fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, oldest: f64, oldest_credit: f64) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP {OLDEST_UNWITNESSED} Age of the oldest proposed release no attestation matches.\n\
             # TYPE {OLDEST_UNWITNESSED} gauge\n{OLDEST_UNWITNESSED} {oldest}"
        );
        let _ = writeln!(
            out,
            "# HELP {EXAMINED} Proposed releases examined by the witness, by outcome.\n\
             # TYPE {EXAMINED} counter"
        );
        for (label, counter) in [
            ("attested", &self.attested),
            ("no_verdict", &self.no_verdict),
            ("refused", &self.refused),
        ] {
            let _ = writeln!(
                out,
                "{EXAMINED}{{outcome=\"{label}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP {OLDEST_UNWITNESSED_CREDIT} Age of the oldest proposed credit neither attested nor refused.\n\
             # TYPE {OLDEST_UNWITNESSED_CREDIT} gauge\n{OLDEST_UNWITNESSED_CREDIT} {oldest_credit}"
        );
        let _ = writeln!(
            out,
            "# HELP {CREDITS_EXAMINED} Proposed credits examined by the witness, by outcome.\n\
             # TYPE {CREDITS_EXAMINED} counter"
        );
        for (label, counter) in ["attested", "no_verdict", "refused"]
            .iter()
            .zip(&self.credits)
        {
            let _ = writeln!(
                out,
                "{CREDITS_EXAMINED}{{outcome=\"{label}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP {CUSTODIAN_EXAMINED} Proposed custodian releases examined by the witness, by outcome.\n\
             # TYPE {CUSTODIAN_EXAMINED} counter"
        );
        for (label, counter) in CUSTODIAN_LABELS.iter().zip(&self.custodian) {
            let _ = writeln!(
                out,
                "{CUSTODIAN_EXAMINED}{{outcome=\"{label}\"}} {}",
                counter.load(Ordering::Relaxed)
            );
        }
        out
    }
}

#[derive(Clone)]
struct Scrape {
    store: WitnessStore,
    counters: Arc<Counters>,
}

/// The metrics router over `store` and the witness's `counters`.
pub fn router(store: WitnessStore, counters: Arc<Counters>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Scrape { store, counters })
}

async fn scrape(State(scrape): State<Scrape>) -> axum::response::Response {
    let text = async {
        let releases = scrape.store.oldest_unwitnessed_secs().await?;
        let credits = scrape.store.oldest_unwitnessed_credit_secs().await?;
        Ok(scrape.counters.render(releases.unwrap_or(0.0), credits)
            + &opledger_chain::evidence::no_evidence().render("witness"))
    };
    opledger_grpc::metrics::store_scrape(text.await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custodian_outcomes_are_counted_by_label() {
        let counters = Counters::default();
        counters.count_custodian(CustodianOutcome::Attested);
        counters.count_custodian(CustodianOutcome::Refused("CUSTODIAN_STATUS_DIFFERS"));
        counters.count_custodian(CustodianOutcome::NoAccount);
        counters.count_custodian(CustodianOutcome::NoAccount);
        let text = counters.render(0.0, 0.0);
        assert!(text.contains(&format!("# TYPE {CUSTODIAN_EXAMINED} counter")));
        for (label, n) in [
            ("attested", 1),
            ("waiting", 0),
            ("refused", 1),
            ("no_account", 2),
        ] {
            let line = format!("{CUSTODIAN_EXAMINED}{{outcome=\"{label}\"}} {n}\n");
            assert!(text.contains(&line), "{line}");
        }
    }
}
