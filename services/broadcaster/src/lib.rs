//! The broadcaster: it gets APPROVED withdrawals signed by the signer (over gRPC), submits only
//! the signed bytes the signer persisted, and classifies every submission: a node's acceptance
//! moves the operation to BROADCAST, anything ambiguous (timeouts, resets, "nonce too low",
//! "replacement underpriced", unknown errors) to UNKNOWN with the hold kept and nothing re-signed.
//! It never builds or signs a transaction itself. Its queue is fair across tenants, and an
//! operation it could not move waits in back-off, so no tenant's refusals delay another's.

pub mod config;
mod setup;
pub mod watcher;
pub mod worker;

pub use config::Config;
use setup::metrics_router;
pub use setup::{broadcaster, watcher};
pub use worker::Broadcaster;

use opledger_server::Runtime;
pub use opledger_server::StartError;
use std::sync::Arc;
use std::time::Duration;
use tonic::service::Routes;

/// The name the broadcaster reports as serving on the gRPC health service.
pub const SERVICE_NAME: &str = "opledger.v1.Broadcaster";

/// Connects the store, starts the worker and the watcher and serves health until Ctrl-C or
/// SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let mut runtime = Runtime::start(SERVICE_NAME, &config.base).await?;
    let store = runtime.store().broadcaster();
    let worker = broadcaster(&config, store.clone())?;
    runtime.metrics(metrics_router(worker.clone()));
    let chain = watcher(&config, store)?;
    let poll = Duration::from_millis(config.poll_interval_ms);
    let (batch, concurrency) = (config.batch_size, config.concurrency);
    let bumper = worker.clone();
    runtime.spawn(move |stop| async move {
        worker
            .run(batch, concurrency, poll, stop.cancelled_owned())
            .await;
    });
    // New heads are noticed by polling the head (cheap); receipts are looked up only when it moves.
    let networks: Arc<[String]> = config.chain.rpc.keys().cloned().collect();
    let (watch_batch, bump_after) = (config.watch_batch_size, config.bump_after_secs);
    let chain = Arc::new(chain);
    runtime.every(poll, move || {
        let (chain, bumper, networks) = (chain.clone(), bumper.clone(), networks.clone());
        async move {
            chain.tick(watch_batch).await;
            for network in networks.iter().filter(|n| chain.leads(n)) {
                bumper.bump_stuck(network, bump_after, batch).await;
            }
        }
    });
    Ok(runtime.serve(Routes::default(), None).await?)
}
