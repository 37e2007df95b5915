//! `GET /metrics`: the pipeline's gauges in Prometheus text format, read from the database at
//! scrape time (operations by state, age of the oldest UNKNOWN and FAILED_TERMINAL operation, age
//! of the oldest APPROVED, SIGNING and SIGNED one, escalations, releases a reorganization
//! reopened by their current state). The alert rules in
//! `deploy/prometheus/alerts.yml` use these names.

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use opledger_store::roles::ReconcilerStore;

/// The metrics router over `store`.
pub fn router(store: ReconcilerStore) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(store)
}

async fn scrape(State(store): State<ReconcilerStore>) -> axum::response::Response {
    let text = async {
        Ok(store.metrics_snapshot().await?.to_prometheus()
            + &opledger_store::witness::reopened_releases_text(&store.reopened_releases().await?)
            + &opledger_chain::evidence::no_evidence().render("reconciler"))
    };
    opledger_grpc::metrics::store_scrape(text.await)
}
