//! The broadcaster: it gets APPROVED withdrawals signed by the signer (over gRPC), submits only
//! the signed bytes the signer persisted, and classifies every submission: a node's acceptance
//! moves the operation to BROADCAST, anything ambiguous (timeouts, resets, "nonce too low",
//! "replacement underpriced", unknown errors) to UNKNOWN with the hold kept and nothing re-signed.
//! It never builds or signs a transaction itself. Its queue is fair across tenants, and an
//! operation it could not move waits in back-off, so no tenant's refusals delay another's.

pub mod config;
pub mod watcher;
pub mod worker;

pub use config::Config;
pub use worker::Broadcaster;

use opledger_grpc::server::{self, ServeError};
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_store::Store;
use std::collections::HashMap;
use std::time::Duration;
use tonic::service::Routes;

/// The name the broadcaster reports as serving on the gRPC health service.
pub const SERVICE_NAME: &str = "opledger.v1.Broadcaster";

/// Why the broadcaster could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// An RPC or signer URL is invalid.
    #[error("invalid url for {0}")]
    Url(&'static str),
    /// A JSON-RPC client could not be set up.
    #[error("rpc client: {0}")]
    Rpc(#[from] opledger_chain::RpcSetupError),
    /// The signer channel's URL or TLS settings cannot be used.
    #[error("signer connection: {0}")]
    SignerChannel(#[from] opledger_grpc::client::ClientError),
    /// A network's evidence endpoints or settings are refused.
    #[error("evidence: {0}")]
    Evidence(opledger_chain::evidence::ReaderError),
    /// The server could not start or failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// A broadcaster for `config` over `store`.
pub fn broadcaster(config: &Config, store: Store) -> Result<Broadcaster, StartError> {
    let timeout = Duration::from_millis(config.submit_timeout_ms);
    let locks = store.pass_locks(pass_connections(config.concurrency));
    let mut rpcs = HashMap::new();
    for (network, url) in &config.rpc {
        rpcs.insert(
            network.clone(),
            opledger_chain::Rpc::configured(
                url,
                timeout,
                config.rpc_ca.as_deref(),
                config.rpc_headers.get(network).into_iter().flatten(),
            )?,
        );
    }
    let channel = opledger_grpc::client::channel(
        "signer_url",
        &config.signer_url,
        config.signer_tls.as_ref(),
    )?;
    Ok(Broadcaster::new(
        store,
        SignerServiceClient::new(opledger_grpc::telemetry::grpc::traced(channel)),
        config.signer_token.0.clone(),
        rpcs,
        config.worker_id.clone(),
    )
    .with_backoff(config.backoff())
    .with_pass_locks(locks))
}

/// Connections of the pass locks: one per operation in flight, and one more.
fn pass_connections(concurrency: usize) -> u32 {
    u32::try_from(concurrency)
        .unwrap_or(u32::MAX)
        .saturating_add(1)
}

/// A chain watcher for `config` over `store`, watching each network while it holds the
/// network's lease on the database (one watcher per network among the instances).
pub fn watcher(config: &Config, store: Store) -> Result<watcher::Watcher, StartError> {
    let timeout = Duration::from_millis(config.submit_timeout_ms);
    let mut networks = HashMap::new();
    for network in config.rpc.keys() {
        let evidence = opledger_chain::evidence::service_reader(
            network,
            config.evidence.get(network),
            timeout,
            config.rpc_ca.as_deref(),
            config
                .rpc_headers
                .get(network)
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.0.as_str())),
        )
        .map_err(StartError::Evidence)?;
        networks.insert(
            network.clone(),
            watcher::Watched {
                evidence,
                reorg_window: config.reorg_window_blocks,
            },
        );
    }
    Ok(watcher::Watcher::new(
        store,
        networks,
        config.worker_id.clone(),
        watcher::Owners {
            operations: config.owner.clone(),
            security: config.security_owner.clone(),
        },
    )
    .with_leases())
}

/// Connects the store, starts the worker and serves health until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let [listener, metrics_listener] =
        server::bind_all([config.listen, config.metrics_listen]).await?;
    let store = server::connect(&config.database_url.0, config.store_config()).await?;
    let worker = broadcaster(&config, store.clone())?;
    let bumper = worker.clone();
    let scraped = worker.clone();
    let metrics_app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let scraped = scraped.clone();
            async move {
                let body = scraped.scrape().await;
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4",
                    )],
                    body,
                )
            }
        }),
    );
    let limits = config.listener.limits();
    let metrics = tokio::spawn(opledger_grpc::listener::serve_http(
        metrics_listener,
        metrics_app,
        limits,
        std::future::pending(),
    ));
    let chain = watcher(&config, store.clone())?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let poll = Duration::from_millis(config.poll_interval_ms);
    let (batch, concurrency) = (config.batch_size, config.concurrency);
    let watch_batch = config.watch_batch_size;
    let (watch_stop_tx, mut watch_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let work = tokio::spawn(async move {
        worker
            .run(batch, concurrency, poll, async move {
                let _ = stop_rx.await;
            })
            .await;
    });
    // New heads are noticed by polling the head (cheap); receipts are looked up only when it moves.
    let (networks, bump_after) = (
        config.rpc.keys().cloned().collect::<Vec<_>>(),
        config.bump_after_secs,
    );
    let watch = tokio::spawn(async move {
        loop {
            chain.tick(watch_batch).await;
            for network in networks.iter().filter(|n| chain.leads(n)) {
                bumper.bump_stuck(network, bump_after, batch).await;
            }
            tokio::select! {
                _ = &mut watch_stop_rx => return,
                () = tokio::time::sleep(poll) => {}
            }
        }
    });
    let served = server::serve_ready(
        listener,
        SERVICE_NAME,
        Routes::default(),
        None,
        limits,
        &store,
        server::shutdown_signal(),
    )
    .await;
    let _ = stop_tx.send(());
    let _ = watch_stop_tx.send(());
    let _ = work.await;
    let _ = watch.await;
    metrics.abort();
    Ok(served?)
}
