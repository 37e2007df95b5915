//! The broadcaster's parts, built from its configuration: the worker, the chain watcher and
//! the metrics endpoint.

use crate::Config;
use crate::worker::Broadcaster;
use opledger_server::StartError;
use opledger_store::roles::BroadcasterStore;
use std::collections::HashMap;
use std::time::Duration;

/// A broadcaster for `config` over `store`.
pub fn broadcaster(config: &Config, store: BroadcasterStore) -> Result<Broadcaster, StartError> {
    let timeout = Duration::from_millis(config.submit_timeout_ms);
    let locks = store.pass_locks(pass_connections(config.concurrency));
    let rpcs: HashMap<_, _> = config
        .chain
        .rpcs(timeout)
        .map_err(StartError::setup("rpc client"))?
        .into_iter()
        .collect();
    Ok(Broadcaster::new(
        store,
        config
            .signer
            .client()
            .map_err(StartError::setup("signer connection"))?,
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
pub fn watcher(
    config: &Config,
    store: BroadcasterStore,
) -> Result<crate::watcher::Watcher, StartError> {
    let timeout = Duration::from_millis(config.submit_timeout_ms);
    let networks = config
        .chain
        .readers(timeout)
        .map_err(StartError::setup("evidence"))?
        .into_iter()
        .map(|(network, evidence)| {
            let watched = crate::watcher::Watched {
                evidence,
                reorg_window: config.reorg_window_blocks,
            };
            (network, watched)
        })
        .collect();
    Ok(crate::watcher::Watcher::new(
        store,
        networks,
        config.worker_id.clone(),
        crate::watcher::Owners {
            operations: config.owner.clone(),
            security: config.security_owner.clone(),
        },
    )
    .with_leases())
}

/// `GET /metrics` with the broadcaster's own gauges and counters.
pub(crate) fn metrics_router(worker: Broadcaster) -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let scraped = worker.clone();
            async move {
                let body = scraped.scrape().await;
                let text = [(
                    axum::http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4",
                )];
                (text, body)
            }
        }),
    )
}
