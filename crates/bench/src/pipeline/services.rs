//! The services of the pipeline, in-process, each on its own pool and database role the way a
//! deployment runs them: operations and approvals (gRPC), the signer (gRPC with a caller token),
//! the broadcaster's worker and chain watcher, the reconciler and the witness, each as a login in
//! its own service role (`opledger_operations`, `opledger_approvals`, `opledger_signer`,
//! `opledger_broadcaster`, `opledger_reconciler`, `opledger_witness`). The broadcaster (worker and
//! watcher), the reconciler and the witness run as one or more instances against the one database
//! ([`Services::run_instances`]), each with its own pools and worker id, as replicas would.

use opledger_signer::config::NetworkConfig;
use opledger_store::{Store, StoreConfig};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

use super::witness::{self, WitnessTotals};

mod startup;
mod watch;

pub use startup::{RoleUrls, Settings, start};
pub use watch::WatchTotals;

/// The running services; stopped when dropped.
#[derive(Debug)]
pub struct Services {
    /// URL of the operations service.
    pub operations: String,
    /// URL of the approvals service.
    pub approvals: String,
    watch: Arc<Mutex<WatchTotals>>,
    tasks: Vec<JoinHandle<()>>,
    workers: Workers,
    /// What the witnesses did, summed over the instances.
    witness: Arc<Mutex<WitnessTotals>>,
    /// The tasks of every broadcaster, reconciler and witness instance.
    running: Mutex<Vec<JoinHandle<()>>>,
}

/// What starting one more broadcaster, reconciler and witness instance takes: their
/// configurations and, per instance, pools connected up front (so a phase's clock never includes a
/// pool's start).
#[derive(Debug)]
struct Workers {
    broadcaster: opledger_broadcaster::Config,
    reconciler: opledger_reconciler::Config,
    witness: opledger_witness::Config,
    /// The witnesses' outcome counters (what `/metrics` would serve), shared by the instances.
    witness_counters: Arc<opledger_witness::metrics::Counters>,
    watch_poll: Duration,
    poll: Duration,
    stores: Vec<InstanceStores>,
}

/// The pools of one instance, each as its service's login.
#[derive(Debug, Clone)]
struct InstanceStores {
    broadcaster: Store,
    reconciler: Store,
    witness: Store,
}

impl Drop for Services {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        if let Ok(running) = self.running.lock() {
            for task in running.iter() {
                task.abort();
            }
        }
    }
}

/// The worker id of broadcaster instance `i` (from 0).
pub fn broadcaster_id(i: usize) -> String {
    format!("bench-broadcaster-{}", i + 1)
}

/// The worker id of reconciler instance `i` (from 0).
pub fn reconciler_id(i: usize) -> String {
    format!("bench-reconciler-{}", i + 1)
}

/// The witness id of witness instance `i` (from 0).
pub fn witness_id(i: usize) -> String {
    format!("bench-witness-{}", i + 1)
}

/// The witness's configuration defaults the bench runs it with: pooled connections, proposals
/// per pass and milliseconds between passes.
pub fn witness_defaults() -> (u32, u32, u64) {
    let config = opledger_witness::Config::default();
    (
        config.base.db_max_connections,
        config.batch_size,
        config.poll_interval_ms,
    )
}

impl Services {
    /// The watchers' totals so far (summed over the instances); starts a new "longest pass"
    /// window.
    pub fn watch_totals(&self) -> WatchTotals {
        match self.watch.lock() {
            Ok(mut totals) => {
                let now = *totals;
                totals.longest = Duration::ZERO;
                now
            }
            Err(_) => WatchTotals::default(),
        }
    }

    /// The witnesses' totals so far (summed over the instances).
    pub fn witness_totals(&self) -> WitnessTotals {
        self.witness
            .lock()
            .map(|totals| totals.clone())
            .unwrap_or_default()
    }

    /// How many broadcaster, reconciler and witness instances there can be.
    pub fn max_instances(&self) -> usize {
        self.workers.stores.len()
    }

    /// Stops every broadcaster, reconciler and witness instance and starts `n` of each (at most
    /// [`Services::max_instances`]): instance `i` is broadcaster `bench-broadcaster-{i+1}` with
    /// its watcher, reconciler `bench-reconciler-{i+1}` and witness `bench-witness-{i+1}`, each on
    /// its own pools.
    pub fn run_instances(&self, n: usize) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=self.max_instances()).contains(&n),
            "{n} instances asked, at most {} prepared",
            self.max_instances()
        );
        let mut running = self
            .running
            .lock()
            .map_err(|_| anyhow::anyhow!("the instance list is poisoned"))?;
        for task in running.drain(..) {
            task.abort();
        }
        for (i, stores) in self.workers.stores.iter().take(n).enumerate() {
            running.extend(self.spawn_instance(i, stores.clone())?);
        }
        Ok(())
    }

    /// One broadcaster (worker loop and watcher loop, as `opledger_broadcaster::run` runs them),
    /// one reconciler and one witness, on these stores.
    fn spawn_instance(
        &self,
        i: usize,
        stores: InstanceStores,
    ) -> anyhow::Result<Vec<JoinHandle<()>>> {
        let mut tasks = self.spawn_broadcaster(i, stores.broadcaster)?;
        tasks.push(self.spawn_reconciler(i, stores.reconciler)?);
        tasks.push(self.spawn_witness(i, stores.witness)?);
        Ok(tasks)
    }

    /// Broadcaster instance `i` on `store`: its worker loop and its watcher loop (which also
    /// fee-bumps stuck transfers).
    fn spawn_broadcaster(&self, i: usize, store: Store) -> anyhow::Result<Vec<JoinHandle<()>>> {
        let w = &self.workers;
        let config = opledger_broadcaster::Config {
            worker_id: broadcaster_id(i),
            ..w.broadcaster.clone()
        };
        let worker = opledger_broadcaster::broadcaster(&config, store.broadcaster())?;
        let bumper = worker.clone();
        let watcher = opledger_broadcaster::watcher(&config, store.broadcaster())?;
        let (batch, concurrency, poll) = (config.batch_size, config.concurrency, w.poll);
        let worker_task = tokio::spawn(async move {
            worker
                .run(batch, concurrency, poll, std::future::pending())
                .await;
        });
        let watch_loop = watch::WatchLoop {
            watch_batch: config.watch_batch_size,
            watch_poll: w.watch_poll,
            bump_after: config.bump_after_secs,
            batch,
        };
        let watcher_task = watch::spawn(watcher, bumper, self.watch.clone(), watch_loop);
        Ok(vec![worker_task, watcher_task])
    }

    /// Reconciler instance `i` on `store`, with its production defaults: on the happy path it
    /// finds nothing to decide (no UNKNOWN, no BROADCAST stale for 120 s) and its polls are what
    /// it costs.
    fn spawn_reconciler(&self, i: usize, store: Store) -> anyhow::Result<JoinHandle<()>> {
        let config = opledger_reconciler::Config {
            worker_id: reconciler_id(i),
            ..self.workers.reconciler.clone()
        };
        let reconciler = opledger_reconciler::reconciler(&config, store.reconciler())?;
        let (stale, batch, poll) = (
            config.stale_broadcast_secs,
            config.batch_size,
            Duration::from_millis(config.poll_interval_ms),
        );
        Ok(tokio::spawn(async move {
            loop {
                reconciler.tick(stale, batch).await;
                tokio::time::sleep(poll).await;
            }
        }))
    }

    /// Witness instance `i` on `store`, with its production defaults, reading the reconciler's
    /// evidence endpoints at the same quorum: on the happy path no release is proposed and each
    /// pass is one query that finds nothing.
    fn spawn_witness(&self, i: usize, store: Store) -> anyhow::Result<JoinHandle<()>> {
        let w = &self.workers;
        let config = opledger_witness::Config {
            witness_id: witness_id(i),
            ..w.witness.clone()
        };
        let witness_worker =
            opledger_witness::witness(&config, store.witness(), w.witness_counters.clone())?;
        Ok(witness::spawn(
            witness_worker,
            config.batch_size,
            Duration::from_millis(config.poll_interval_ms),
            self.witness.clone(),
        ))
    }
}

/// The bench network, as tests/support/signer.rs configures anvil.
pub fn network() -> NetworkConfig {
    NetworkConfig {
        chain_id: 31337,
        native_asset: "ETH".into(),
        tokens: BTreeMap::new(),
        gas_limit_native: 21_000,
        gas_limit_erc20: 100_000,
        max_fee_per_gas: opledger_config::Wei(2_000_000_000),
        max_priority_fee_per_gas: opledger_config::Wei(1_000_000_000),
        fee_bump_percent: 25,
        cancel_max_fee_per_gas: opledger_config::Wei(20_000_000_000),
    }
}

async fn connect(url: &str, max_connections: u32, who: &str) -> anyhow::Result<Store> {
    Store::connect(
        url,
        StoreConfig {
            max_connections,
            ..StoreConfig::default()
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("the {who} role cannot connect: {}", e.log_safe()))
}

fn report<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(Result<(), E>) {
    move |result| {
        if let Err(e) = result {
            eprintln!("opledger-bench pipeline: {what} stopped: {e}");
        }
    }
}
