//! The inbox's parts built from its configuration: the key ring, the processors and the retention job.

use crate::config::Config;
use crate::keys;
use opledger_config::ConfigError;
use opledger_server::Runtime;
use opledger_server::ServeError;
use opledger_store::roles::InboxStore;
use std::sync::Arc;
use std::time::Duration;

/// Why the inbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The server could not start or failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// The key ring `config` names.
pub fn key_ring(config: &Config) -> Result<Arc<keys::KeyRing>, ConfigError> {
    keys::KeyRing::new(config.body_keys()?)
        .map(Arc::new)
        .ok_or(ConfigError::Invalid {
            field: "body_keys",
            problem: "is required",
        })
}

/// The processor `config` describes.
pub fn processor(
    config: &Config,
    store: InboxStore,
    ring: Arc<keys::KeyRing>,
) -> crate::processor::Processor {
    crate::processor::Processor::new(
        store,
        ring,
        crate::processor::Policy {
            worker_id: config.worker_id.clone(),
            max_attempts: config.max_attempts,
            retry_base: Duration::from_millis(config.retry_base_ms),
            dead_letter_owner: config.dead_letter_owner.clone(),
            compliance_owner: config.compliance_owner.clone(),
        },
    )
}

/// The processors and the waker of parked items (`processors` of them; none: ingress only).
pub(crate) fn spawn_processors(config: &Config, runtime: &mut Runtime, ring: &Arc<keys::KeyRing>) {
    let poll = Duration::from_millis(config.poll_interval_ms);
    let store = runtime.store().inbox();
    // Parked items are woken on a timer, not before every item: the wake-up is a join over the
    // parked items and their operations.
    if config.processors == 0 {
        tracing::info!("ingress only: processors = 0, another instance applies the work");
        return;
    }
    let waker = Arc::new(processor(config, store.clone(), ring.clone()));
    runtime.every(poll, move || {
        let waker = waker.clone();
        async move { waker.wake().await }
    });
    for _ in 0..config.processors {
        let worker = processor(config, store.clone(), ring.clone());
        runtime.spawn(move |stop| async move {
            while !stop.is_cancelled() {
                if worker.step().await == crate::processor::Step::Idle {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(poll) => {}
                    }
                }
            }
        });
    }
}

/// The retention job: raw bodies and refused-request counts older than configured are purged
/// every `retention_interval_secs`.
pub(crate) fn spawn_retention(config: &Config, runtime: &mut Runtime) {
    let retention = runtime.store().inbox();
    let (processed, quarantined, rejections, every) = (
        Duration::from_secs(u64::from(config.retention_processed_days) * 86_400),
        Duration::from_secs(u64::from(config.retention_quarantined_days) * 86_400),
        Duration::from_secs(u64::from(config.retention_rejections_days) * 86_400),
        Duration::from_secs(config.retention_interval_secs),
    );
    runtime.every(every, move || {
        let retention = retention.clone();
        async move {
            match retention.purge_inbox_bodies(processed, quarantined).await {
                Ok(p) if p.events + p.quarantined > 0 => {
                    tracing::info!(
                        events = p.events,
                        quarantined = p.quarantined,
                        "bodies purged"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e.log_safe(), "retention pass failed"),
            }
            match retention.purge_rejection_counts(rejections).await {
                Ok(0) => {}
                Ok(rows) => tracing::info!(rows, "refused-request counts purged"),
                Err(e) => tracing::warn!(error = %e.log_safe(), "rejection retention failed"),
            }
        }
    });
}
