//! The services of the pipeline, in-process, each on its own pool and database role the way a
//! deployment runs them: operations and approvals (gRPC), the signer (gRPC with a caller token),
//! the broadcaster's worker and chain watcher, the reconciler and the witness, each as a login in
//! its own service role (`opledger_operations`, `opledger_approvals`, `opledger_signer`,
//! `opledger_broadcaster`, `opledger_reconciler`, `opledger_witness`). The broadcaster (worker and
//! watcher), the reconciler and the witness run as one or more instances against the one database
//! ([`Services::run_instances`]), each with its own pools and worker id, as replicas would.

use opledger_grpc::config::{DatabaseUrl, Secret};
use opledger_grpc::server::{serve, serve_api};
use opledger_signer::config::NetworkConfig;
use opledger_signer::{Signer, Wallets};
use opledger_store::{Store, StoreConfig};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::NETWORK;
use super::witness::{self, WitnessTotals};

/// Pools of the services: each service's configuration default.
const OPERATIONS_CONNECTIONS: u32 = 32;
const APPROVALS_CONNECTIONS: u32 = 16;
const BROADCASTER_CONNECTIONS: u32 = 8;
const RECONCILER_CONNECTIONS: u32 = 8;
/// API-key cache lifetime of operations and approvals (their default).
const AUTH_CACHE_TTL: Duration = Duration::from_secs(30);

/// Tunables of the broadcaster and the signer.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Broadcaster `batch_size`: due operations per poll.
    pub batch_size: u32,
    /// Broadcaster `watch_batch_size`: BROADCAST operations per watcher pass.
    pub watch_batch_size: u32,
    /// Broadcaster `concurrency`: operations worked on at once.
    pub concurrency: usize,
    /// Broadcaster `poll_interval_ms` when a pass found nothing to do.
    pub poll: Duration,
    /// Pause of the watcher loop when the head has not moved.
    pub watch_poll: Duration,
    /// Pooled connections of the signer.
    pub signer_connections: u32,
}

/// What the chain watcher did, summed over its passes that saw a new head.
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchTotals {
    /// Passes that saw a new head (and so looked up receipts).
    pub passes: u64,
    /// Time spent in those passes.
    pub busy: Duration,
    /// The longest of them.
    pub longest: Duration,
    /// Operations moved to CONFIRMED.
    pub confirmed: u64,
    /// Operations escalated to FAILED_TERMINAL (reverted, nonce moved without us, tampered).
    pub escalated: u64,
    /// Confirmations undone by a reorganization.
    pub reopened: u64,
    /// Time those passes spent in each stage.
    pub stages: opledger_broadcaster::watcher::Stages,
}

impl WatchTotals {
    /// What happened from `self` until `later` (the longest pass is `later`'s since its reset).
    pub fn until(&self, later: &WatchTotals) -> WatchTotals {
        WatchTotals {
            passes: later.passes - self.passes,
            busy: later.busy.saturating_sub(self.busy),
            longest: later.longest,
            confirmed: later.confirmed - self.confirmed,
            escalated: later.escalated - self.escalated,
            reopened: later.reopened - self.reopened,
            stages: opledger_broadcaster::watcher::Stages {
                pin: later.stages.pin.saturating_sub(self.stages.pin),
                reorgs: later.stages.reorgs.saturating_sub(self.stages.reorgs),
                load: later.stages.load.saturating_sub(self.stages.load),
                read: later.stages.read.saturating_sub(self.stages.read),
                record: later.stages.record.saturating_sub(self.stages.record),
            },
        }
    }
}

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
        config.db_max_connections,
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
        let w = &self.workers;
        let InstanceStores {
            broadcaster: broadcaster_store,
            reconciler: reconciler_store,
            witness: witness_store,
        } = stores;
        let config = opledger_broadcaster::Config {
            worker_id: broadcaster_id(i),
            ..w.broadcaster.clone()
        };
        let worker = opledger_broadcaster::broadcaster(&config, broadcaster_store.clone())?;
        let bumper = worker.clone();
        let watcher = opledger_broadcaster::watcher(&config, broadcaster_store)?;
        let (batch, concurrency, poll) = (config.batch_size, config.concurrency, w.poll);
        let mut tasks = vec![tokio::spawn(async move {
            worker
                .run(batch, concurrency, poll, std::future::pending())
                .await;
        })];
        let totals = self.watch.clone();
        let (watch_poll, bump_after) = (w.watch_poll, config.bump_after_secs);
        let watch_batch = config.watch_batch_size;
        tasks.push(tokio::spawn(async move {
            loop {
                let started = Instant::now();
                let pass = watcher.tick(watch_batch).await;
                if pass.new_heads == 0 {
                    tokio::time::sleep(watch_poll).await;
                    continue;
                }
                let took = started.elapsed();
                if let Ok(mut t) = totals.lock() {
                    t.passes += 1;
                    t.busy += took;
                    t.longest = t.longest.max(took);
                    t.confirmed += pass.confirmed as u64;
                    t.escalated += pass.escalated as u64;
                    t.reopened += pass.reopened as u64;
                    t.stages.pin += pass.stages.pin;
                    t.stages.reorgs += pass.stages.reorgs;
                    t.stages.load += pass.stages.load;
                    t.stages.read += pass.stages.read;
                    t.stages.record += pass.stages.record;
                }
                // The production loop also fee-bumps stuck transfers; once per new head here.
                bumper.bump_stuck(NETWORK, bump_after, batch).await;
            }
        }));

        // The reconciler with its production defaults: on the happy path it finds nothing to
        // decide (no UNKNOWN, no BROADCAST stale for 120 s) and its polls are what it costs.
        let config = opledger_reconciler::Config {
            worker_id: reconciler_id(i),
            ..w.reconciler.clone()
        };
        let reconciler = opledger_reconciler::reconciler(&config, reconciler_store)?;
        let (stale, batch, poll) = (
            config.stale_broadcast_secs,
            config.batch_size,
            Duration::from_millis(config.poll_interval_ms),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                reconciler.tick(stale, batch).await;
                tokio::time::sleep(poll).await;
            }
        }));

        // The witness with its production defaults, reading the reconciler's evidence endpoints
        // at the same quorum: on the happy path no release is proposed and each pass is one
        // query that finds nothing.
        let config = opledger_witness::Config {
            witness_id: witness_id(i),
            ..w.witness.clone()
        };
        let witness_worker =
            opledger_witness::witness(&config, witness_store, w.witness_counters.clone())?;
        tasks.push(witness::spawn(
            witness_worker,
            config.batch_size,
            Duration::from_millis(config.poll_interval_ms),
            self.witness.clone(),
        ));
        Ok(tasks)
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
        max_fee_per_gas: "2000000000".into(),
        max_priority_fee_per_gas: "1000000000".into(),
        fee_bump_percent: 25,
        cancel_max_fee_per_gas: "20000000000".into(),
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

/// The database URL of each service: a login role in that service's own group role, as a
/// deployment runs them.
#[derive(Debug, Clone)]
pub struct RoleUrls {
    /// `opledger_operations`.
    pub operations: String,
    /// `opledger_approvals`.
    pub approvals: String,
    /// `opledger_signer`.
    pub signer: String,
    /// `opledger_broadcaster`.
    pub broadcaster: String,
    /// `opledger_reconciler`.
    pub reconciler: String,
    /// `opledger_witness`.
    pub witness: String,
}

/// Starts every service, each connected as its own role.
pub async fn start(
    urls: &RoleUrls,
    wallets: Wallets,
    trust_roots: Vec<opledger_signer::config::TrustRootConfig>,
    rpc_url: &str,
    evidence_urls: &[String],
    settings: &Settings,
    instances: usize,
) -> anyhow::Result<Services> {
    let evidence = opledger_chain::NetworkEvidence {
        urls: evidence_urls.to_vec(),
        quorum: evidence_urls.len(),
        confirmations: Some(1),
        finalized: false,
        min_confirmations: 12,
        max_lag_blocks: 8,
        // One confirmation on anvil, on purpose: the benchmark measures the pipeline, not depth.
        allow_shallow_finality: true,
        insecure_clear_text: false,
    };
    let mut tasks = Vec::new();

    let mut api = |store: Store, name: &'static str, make: opledger_grpc::server::MakeRoutes| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let listener = TcpListener::from_std(listener)?;
        tasks.push(tokio::spawn(async move {
            let served = serve_api(
                listener,
                store,
                AUTH_CACHE_TTL,
                name,
                make,
                std::future::pending(),
            )
            .await;
            report(name)(served);
        }));
        anyhow::Ok(format!("http://{addr}"))
    };
    let operations = api(
        connect(&urls.operations, OPERATIONS_CONNECTIONS, "operations").await?,
        opledger_operations::SERVICE_NAME,
        opledger_operations::routes,
    )?;
    let approvals = api(
        connect(&urls.approvals, APPROVALS_CONNECTIONS, "approvals").await?,
        opledger_approvals::SERVICE_NAME,
        opledger_approvals::routes,
    )?;

    // The signer, reached by the broadcaster over gRPC with a caller token scoped like the
    // broadcaster's (signatures and fee bumps).
    let token = format!("bench-caller-{}", uuid::Uuid::new_v4().simple());
    let config = opledger_signer::Config {
        instance_id: "bench-signer".into(),
        callers: vec![opledger_signer::config::CallerConfig {
            name: "broadcaster".into(),
            token_sha256: hex::encode(Sha256::digest(token.as_bytes())),
            capabilities: vec![
                opledger_signer::config::Capability::SignWithdrawal,
                opledger_signer::config::Capability::FeeBump,
            ],
            client_cert_sha256: None,
        }],
        db_max_connections: settings.signer_connections,
        networks: BTreeMap::from([(NETWORK.to_owned(), network())]),
        trust_roots,
        ..opledger_signer::Config::default()
    };
    let store = connect(&urls.signer, settings.signer_connections, "signer").await?;
    let callers = opledger_signer::callers(&config);
    let signer = Signer::new(store, Arc::new(config), Arc::new(wallets));
    signer
        .register_wallets()
        .await
        .map_err(|e| anyhow::anyhow!("cannot register the wallets: {e}"))?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let signer_addr = listener.local_addr()?;
    tasks.push(tokio::spawn(async move {
        let served = serve(
            listener,
            opledger_signer::SERVICE_NAME,
            opledger_signer::routes(signer, callers),
            std::future::pending(),
        )
        .await;
        report("signer")(served);
    }));

    // The broadcaster and the reconciler: their configurations, with polls short enough not
    // to limit throughput; every instance differs only in its worker id and pools.
    let broadcaster = opledger_broadcaster::Config {
        db_max_connections: BROADCASTER_CONNECTIONS,
        signer_url: format!("http://{signer_addr}"),
        signer_token: Secret(token.clone()),
        rpc: BTreeMap::from([(NETWORK.to_owned(), rpc_url.to_owned())]),
        evidence: BTreeMap::from([(NETWORK.to_owned(), evidence.clone())]),
        poll_interval_ms: u64::try_from(settings.poll.as_millis())?,
        batch_size: settings.batch_size,
        watch_batch_size: settings.watch_batch_size,
        concurrency: settings.concurrency,
        ..opledger_broadcaster::Config::default()
    };
    let reconciler = opledger_reconciler::Config {
        signer_url: format!("http://{signer_addr}"),
        signer_token: Secret(token),
        rpc: BTreeMap::from([(NETWORK.to_owned(), rpc_url.to_owned())]),
        evidence: BTreeMap::from([(NETWORK.to_owned(), evidence.clone())]),
        ..opledger_reconciler::Config::default()
    };
    // The witness: every setting its default but its login and its evidence (the reconciler's
    // endpoints and quorum), checked the way its binary checks a loaded configuration.
    let witness = opledger_witness::Config {
        database_url: DatabaseUrl(urls.witness.clone()),
        evidence: BTreeMap::from([(NETWORK.to_owned(), evidence)]),
        ..opledger_witness::Config::default()
    };
    witness
        .validate()
        .map_err(|e| anyhow::anyhow!("the witness's configuration is refused: {e}"))?;
    let mut stores = Vec::new();
    for _ in 0..instances.max(1) {
        stores.push(InstanceStores {
            broadcaster: connect(&urls.broadcaster, BROADCASTER_CONNECTIONS, "broadcaster").await?,
            reconciler: connect(&urls.reconciler, RECONCILER_CONNECTIONS, "reconciler").await?,
            witness: connect(&urls.witness, witness.db_max_connections, "witness").await?,
        });
    }
    let services = Services {
        operations,
        approvals,
        watch: Arc::new(Mutex::new(WatchTotals::default())),
        witness: Arc::new(Mutex::new(WitnessTotals::default())),
        tasks,
        workers: Workers {
            broadcaster,
            reconciler,
            witness,
            witness_counters: Arc::new(opledger_witness::metrics::Counters::default()),
            watch_poll: settings.watch_poll,
            poll: settings.poll,
            stores,
        },
        running: Mutex::new(Vec::new()),
    };
    services.run_instances(1)?;
    Ok(services)
}
