//! The webhook inbox service: the HTTP ingress that verifies and records inbound webhooks before
//! acknowledging them ([`ingress`]), the processor that applies them idempotently
//! ([`processor`]), the operator API over dead letters and quarantines ([`operator`]), the
//! retention job for raw bodies, and `/metrics`.
//!
//! It never settles or releases a withdrawal on a webhook's word: a `transfer.status` about a
//! self-signed transfer is only a hint for the watcher ([`hint`]).

pub mod config;
pub mod hint;
pub mod ingress;
pub mod keys;
pub mod metrics;
pub mod operator;
pub mod processor;
mod recorder;

pub use config::Config;

use opledger_grpc::config::ConfigError;
use opledger_grpc::server::{self, ServeError};
use opledger_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tonic::service::Routes;

pub use opledger_proto::v1::inbox_service_server::SERVICE_NAME;

/// The operator API's routes (API keys cached for `auth_ttl`).
pub fn routes(store: Store, auth_ttl: Duration) -> Routes {
    let auth = Arc::new(opledger_grpc::Authenticator::new(store.clone(), auth_ttl));
    Routes::new(
        opledger_proto::v1::inbox_service_server::InboxServiceServer::new(operator::InboxApi::new(
            store, auth,
        )),
    )
}

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
pub fn processor(config: &Config, store: Store, ring: Arc<keys::KeyRing>) -> processor::Processor {
    processor::Processor::new(
        store,
        ring,
        processor::Policy {
            worker_id: config.worker_id.clone(),
            max_attempts: config.max_attempts,
            retry_base: Duration::from_millis(config.retry_base_ms),
            dead_letter_owner: config.dead_letter_owner.clone(),
            compliance_owner: config.compliance_owner.clone(),
        },
    )
}

/// The three listening sockets of the service.
#[derive(Debug)]
pub struct Listeners {
    /// gRPC (InboxService, health, reflection).
    pub grpc: TcpListener,
    /// The webhook ingress.
    pub http: TcpListener,
    /// `/metrics`.
    pub metrics: TcpListener,
}

/// Connects the store, binds the configured addresses and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let [grpc, http, metrics] =
        server::bind_all([config.listen, config.http_listen, config.metrics_listen]).await?;
    let store = server::connect(&config.database_url.0, config.store_config()).await?;
    let listeners = Listeners {
        grpc,
        http,
        metrics,
    };
    serve(&config, store, listeners, server::shutdown_signal()).await
}

/// Serves the ingress, the operator API and metrics on `listeners`, and runs the processors and
/// the retention job, until `shutdown` resolves. Tests call this in-process.
pub async fn serve(
    config: &Config,
    store: Store,
    listeners: Listeners,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let ring = key_ring(config)?;
    let stats = Arc::new(metrics::IngressStats::default());
    let ingress = ingress::router(
        store.clone(),
        ring.clone(),
        stats.clone(),
        ingress::IngressSettings {
            max_body_bytes: config.max_body_bytes,
            timeout: Duration::from_millis(config.request_timeout_ms),
            tolerance_secs: config.timestamp_tolerance_secs,
            cache_ttl: Duration::from_secs(config.endpoint_cache_ttl_secs),
            body_timeout: Duration::from_millis(config.listener.request_timeout_ms),
        },
    );
    let limits = config.listener.limits();
    let mut tasks = tokio::task::JoinSet::new();
    let http = listeners.http;
    tasks.spawn(opledger_grpc::listener::serve_http(
        http,
        ingress,
        limits,
        std::future::pending(),
    ));
    let metrics_router = metrics::router(store.clone(), stats);
    let metrics_listener = listeners.metrics;
    tasks.spawn(opledger_grpc::listener::serve_http(
        metrics_listener,
        metrics_router,
        limits,
        std::future::pending(),
    ));
    let poll = Duration::from_millis(config.poll_interval_ms);
    // Parked items are woken on a timer, not before every item: the wake-up is a join over the
    // parked items and their operations.
    if config.processors == 0 {
        tracing::info!("ingress only: processors = 0, another instance applies the work");
    } else {
        let waker = processor(config, store.clone(), ring.clone());
        tasks.spawn(async move {
            loop {
                waker.wake().await;
                tokio::time::sleep(poll).await;
            }
        });
    }
    for _ in 0..config.processors {
        let worker = processor(config, store.clone(), ring.clone());
        tasks.spawn(async move {
            loop {
                if worker.step().await == processor::Step::Idle {
                    tokio::time::sleep(poll).await;
                }
            }
        });
    }
    let retention = store.clone();
    let (processed, quarantined, rejections, every) = (
        Duration::from_secs(u64::from(config.retention_processed_days) * 86_400),
        Duration::from_secs(u64::from(config.retention_quarantined_days) * 86_400),
        Duration::from_secs(u64::from(config.retention_rejections_days) * 86_400),
        Duration::from_secs(config.retention_interval_secs),
    );
    tasks.spawn(async move {
        loop {
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
            tokio::time::sleep(every).await;
        }
    });
    let served = server::serve_ready(
        listeners.grpc,
        SERVICE_NAME,
        routes(store.clone(), Duration::from_secs(30)),
        None,
        limits,
        &store,
        shutdown,
    )
    .await;
    tasks.abort_all();
    Ok(served?)
}
