//! The pipeline benchmark: withdrawals created and approved over gRPC, signed by the signer,
//! submitted by the broadcaster and confirmed by its chain watcher on an anvil node mining a block
//! every second, with the reconciler and the witness polling beside them, all services in-process
//! under their own database roles. Measures confirmed
//! withdrawals per second, create -> CONFIRMED latency and CPU per 1,000 withdrawals, for one
//! sender address and for several, against the node's own `eth_sendRawTransaction` rate measured
//! in the same run, and verifies every phase in SQL and on chain. With `--instances 1,2` each
//! sender count is measured with one and then with two broadcaster (worker and watcher),
//! reconciler and witness instances against the one database, and every phase counts duplicate
//! work (a
//! signed transaction submitted more than once, as a JSON-RPC proxy in front of the node sees
//! it; a second attempt, BROADCAST or CONFIRMED move or settlement of one withdrawal), which
//! fails the benchmark. `--no-send-counter` leaves that proxy out of the submission path (as a
//! baseline without it has it): repeated sends are then not counted, the rest still is.

mod baseline;
mod checks;
mod client;
mod cpu;
mod node;
mod options;
mod phase;
mod report;
mod services;
mod setup;
mod types;
mod witness;

use node::Node;
use opledger_evm::signer::{KeyProvider, LocalKey};
use opledger_signer::Wallets;
use opledger_signer::config::TrustRootConfig;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::RpcProxy;
use options::{FUNDING_WEI, WARMUP};
use services::{RoleUrls, Services, Settings};
use setup::{PlannedPhase, channels, new_sender, random_secret};
use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;
use std::time::{Duration, Instant};
use types::{Baseline, Bench, Clients, Sender};

pub use options::Args;

pub async fn run(args: Args) -> anyhow::Result<()> {
    args.validate()?;
    let started = Instant::now();

    // The database: every service as a login role in its own group role, as deployed.
    let admin = PgConnectOptions::from_str(&args.admin_url)?;
    let (owner, urls) = setup::database(&admin).await?;
    let setup = Store::from_pool(owner.clone(), StoreConfig::default());

    let node = Node::start(&args.anvil_bin, args.block_time).await?;
    let meter = cpu::Meter {
        hz: cpu::clock_ticks(),
        postmaster: cpu::postmaster_pid(&owner).await,
        node: node.pid(),
    };

    // Tenants and hot wallets for the warm-up and every phase, funded on chain up front.
    let mut wallets = Wallets::default();
    let warmup = new_sender(&setup, &mut wallets, "bench-pipeline-warmup").await?;
    let phases = setup::phases(&setup, &mut wallets, &args).await?;
    let baseline_key = LocalKey::from_secret_bytes(random_secret())?;
    let mut funded = vec![format!("{:#x}", baseline_key.address())];
    funded.push(warmup.address.clone());
    funded.extend(
        phases
            .iter()
            .flat_map(|(_, s, _)| s.iter().map(|s| s.address.clone())),
    );
    node.fund(&funded, FUNDING_WEI).await?;

    // The node's own rate, while nothing else runs.
    let baseline = baseline::measure(&node, &meter, baseline_key, &args).await?;

    let trust_roots = std::iter::once(&warmup)
        .chain(phases.iter().flat_map(|(_, s, _)| s.iter()))
        .map(|s| s.trust.root())
        .collect();
    let endpoints = Endpoints::start(&args, &node).await?;
    let most = args.instances.iter().copied().max().unwrap_or(1);
    let services = start_services(&args, &urls, wallets, trust_roots, &endpoints, most).await?;
    let clients = Clients {
        operations: channels(&services.operations).await?,
        approvals: channels(&services.approvals).await?,
    };
    let bench = Bench {
        owner,
        setup,
        node,
        recorder: endpoints.recorder,
        services,
        clients,
        meter,
        args,
    };
    measure(bench, &warmup, &phases, most, &baseline, started).await
}

/// The JSON-RPC endpoints of the services: where they read evidence and where they submit.
struct Endpoints {
    /// Independent evidence endpoints (proxies in front of the one node; none when the services
    /// read the node directly), kept running while the benchmark runs.
    _proxies: Vec<RpcProxy>,
    /// The evidence URLs; every one must agree.
    evidence_urls: Vec<String>,
    /// The proxy counting every submission (`None` with `--no-send-counter`).
    recorder: Option<RpcProxy>,
    /// Where the broadcasters and reconcilers submit.
    rpc_url: String,
}

impl Endpoints {
    async fn start(args: &Args, node: &Node) -> anyhow::Result<Endpoints> {
        // Independent endpoints are proxies in front of the one node: each answers for itself.
        let mut proxies = Vec::new();
        let evidence_urls: Vec<String> = if args.evidence_endpoints <= 1 {
            vec![node.url().to_owned()]
        } else {
            for _ in 0..args.evidence_endpoints {
                proxies.push(RpcProxy::start(node.url()).await?);
            }
            proxies.iter().map(|p| p.url()).collect()
        };
        println!(
            "evidence: {} endpoint(s), quorum {}",
            evidence_urls.len(),
            evidence_urls.len()
        );
        // Submissions (and the reconcilers' cancels) go through a proxy that counts each signed
        // transaction's eth_sendRawTransaction calls (unless --no-send-counter); evidence is read
        // as above.
        let recorder = if args.no_send_counter {
            None
        } else {
            Some(RpcProxy::start(node.url()).await?)
        };
        let rpc_url = recorder
            .as_ref()
            .map_or_else(|| node.url().to_owned(), RpcProxy::url);
        Ok(Endpoints {
            _proxies: proxies,
            evidence_urls,
            recorder,
            rpc_url,
        })
    }
}

/// Every service, each as its own login at `urls`, with `instances` instances' pools prepared.
async fn start_services(
    args: &Args,
    urls: &RoleUrls,
    wallets: Wallets,
    trust_roots: Vec<TrustRootConfig>,
    endpoints: &Endpoints,
    instances: usize,
) -> anyhow::Result<Services> {
    let settings = Settings {
        batch_size: args.batch_size,
        watch_batch_size: args.watch_batch_size,
        concurrency: args.concurrency,
        poll: Duration::from_millis(20),
        watch_poll: Duration::from_millis(20),
        signer_connections: args.signer_connections,
    };
    services::start(
        urls,
        wallets,
        trust_roots,
        &endpoints.rpc_url,
        &endpoints.evidence_urls,
        &settings,
        instances,
    )
    .await
}

/// The warm-up and every phase, then the report; fails when any phase's verification failed.
async fn measure(
    bench: Bench,
    warmup: &Sender,
    phases: &[PlannedPhase],
    most: usize,
    baseline: &Baseline,
    started: Instant,
) -> anyhow::Result<()> {
    // Warm-up: connections, caches, prepared statements; then statistics, as autovacuum would
    // provide on a database in use.
    let warm = bench
        .phase("warm-up", std::slice::from_ref(warmup), WARMUP, most)
        .await?;
    anyhow::ensure!(
        warm.failures.is_empty(),
        "warm-up failed: {}",
        warm.failures.join("; ")
    );
    sqlx::query("ANALYZE").execute(&bench.owner).await?;

    let mut rows = Vec::new();
    for (label, senders, instances) in phases {
        let result = bench
            .phase(label, senders, bench.args.withdrawals, *instances)
            .await?;
        sqlx::query("ANALYZE").execute(&bench.owner).await?;
        rows.push(result);
    }
    report::print(&bench, baseline, &warm, &rows, started.elapsed());
    let failed: Vec<String> = rows
        .iter()
        .flat_map(|r| r.failures.iter().map(move |f| format!("{}: {f}", r.label)))
        .collect();
    anyhow::ensure!(
        failed.is_empty(),
        "verification failed: {}",
        failed.join("; ")
    );
    Ok(())
}
