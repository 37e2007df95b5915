//! The runtime every opledger service runs on.
//!
//! A service's `lib.rs` assembles its routes and workers on a [`Runtime`]: the runtime binds the
//! service's addresses before any outbound connection, connects the store (retrying a database
//! that is not reachable yet), serves gRPC with health that follows the database, serves
//! `/metrics`, runs the workers, and on Ctrl-C or SIGTERM stops everything through one
//! cancellation token: serving ends, every worker finishes the pass it is in, then the process
//! exits.

use opledger_config::{Limits, ServiceBase, ServiceConfig, TelemetryConfig};
use opledger_store::probe::DatabaseProbe;
use opledger_store::{Store, StoreConfig};
use serve as server;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tonic::service::Routes;
use tonic::transport::ServerTlsConfig;

pub mod readiness;
pub mod serve;
mod serve_error;

pub use serve_error::ServeError;
pub use tokio_util::sync::CancellationToken;

/// A service binary's whole `main`: loads the configuration with `load` from the file named by
/// `{prefix}CONFIG` (if set) and the `{prefix}*` variables, starts JSON logs with trace ids as
/// `binary` (spans exported over OTLP/gRPC where `[telemetry]` or `OTEL_*` says), runs `run` until
/// it returns, and flushes the spans. A configuration that does not load is reported as the
/// `OTEL_*` variables alone say (its `[telemetry]` is not known).
pub async fn main<C, LoadError, RunError, Fut>(
    binary: &str,
    prefix: &str,
    load: fn(Option<&std::path::Path>) -> Result<C, LoadError>,
    run: fn(C) -> Fut,
) -> anyhow::Result<()>
where
    C: ServiceConfig,
    LoadError: std::error::Error + Send + Sync + 'static,
    RunError: std::error::Error + Send + Sync + 'static,
    Fut: Future<Output = Result<(), RunError>>,
{
    let file = std::env::var_os(format!("{prefix}CONFIG")).map(std::path::PathBuf::from);
    let config = load(file.as_deref());
    let telemetry = match &config {
        Ok(config) => serve::init_telemetry(binary, &config.base().telemetry),
        Err(_) => serve::init_telemetry(binary, &TelemetryConfig::default()),
    };
    let result = match config {
        Ok(config) => run(config).await.map_err(anyhow::Error::from),
        Err(e) => Err(anyhow::Error::from(e)),
    };
    telemetry.shutdown().await;
    result
}

/// Why a service could not start (its configuration was already validated by its loader).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A client of another service or of a chain cannot be set up from the configuration:
    /// `what` names it (`rpc client`, `evidence`, `signer connection`, ...).
    #[error("{what}: {source}")]
    Setup {
        /// Which client.
        what: &'static str,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The server could not start or failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

impl StartError {
    /// The error of setting up `what`.
    pub fn setup<E>(what: &'static str) -> impl FnOnce(E) -> StartError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |source| StartError::Setup {
            what,
            source: Box::new(source),
        }
    }
}

/// The store settings a service's base section gives (pool size, acquire timeout).
pub fn store_config(base: &ServiceBase) -> StoreConfig {
    StoreConfig {
        max_connections: base.db_max_connections,
        acquire_timeout: base.acquire_timeout(),
        ..StoreConfig::default()
    }
}

/// One service's listeners, store, workers and the token that stops them.
#[derive(Debug)]
pub struct Runtime {
    service_name: &'static str,
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    limits: Limits,
    store: Store,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    metrics: Option<JoinHandle<()>>,
}

impl Runtime {
    /// Binds `listen`, then `extra` in order, then `metrics_listen` (a port in use fails the start
    /// at once, naming it), then connects the store with `store`'s settings. Returns the runtime
    /// and the extra listeners.
    pub async fn start_with<const N: usize>(
        service_name: &'static str,
        base: &ServiceBase,
        extra: [SocketAddr; N],
        store: StoreConfig,
    ) -> Result<(Runtime, [TcpListener; N]), ServeError> {
        let listener = server::bind(base.listen).await?;
        let mut bound = Vec::with_capacity(N);
        for addr in extra {
            bound.push(server::bind(addr).await?);
        }
        let metrics_listener = server::bind(base.metrics_listen).await?;
        let store = server::connect(&base.database_url.0, store).await?;
        let extra = bound.try_into().map_err(|_| ServeError::Bind {
            addr: base.listen,
            source: std::io::Error::other("listener count"),
        })?;
        let runtime = Runtime::new(
            service_name,
            listener,
            metrics_listener,
            store,
            base.listener.limits(),
        );
        Ok((runtime, extra))
    }

    /// [`Runtime::start_with`] without extra listeners, with the store settings of `base`.
    pub async fn start(
        service_name: &'static str,
        base: &ServiceBase,
    ) -> Result<Runtime, ServeError> {
        Ok(
            Runtime::start_with(service_name, base, [], store_config(base))
                .await?
                .0,
        )
    }

    /// A runtime over listeners and a store the caller already has (tests serve in-process).
    pub fn new(
        service_name: &'static str,
        listener: TcpListener,
        metrics_listener: TcpListener,
        store: Store,
        limits: Limits,
    ) -> Runtime {
        Runtime {
            service_name,
            listener,
            metrics_listener: Some(metrics_listener),
            limits,
            store,
            stop: CancellationToken::new(),
            tasks: Vec::new(),
            metrics: None,
        }
    }

    /// The service's store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The listener limits of the service (every listener it opens uses them).
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// The token cancelled when the service stops.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Serves `router` (a `GET /metrics` endpoint) on the metrics address now. Without it,
    /// [`Runtime::serve`] serves the process's gRPC metrics alone.
    pub fn metrics(&mut self, router: axum::Router) {
        if let Some(listener) = self.metrics_listener.take() {
            let limits = self.limits;
            self.metrics = Some(tokio::spawn(async move {
                opledger_grpc::listener::serve_http(
                    listener,
                    router,
                    limits,
                    std::future::pending(),
                )
                .await;
            }));
        }
    }

    /// Runs `tick` now and then once every `poll` after the previous pass ends, until the service
    /// stops (a pass in progress completes first). What a pass returns is dropped.
    pub fn every<F, Fut>(&mut self, poll: Duration, mut tick: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future + Send,
    {
        let stop = self.stop.clone();
        self.tasks.push(tokio::spawn(async move {
            loop {
                let _ = tick().await;
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(poll) => {}
                }
            }
        }));
    }

    /// Runs `work`, handed the stop token, until it returns; the service waits for it on stop.
    pub fn spawn<Fut>(&mut self, work: impl FnOnce(CancellationToken) -> Fut)
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.tasks.push(tokio::spawn(work(self.stop.clone())));
    }

    /// Runs `work` until it ends or the service stops, whichever is first (a loop that has no
    /// pass to finish, such as a sweep on an interval, is simply dropped at stop).
    pub fn background<Fut>(&mut self, work: Fut)
    where
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tasks.push(tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = work => {}
            }
        }));
    }

    /// Serves `routes` (plus health and reflection; over TLS when `tls` is given) until Ctrl-C
    /// or SIGTERM, then stops the workers and waits for them.
    pub async fn serve(
        self,
        routes: Routes,
        tls: Option<ServerTlsConfig>,
    ) -> Result<(), ServeError> {
        self.serve_until(routes, tls, server::shutdown_signal())
            .await
    }

    /// Like [`Runtime::serve`], until `shutdown` resolves.
    pub async fn serve_until(
        mut self,
        routes: Routes,
        tls: Option<ServerTlsConfig>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), ServeError> {
        if self.metrics.is_none() {
            self.metrics(opledger_grpc::metrics::router());
        }
        let served = server::serve_ready(
            self.listener,
            self.service_name,
            routes,
            tls,
            self.limits,
            DatabaseProbe::new(&self.store, readiness::PROBE_TIMEOUT),
            shutdown,
        )
        .await;
        self.stop.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        if let Some(metrics) = self.metrics {
            metrics.abort();
        }
        served
    }
}

#[cfg(test)]
mod tests;
