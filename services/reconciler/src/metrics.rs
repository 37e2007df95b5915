//! `GET /metrics`: the pipeline's gauges in Prometheus text format, read from the database at
//! scrape time (operations by state, age of the oldest UNKNOWN and FAILED_TERMINAL operation, age
//! of the oldest APPROVED, SIGNING and SIGNED one, escalations, releases a reorganization
//! reopened by their current state). The alert rules in
//! `deploy/prometheus/alerts.yml` use these names.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use opledger_store::roles::ReconcilerStore;

/// The metrics router over `store`.
pub fn router(store: ReconcilerStore) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(store)
}

async fn scrape(State(store): State<ReconcilerStore>) -> impl IntoResponse {
    let read = async {
        Ok((
            store.metrics_snapshot().await?,
            store.reopened_releases().await?,
        ))
    };
    let read: Result<_, opledger_store::StoreError> = read.await;
    match read {
        Ok((snapshot, reopened)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            snapshot.to_prometheus()
                + &opledger_store::witness::reopened_releases_text(&reopened)
                + &opledger_grpc::metrics::global().render()
                + &opledger_chain::evidence::no_evidence().render("reconciler"),
        ),
        Err(e) => {
            tracing::warn!(error = %e.log_safe(), "metrics unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                "# store unavailable\n".to_owned(),
            )
        }
    }
}
