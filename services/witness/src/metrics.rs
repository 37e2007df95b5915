//! `GET /metrics`: the witness's lag (age of the oldest proposed release no attestation matches,
//! read from the database at scrape time) and its outcomes since start. The alert rules in
//! `deploy/prometheus/alerts.yml` use these names.

use crate::attest::Outcome;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use opledger_store::Store;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Age in seconds of the oldest proposed release whose hold is open and that no attestation
/// matches (0 when there is none).
pub const OLDEST_UNWITNESSED: &str = "opledger_witness_oldest_unwitnessed_seconds";
/// Proposals examined, by outcome (`attested`, `no_verdict`, `refused`).
pub const EXAMINED: &str = "opledger_witness_examined_total";

/// The witness's outcome counters.
#[derive(Debug, Default)]
pub struct Counters {
    attested: AtomicU64,
    no_verdict: AtomicU64,
    refused: AtomicU64,
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

    fn render(&self, oldest: f64) -> String {
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
        out
    }
}

#[derive(Clone)]
struct Scrape {
    store: Store,
    counters: Arc<Counters>,
}

/// The metrics router over `store` and the witness's `counters`.
pub fn router(store: Store, counters: Arc<Counters>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Scrape { store, counters })
}

async fn scrape(State(scrape): State<Scrape>) -> impl IntoResponse {
    let text = "text/plain; version=0.0.4";
    match scrape.store.oldest_unwitnessed_secs().await {
        Ok(oldest) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, text)],
            scrape.counters.render(oldest.unwrap_or(0.0))
                + &opledger_grpc::metrics::global().render()
                + &opledger_chain::evidence::no_evidence().render("witness"),
        ),
        Err(e) => {
            tracing::warn!(error = %e.log_safe(), "metrics unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, text)],
                "# store unavailable\n".to_owned(),
            )
        }
    }
}
