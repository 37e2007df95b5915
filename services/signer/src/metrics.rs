//! `GET /metrics`: the key backends' failures (`opledger_hsm::failures`: signatures a PKCS#11
//! key did not give, by kind, and sessions opened again), then this process's gRPC metrics. A
//! keystore key never fails to sign, so a signer with keystores only serves zeros here.

use axum::Router;
use axum::routing::get;

/// The metrics router of the signer.
pub fn router() -> Router {
    Router::new().route("/metrics", get(scrape))
}

async fn scrape() -> axum::response::Response {
    opledger_grpc::metrics::store_scrape(Ok(opledger_hsm::failures().render()))
}
