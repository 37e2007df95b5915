//! Readiness: a served API's gRPC health status follows its database. `NOT_SERVING` while the
//! database cannot take writes (unreachable, or a standby: during a failover), `SERVING` again
//! once a primary answers; the server's overall status (the empty service name) stays `SERVING`
//! while the process runs.

use opledger_store::probe::DatabaseProbe;
use std::time::Duration;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// How often the database is probed.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// How long one probe may take before it counts as failed.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs `probe` (give each check [`PROBE_TIMEOUT`]) every [`PROBE_INTERVAL`] and reports
/// `service_name` through `health` accordingly, until the task is aborted.
pub fn spawn(
    health: HealthReporter,
    service_name: String,
    mut probe: DatabaseProbe,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ready = true;
        loop {
            tokio::time::sleep(PROBE_INTERVAL).await;
            let now = probe.accepts_writes().await;
            if now == ready {
                continue;
            }
            ready = now;
            if ready {
                tracing::info!(service = %service_name, "database accepts writes again: serving");
                health
                    .set_service_status(&service_name, ServingStatus::Serving)
                    .await;
            } else {
                tracing::warn!(service = %service_name, "database does not accept writes: not serving");
                health
                    .set_service_status(&service_name, ServingStatus::NotServing)
                    .await;
            }
        }
    })
}
