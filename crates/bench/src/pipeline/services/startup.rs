//! Starting the pipeline's services: operations and approvals serving gRPC, the signer serving
//! gRPC to the broadcaster's caller token, and the configurations and pools of the broadcaster,
//! reconciler and witness instances.

use opledger_chain::ChainLinks;
use opledger_config::{DatabaseUrl, Secret, ServiceBase};
use opledger_grpc::client::SignerLink;
use opledger_server::serve::{serve, serve_api};
use opledger_signer::config::TrustRootConfig;
use opledger_signer::{Signer, Wallets};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::{InstanceStores, Services, WatchTotals, Workers, connect, network, report};
use crate::pipeline::options::NETWORK;
use crate::pipeline::witness::WitnessTotals;

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
    trust_roots: Vec<TrustRootConfig>,
    rpc_url: &str,
    evidence_urls: &[String],
    settings: &Settings,
    instances: usize,
) -> anyhow::Result<Services> {
    let mut tasks = Vec::new();
    let operations = serve_grpc_api(
        &mut tasks,
        connect(&urls.operations, OPERATIONS_CONNECTIONS, "operations")
            .await?
            .operations(),
        opledger_operations::SERVICE_NAME,
        opledger_operations::routes,
    )?;
    let approvals = serve_grpc_api(
        &mut tasks,
        connect(&urls.approvals, APPROVALS_CONNECTIONS, "approvals")
            .await?
            .approvals(),
        opledger_approvals::SERVICE_NAME,
        opledger_approvals::routes,
    )?;

    // The signer, reached by the broadcaster over gRPC with a caller token scoped like the
    // broadcaster's (signatures and fee bumps).
    let token = format!("bench-caller-{}", uuid::Uuid::new_v4().simple());
    let signer_addr = start_signer(
        &mut tasks,
        &urls.signer,
        wallets,
        trust_roots,
        settings.signer_connections,
        &token,
    )
    .await?;
    let signer = SignerAccess {
        url: format!("http://{signer_addr}"),
        token,
    };
    let workers = workers(urls, settings, signer, rpc_url, evidence_urls, instances).await?;
    let services = Services {
        operations,
        approvals,
        watch: Arc::new(Mutex::new(WatchTotals::default())),
        witness: Arc::new(Mutex::new(WitnessTotals::default())),
        tasks,
        workers,
        running: Mutex::new(Vec::new()),
    };
    services.run_instances(1)?;
    Ok(services)
}

/// The evidence settings of the watcher, the reconciler and the witness: every endpoint in
/// `urls` must agree.
fn evidence(urls: &[String]) -> opledger_chain::NetworkEvidence {
    opledger_chain::NetworkEvidence {
        urls: urls.to_vec(),
        // The benchmark's anvil (services.rs starts it with this id).
        chain_id: 31337,
        quorum: urls.len(),
        confirmations: Some(1),
        finalized: false,
        min_confirmations: 12,
        max_lag_blocks: 8,
        // One confirmation on anvil, on purpose: the benchmark measures the pipeline, not depth.
        allow_shallow_finality: true,
        insecure_clear_text: false,
    }
}

/// Serves one gRPC API (`make`'s routes, authenticated against `store`) on a free loopback port,
/// its task added to `tasks`; its URL.
fn serve_grpc_api<S>(
    tasks: &mut Vec<JoinHandle<()>>,
    store: S,
    name: &'static str,
    make: opledger_server::serve::MakeRoutes<S>,
) -> anyhow::Result<String>
where
    S: Clone + Into<opledger_store::roles::KeysStore> + Send + 'static,
{
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
    Ok(format!("http://{addr}"))
}

/// The signer service, connected as its role at `url` with `connections` pooled connections,
/// its wallets registered, accepting the broadcaster's `token`; served on a free loopback port,
/// its task added to `tasks`. Its address.
async fn start_signer(
    tasks: &mut Vec<JoinHandle<()>>,
    url: &str,
    wallets: Wallets,
    trust_roots: Vec<TrustRootConfig>,
    connections: u32,
    token: &str,
) -> anyhow::Result<SocketAddr> {
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
        base: ServiceBase {
            db_max_connections: connections,
            ..opledger_signer::Config::default().base
        },
        networks: BTreeMap::from([(NETWORK.to_owned(), network())]),
        trust_roots,
        ..opledger_signer::Config::default()
    };
    let store = connect(url, connections, "signer").await?;
    let callers = opledger_signer::callers(&config);
    let signer = Signer::new(store.signer(), Arc::new(config), Arc::new(wallets));
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
    Ok(signer_addr)
}

/// Where the broadcaster and the reconciler reach the signer, and with which caller token.
struct SignerAccess {
    url: String,
    token: String,
}

/// The configurations of the broadcaster, the reconciler and the witness, and the pools of
/// `instances` instances of each, connected up front.
async fn workers(
    urls: &RoleUrls,
    settings: &Settings,
    signer: SignerAccess,
    rpc_url: &str,
    evidence_urls: &[String],
    instances: usize,
) -> anyhow::Result<Workers> {
    let evidence = evidence(evidence_urls);
    // The broadcaster and the reconciler: their configurations, with polls short enough not
    // to limit throughput; every instance differs only in its worker id and pools.
    let signer = SignerLink {
        signer_url: signer.url,
        signer_token: Secret(signer.token),
        signer_tls: None,
    };
    let chain = ChainLinks {
        rpc: BTreeMap::from([(NETWORK.to_owned(), rpc_url.to_owned())]),
        evidence: BTreeMap::from([(NETWORK.to_owned(), evidence.clone())]),
        ..ChainLinks::default()
    };
    let broadcaster = opledger_broadcaster::Config {
        base: ServiceBase {
            db_max_connections: BROADCASTER_CONNECTIONS,
            ..opledger_broadcaster::Config::default().base
        },
        signer: signer.clone(),
        chain: chain.clone(),
        poll_interval_ms: u64::try_from(settings.poll.as_millis())?,
        batch_size: settings.batch_size,
        watch_batch_size: settings.watch_batch_size,
        concurrency: settings.concurrency,
        ..opledger_broadcaster::Config::default()
    };
    let reconciler = opledger_reconciler::Config {
        signer,
        chain,
        ..opledger_reconciler::Config::default()
    };
    // The witness: every setting its default but its login and its evidence (the reconciler's
    // endpoints and quorum), checked the way its binary checks a loaded configuration.
    let witness = opledger_witness::Config {
        base: ServiceBase {
            database_url: DatabaseUrl(urls.witness.clone()),
            ..opledger_witness::Config::default().base
        },
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
            witness: connect(&urls.witness, witness.base.db_max_connections, "witness").await?,
        });
    }
    Ok(Workers {
        broadcaster,
        reconciler,
        witness,
        witness_counters: Arc::new(opledger_witness::metrics::Counters::default()),
        watch_poll: settings.watch_poll,
        poll: settings.poll,
        stores,
    })
}
