//! `GET /metrics`: ingress outcomes counted in this process, and the inbox gauges read from the
//! database at scrape time (pending, parked, dead letters, open quarantines and UNHANDLED events,
//! age of the oldest unresolved one). The alert rules in `deploy/prometheus/alerts.yml` use these.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use opledger_store::inbox::InboxSnapshot;
use opledger_store::roles::InboxStore;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How the ingress answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// New event recorded with its work item (200).
    Accepted,
    /// Same id, same body (200).
    Duplicate,
    /// Same id, different body: quarantined (200).
    Quarantined,
    /// Stored as UNHANDLED (200).
    Unhandled,
    /// Bad signature or timestamp (401).
    BadSignature,
    /// Missing or malformed headers, or a body that is not a JSON object (400).
    BadRequest,
    /// Unknown endpoint or source (404).
    UnknownEndpoint,
    /// Not recorded: store unavailable or timeout (503).
    Unavailable,
}

impl Outcome {
    const ALL: [Outcome; 8] = [
        Outcome::Accepted,
        Outcome::Duplicate,
        Outcome::Quarantined,
        Outcome::Unhandled,
        Outcome::BadSignature,
        Outcome::BadRequest,
        Outcome::UnknownEndpoint,
        Outcome::Unavailable,
    ];

    fn label(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Duplicate => "duplicate",
            Outcome::Quarantined => "quarantined",
            Outcome::Unhandled => "unhandled",
            Outcome::BadSignature => "bad_signature",
            Outcome::BadRequest => "bad_request",
            Outcome::UnknownEndpoint => "unknown_endpoint",
            Outcome::Unavailable => "unavailable",
        }
    }

    fn index(self) -> usize {
        Outcome::ALL.iter().position(|o| *o == self).unwrap_or(0)
    }
}

/// Ingress counters of this process.
#[derive(Debug, Default)]
pub struct IngressStats {
    counts: [AtomicU64; 8],
}

impl IngressStats {
    /// Counts one answered request.
    pub fn count(&self, outcome: Outcome) {
        self.counts[outcome.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests answered with `outcome` so far.
    pub fn get(&self, outcome: Outcome) -> u64 {
        self.counts[outcome.index()].load(Ordering::Relaxed)
    }
}

/// The metrics router.
pub fn router(store: InboxStore, stats: Arc<IngressStats>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state((store, stats))
}

async fn scrape(
    State((store, stats)): State<(InboxStore, Arc<IngressStats>)>,
) -> impl IntoResponse {
    let mut out = String::new();
    write_counters(&mut out, &stats);
    let status = match store.inbox_snapshot().await {
        Ok(s) => {
            write_gauges(&mut out, &s);
            StatusCode::OK
        }
        Err(e) => {
            tracing::warn!(error = %e.log_safe(), "inbox metrics unavailable");
            out.push_str("# store unavailable\n");
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    out.push_str(&opledger_grpc::metrics::global().render());
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        out,
    )
}

/// Writes the ingress counters of this process to `out`.
fn write_counters(out: &mut String, stats: &IngressStats) {
    out.push_str(
        "# HELP opledger_inbox_requests_total Webhook requests by how they were answered.\n\
         # TYPE opledger_inbox_requests_total counter\n",
    );
    for outcome in Outcome::ALL {
        let _ = writeln!(
            out,
            "opledger_inbox_requests_total{{outcome=\"{}\"}} {}",
            outcome.label(),
            stats.get(outcome)
        );
    }
    let _ = write!(
        out,
        "# HELP opledger_inbox_quarantined_total Deliveries quarantined (same id, different body).\n\
         # TYPE opledger_inbox_quarantined_total counter\n\
         opledger_inbox_quarantined_total {}\n\
         # HELP opledger_inbox_unhandled_total Deliveries stored UNHANDLED (unknown type or schema).\n\
         # TYPE opledger_inbox_unhandled_total counter\n\
         opledger_inbox_unhandled_total {}\n",
        stats.get(Outcome::Quarantined),
        stats.get(Outcome::Unhandled)
    );
}

/// Writes the inbox gauges read from the database (`s`) to `out`.
fn write_gauges(out: &mut String, s: &InboxSnapshot) {
    for (name, help, value) in [
        (
            "opledger_inbox_pending",
            "Work items due or waiting.",
            s.pending,
        ),
        (
            "opledger_inbox_parked",
            "Work items parked on an operation's state.",
            s.parked,
        ),
        (
            "opledger_inbox_dead_letters",
            "Unresolved dead letters.",
            s.dead,
        ),
        (
            "opledger_inbox_open_quarantines",
            "Unresolved quarantined bodies.",
            s.quarantined,
        ),
        (
            "opledger_inbox_open_unhandled",
            "Unresolved UNHANDLED events.",
            s.unhandled,
        ),
    ] {
        let _ = write!(
            out,
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
        );
    }
    let _ = write!(
        out,
        "# HELP opledger_inbox_oldest_unresolved_seconds Age of the oldest unresolved dead letter, quarantine or UNHANDLED event.\n\
         # TYPE opledger_inbox_oldest_unresolved_seconds gauge\n\
         opledger_inbox_oldest_unresolved_seconds {}\n",
        s.oldest_unresolved_secs
    );
}
