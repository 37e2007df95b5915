//! The reconciler: turns UNKNOWN (and stale BROADCAST) withdrawals into outcomes backed by chain
//! evidence, never by its absence. See [`reconcile`] for the decision order.

pub mod config;
pub mod metrics;
pub mod operator;
pub mod reconcile;

pub use config::Config;
pub use reconcile::{Finding, Reconciler};

use opledger_grpc::server::{self, ServeError};
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_store::Store;
use std::collections::HashMap;
use std::time::Duration;
use tonic::service::Routes;

pub use opledger_proto::v1::operator_service_server::SERVICE_NAME;

/// Why the reconciler could not start.
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

/// A reconciler for `config` over `store`.
pub fn reconciler(config: &Config, store: Store) -> Result<Reconciler, StartError> {
    let timeout = Duration::from_millis(config.rpc_timeout_ms);
    let mut networks = HashMap::new();
    for (network, url) in &config.rpc {
        let headers = config.rpc_headers.get(network);
        let rpc = opledger_chain::Rpc::configured(
            url,
            timeout,
            config.rpc_ca.as_deref(),
            headers.into_iter().flatten(),
        )?;
        let evidence = opledger_chain::evidence::service_reader(
            network,
            config.evidence.get(network),
            timeout,
            config.rpc_ca.as_deref(),
            headers
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.0.as_str())),
        )
        .map_err(StartError::Evidence)?;
        networks.insert(network.clone(), reconcile::Network { rpc, evidence });
    }
    let channel = opledger_grpc::client::channel(
        "signer_url",
        &config.signer_url,
        config.signer_tls.as_ref(),
    )?;
    // Examinations are one at a time: one lock connection, and one spare.
    let locks = store.pass_locks(2);
    Ok(Reconciler::new(
        store,
        networks,
        SignerServiceClient::new(opledger_grpc::telemetry::grpc::traced(channel)),
        config.signer_token.0.clone(),
        reconcile::Policy {
            cancel_after: Duration::from_secs(config.cancel_after_secs),
            escalation: reconcile::EscalationPolicy {
                owner: config.owner.clone(),
                security_owner: config.security_owner.clone(),
                after_secs: config.escalate_after_secs,
            },
        },
        config.worker_id.clone(),
    )
    .with_pass_locks(locks))
}

/// The operator API's routes over this store and reconciler (API keys cached for `auth_ttl`).
pub fn routes(store: Store, reconciler: Reconciler, auth_ttl: Duration) -> Routes {
    let auth = std::sync::Arc::new(opledger_grpc::Authenticator::new(store.clone(), auth_ttl));
    Routes::new(
        opledger_proto::v1::operator_service_server::OperatorServiceServer::new(
            operator::OperatorApi::new(store, auth, reconciler),
        ),
    )
}

/// Connects the store, runs passes every `poll_interval_ms` and serves health until Ctrl-C or
/// SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let [listener, metrics_listener] =
        server::bind_all([config.listen, config.metrics_listen]).await?;
    let store = server::connect(&config.database_url.0, config.store_config()).await?;
    let worker = reconciler(&config, store.clone())?;
    let api = routes(store.clone(), worker.clone(), Duration::from_secs(30));
    let limits = config.listener.limits();
    let metrics = tokio::spawn(opledger_grpc::listener::serve_http(
        metrics_listener,
        metrics::router(store.clone()),
        limits,
        std::future::pending(),
    ));
    let (stale, batch, poll) = (
        config.stale_broadcast_secs,
        config.batch_size,
        Duration::from_millis(config.poll_interval_ms),
    );
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let work = tokio::spawn(async move {
        loop {
            worker.tick(stale, batch).await;
            tokio::select! {
                _ = &mut stop_rx => return,
                () = tokio::time::sleep(poll) => {}
            }
        }
    });
    let served = server::serve_ready(
        listener,
        SERVICE_NAME,
        api,
        None,
        limits,
        &store,
        server::shutdown_signal(),
    )
    .await;
    let _ = stop_tx.send(());
    let _ = work.await;
    metrics.abort();
    Ok(served?)
}
