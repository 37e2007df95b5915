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

mod cpu;
mod node;
mod report;
mod services;
mod witness;

use crate::database::{self, BenchDatabase, LoginRole};
use crate::report::summarize;
use alloy_primitives::{Address, U256};
use node::Node;
use opledger_domain::amount::Amount;
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{AccountName, AssetCode, PayloadHash};
use opledger_evm::signer::{self as evm, KeyProvider, LocalKey};
use opledger_evm::tx::{TransferKind, TransferRequest};
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_signer::Wallets;
use opledger_store::keys::Role;
use opledger_store::ledger::NewCredit;
use opledger_store::{Store, StoreConfig, StoreError};
use rand::RngCore;
use services::{Services, Settings, WatchTotals};
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tonic::transport::Channel;
use zeroize::Zeroizing;

/// Options of `opledger-bench pipeline`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Superuser URL of a PostgreSQL cluster (the bench creates its own database in it).
    #[arg(long, env = "OPLEDGER_BENCH_ADMIN_URL", hide_env_values = true)]
    admin_url: String,
    /// The anvil binary (`scripts/anvil.sh install` prints its path).
    #[arg(long, env = "OPLEDGER_ANVIL_BIN")]
    anvil_bin: PathBuf,
    /// Withdrawals in each measured phase (and pre-signed transfers of the node baseline).
    #[arg(long, default_value_t = 1000)]
    withdrawals: usize,
    /// Sender addresses of each phase (one tenant and hot wallet each; withdrawals round-robin).
    #[arg(long, value_delimiter = ',', default_values_t = [1_usize, 8])]
    senders: Vec<usize>,
    /// Concurrent clients, each creating a withdrawal and then approving it.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Offered load in creates per second; 0 sends as fast as the clients go.
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Broadcaster `batch_size`: due operations per poll (the production default).
    #[arg(long, default_value_t = 64)]
    batch_size: u32,
    /// Broadcaster `watch_batch_size`: BROADCAST operations the watcher examines per new head
    /// (the production default).
    #[arg(long, default_value_t = 2000)]
    watch_batch_size: u32,
    /// Broadcaster `concurrency` (operations signed and submitted at once).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Pooled database connections of the signer.
    #[arg(long, default_value_t = 8)]
    signer_connections: u32,
    /// Seconds between anvil's blocks.
    #[arg(long, default_value_t = 1)]
    block_time: u64,
    /// Concurrent submitters of the node baseline.
    #[arg(long, default_value_t = 4)]
    baseline_concurrency: usize,
    /// Seconds a phase may take before it is given up (and fails verification).
    #[arg(long, default_value_t = 120)]
    phase_timeout: u64,
    /// Evidence endpoints of the watcher, the reconciler and the witness: this many JSON-RPC
    /// proxies in front of the one node, all of which must agree (the quorum is this number). 1
    /// reads the node directly.
    #[arg(long, default_value_t = 1)]
    evidence_endpoints: usize,
    /// Broadcaster, reconciler and witness instances of each phase, against the one database:
    /// every sender count is measured once per value, in this order (`1,2` alternates one and
    /// two).
    #[arg(long, value_delimiter = ',', default_values_t = [1_usize])]
    instances: Vec<usize>,
    /// Submit straight to the node instead of through the proxy that counts each signed
    /// transaction's `eth_sendRawTransaction` calls: that proxy is one more HTTP hop inside every
    /// broadcaster pass, which a baseline without it does not pay. Sends beyond the first and
    /// attempts never sent are then not measured (printed as n/a); every other duplicate is.
    /// Refused with `--instances` above 1.
    #[arg(long)]
    no_send_counter: bool,
}

const DB: &str = "opledger_bench_pipeline";
/// The services' login roles, each a member of its own service's group role only.
const fn login(user: &'static str, group: &'static str) -> LoginRole<'static> {
    LoginRole {
        user,
        password: user,
        group,
    }
}
const OPERATIONS: LoginRole<'static> = login("opledger_bench_operations", "opledger_operations");
const APPROVALS: LoginRole<'static> = login("opledger_bench_approvals", "opledger_approvals");
const SIGNER: LoginRole<'static> = login("opledger_bench_signer", "opledger_signer");
const BROADCASTER: LoginRole<'static> = login("opledger_bench_broadcaster", "opledger_broadcaster");
const RECONCILER: LoginRole<'static> = login("opledger_bench_reconciler", "opledger_reconciler");
const WITNESS: LoginRole<'static> = login("opledger_bench_witness", "opledger_witness");
/// The network id of the anvil node in payloads, the signer and the broadcaster.
const NETWORK: &str = "anvil";
/// Withdrawals of the unreported warm-up phase (own tenant and hot wallet).
const WARMUP: usize = 100;
/// ETH each hot wallet gets from anvil's first dev account (in wei: 10 ETH).
const FUNDING_WEI: u128 = 10_000_000_000_000_000_000;
/// gRPC connections of the clients to each service.
const CHANNELS: usize = 4;
/// Targets the results are reported against.
const TARGET_PER_SEC: f64 = 300.0;
const TARGET_P50_SECS: f64 = 3.0;
const TARGET_CPU_PER_1000: f64 = 5.0;

/// One sender: a tenant with client and approver keys, a funded account and its hot wallet.
#[derive(Debug, Clone)]
struct Sender {
    tenant: TenantId,
    client: Arc<str>,
    approver: Arc<str>,
    /// The tenant's published trust statement and approver key.
    trust: crate::trust::TenantTrust,
    /// The hot wallet's address, lowercase 0x hex.
    address: String,
}

/// gRPC clients of operations and approvals.
#[derive(Debug, Clone)]
struct Clients {
    operations: Vec<Channel>,
    approvals: Vec<Channel>,
}

/// What the node baseline measured.
#[derive(Debug)]
struct Baseline {
    sent: usize,
    per_sec: f64,
    mined_after: Duration,
    node_cpu: Option<f64>,
}

/// What one phase measured and verified.
#[derive(Debug)]
struct PhaseResult {
    label: String,
    senders: usize,
    instances: usize,
    duplicates: Duplicates,
    /// Transitions made by each broadcaster, watcher and reconciler instance in the phase.
    per_instance: Vec<(String, String, i64)>,
    withdrawals: usize,
    per_sec: f64,
    p50: Duration,
    p99: Duration,
    used: cpu::Used,
    /// PostgreSQL CPU seconds of each login's live backends over the phase, largest first.
    logins: Vec<(String, f64)>,
    /// Seconds from the first create until every create and approval had answered.
    ingest_secs: f64,
    /// Seconds from the first create until the last confirmation.
    span_secs: f64,
    states: BTreeMap<String, i64>,
    stages: Vec<(&'static str, Duration)>,
    /// Seconds from the first create until the last withdrawal reached each state.
    reached: Vec<(&'static str, f64)>,
    watch: WatchTotals,
    /// What the witnesses' passes did over the phase.
    witness: witness::WitnessTotals,
    client_errors: usize,
    first_error: Option<String>,
    failures: Vec<String>,
}

/// Work done more than once in a phase: each count is how many times beyond the first.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Duplicates {
    /// `eth_sendRawTransaction` calls of one signed transaction beyond its first (`None`: not
    /// counted, `--no-send-counter`).
    sends: Option<u64>,
    /// Signed attempts never submitted (through the counting proxy; `None`: not counted).
    unsent: Option<u64>,
    /// Attempts of one withdrawal beyond its first.
    attempts: i64,
    /// SIGNED -> BROADCAST (or UNKNOWN) moves of one withdrawal beyond its first.
    broadcasts: i64,
    /// CONFIRMED moves of one withdrawal beyond its first.
    confirmations: i64,
    /// Settlements (ledger SETTLE entries) of one withdrawal beyond its first.
    settlements: i64,
}

impl Duplicates {
    fn total(&self) -> i64 {
        i64::try_from(self.sends.unwrap_or(0) + self.unsent.unwrap_or(0)).unwrap_or(i64::MAX)
            + self.attempts
            + self.broadcasts
            + self.confirmations
            + self.settlements
    }
}

/// Everything a phase needs.
#[derive(Debug)]
struct Bench {
    owner: PgPool,
    setup: Store,
    node: Node,
    /// The broadcasters' and reconcilers' `[rpc]` endpoint, counting every submission (`None`
    /// with `--no-send-counter`: they submit to the node itself).
    recorder: Option<opledger_testkit::RpcProxy>,
    services: Services,
    clients: Clients,
    meter: cpu::Meter,
    args: Args,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.withdrawals >= 1, "--withdrawals must be at least 1");
    anyhow::ensure!(args.clients >= 1, "--clients must be at least 1");
    // Two replicas sending one signed transaction twice is what `--instances` is there to catch,
    // and only the counting proxy sees it.
    anyhow::ensure!(
        !args.no_send_counter || args.instances.iter().all(|&n| n <= 1),
        "--no-send-counter cannot be combined with more than one instance: \
         repeated sends between replicas would go uncounted"
    );
    anyhow::ensure!(
        args.batch_size >= 1 && args.watch_batch_size >= 1 && args.concurrency >= 1,
        "--batch-size, --watch-batch-size and --concurrency must be at least 1"
    );
    anyhow::ensure!(args.rate >= 0.0, "--rate must not be negative");
    anyhow::ensure!(args.block_time >= 1, "--block-time must be at least 1");
    anyhow::ensure!(
        !args.senders.is_empty() && args.senders.iter().all(|&n| n >= 1),
        "--senders must name counts of at least 1"
    );
    anyhow::ensure!(
        !args.instances.is_empty() && args.instances.iter().all(|&n| (1..=8).contains(&n)),
        "--instances must name counts from 1 to 8"
    );
    let started = Instant::now();

    // The database: every service as a login role in its own group role, as deployed.
    let admin = PgConnectOptions::from_str(&args.admin_url)?;
    let BenchDatabase {
        owner,
        role_url: operations,
    } = database::fresh(&admin, DB, 8, OPERATIONS).await?;
    let urls = services::RoleUrls {
        operations,
        approvals: database::login_role(&owner, &admin, DB, APPROVALS).await?,
        signer: database::login_role(&owner, &admin, DB, SIGNER).await?,
        broadcaster: database::login_role(&owner, &admin, DB, BROADCASTER).await?,
        reconciler: database::login_role(&owner, &admin, DB, RECONCILER).await?,
        witness: database::login_role(&owner, &admin, DB, WITNESS).await?,
    };
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
    let mut phases = Vec::new();
    for (p, &n) in args.senders.iter().enumerate() {
        for (q, &instances) in args.instances.iter().enumerate() {
            let mut senders = Vec::new();
            for i in 0..n {
                let name = format!("bench-pipeline-{p}-{q}-{i}");
                senders.push(new_sender(&setup, &mut wallets, &name).await?);
            }
            let mut label = if n == 1 {
                "1 sender".to_owned()
            } else {
                format!("{n} senders")
            };
            if args.instances != [1] {
                label.push_str(&format!(
                    ", {instances} instance{}",
                    if instances == 1 { "" } else { "s" }
                ));
            }
            phases.push((label, senders, instances));
        }
    }
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
    let baseline = baseline(&node, &meter, baseline_key, &args).await?;

    let settings = Settings {
        batch_size: args.batch_size,
        watch_batch_size: args.watch_batch_size,
        concurrency: args.concurrency,
        poll: Duration::from_millis(20),
        watch_poll: Duration::from_millis(20),
        signer_connections: args.signer_connections,
    };
    let trust_roots = std::iter::once(&warmup)
        .chain(phases.iter().flat_map(|(_, s, _)| s.iter()))
        .map(|s| s.trust.root())
        .collect();
    // Independent endpoints are proxies in front of the one node: each answers for itself.
    let mut proxies = Vec::new();
    let evidence_urls: Vec<String> = if args.evidence_endpoints <= 1 {
        vec![node.url().to_owned()]
    } else {
        for _ in 0..args.evidence_endpoints {
            proxies.push(opledger_testkit::RpcProxy::start(node.url()).await?);
        }
        proxies.iter().map(|p| p.url()).collect()
    };
    println!(
        "evidence: {} endpoint(s), quorum {}",
        evidence_urls.len(),
        evidence_urls.len()
    );
    // Submissions (and the reconcilers' cancels) go through a proxy that counts each signed
    // transaction's eth_sendRawTransaction calls (unless --no-send-counter); evidence is read as
    // above.
    let recorder = if args.no_send_counter {
        None
    } else {
        Some(opledger_testkit::RpcProxy::start(node.url()).await?)
    };
    let rpc_url = recorder
        .as_ref()
        .map_or_else(|| node.url().to_owned(), opledger_testkit::RpcProxy::url);
    let most = args.instances.iter().copied().max().unwrap_or(1);
    let services = services::start(
        &urls,
        wallets,
        trust_roots,
        &rpc_url,
        &evidence_urls,
        &settings,
        most,
    )
    .await?;
    let clients = Clients {
        operations: channels(&services.operations).await?,
        approvals: channels(&services.approvals).await?,
    };
    let bench = Bench {
        owner,
        setup,
        node,
        recorder,
        services,
        clients,
        meter,
        args,
    };

    // Warm-up: connections, caches, prepared statements; then statistics, as autovacuum would
    // provide on a database in use.
    let warm = bench
        .phase("warm-up", std::slice::from_ref(&warmup), WARMUP, most)
        .await?;
    anyhow::ensure!(
        warm.failures.is_empty(),
        "warm-up failed: {}",
        warm.failures.join("; ")
    );
    sqlx::query("ANALYZE").execute(&bench.owner).await?;

    let mut rows = Vec::new();
    for (label, senders, instances) in &phases {
        let result = bench
            .phase(label, senders, bench.args.withdrawals, *instances)
            .await?;
        sqlx::query("ANALYZE").execute(&bench.owner).await?;
        rows.push(result);
    }
    report::print(&bench, &baseline, &warm, &rows, started.elapsed());
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

fn store_err(e: StoreError) -> anyhow::Error {
    anyhow::anyhow!(e.log_safe())
}

/// A random secp256k1 secret (never a fixed or real key).
fn random_secret() -> Zeroizing<[u8; 32]> {
    let mut secret = Zeroizing::new([0_u8; 32]);
    rand::rng().fill_bytes(secret.as_mut());
    secret
}

fn random_address() -> Address {
    let mut bytes = [0_u8; 20];
    rand::rng().fill_bytes(&mut bytes);
    Address::from(bytes)
}

/// A tenant with client and approver keys, a funded `treasury` account and a fresh hot wallet.
async fn new_sender(store: &Store, wallets: &mut Wallets, name: &str) -> anyhow::Result<Sender> {
    let tenant = store.create_tenant(name).await.map_err(store_err)?;
    let client = store
        .create_api_key(tenant, Role::Client, "bench")
        .await
        .map_err(store_err)?;
    let approver = store
        .create_api_key(tenant, Role::Approver, "bench")
        .await
        .map_err(store_err)?;
    let trust = crate::trust::publish(store, tenant).await?;
    let key = IdempotencyKey::parse(&uuid::Uuid::new_v4().to_string())?;
    store
        .credit_account(NewCredit {
            tenant_id: tenant,
            key: &key,
            account: &AccountName::parse("treasury")?,
            asset: &AssetCode::parse("ETH")?,
            amount: Amount::parse("1000000000000000000000000000000")?,
        })
        .await
        .map_err(store_err)?;
    let wallet = Arc::new(LocalKey::from_secret_bytes(random_secret())?);
    let address = format!("{:#x}", wallet.address());
    anyhow::ensure!(
        wallets.insert(tenant, NETWORK, wallet, 0),
        "a second wallet for one tenant"
    );
    Ok(Sender {
        tenant,
        client: Arc::from(client.token.as_str()),
        approver: Arc::from(approver.token.as_str()),
        trust,
        address,
    })
}

async fn channels(url: &str) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::new();
    for _ in 0..CHANNELS {
        out.push(Channel::from_shared(url.to_owned())?.connect().await?);
    }
    Ok(out)
}

fn authed<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(value) = format!("Bearer {token}").parse() {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn status_text(status: &tonic::Status) -> String {
    let reason = opledger_grpc::status::reason_of(status).unwrap_or_default();
    format!("{:?} {reason}", status.code())
}

/// Pre-signed native transfers from one fresh wallet, submitted with `eth_sendRawTransaction` by
/// a few concurrent submitters: the node's own acceptance rate.
async fn baseline(
    node: &Node,
    meter: &cpu::Meter,
    key: LocalKey,
    args: &Args,
) -> anyhow::Result<Baseline> {
    let n = args.withdrawals;
    let network = services::network();
    let address = format!("{:#x}", key.address());
    let template = TransferRequest {
        chain_id: network.chain_id,
        nonce: 0,
        to: Address::ZERO,
        kind: TransferKind::Native {
            value: U256::from(100_u64),
        },
        gas_limit: network.gas_limit_native,
        max_fee_per_gas: network.max_fee_per_gas.parse()?,
        max_priority_fee_per_gas: network.max_priority_fee_per_gas.parse()?,
    };
    let raws = tokio::task::spawn_blocking(move || {
        (0..n)
            .map(|i| {
                let request = TransferRequest {
                    nonce: i as u64,
                    to: random_address(),
                    ..template.clone()
                };
                evm::sign(&request, &key).map(|s| s.raw)
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await??;
    let raws = Arc::new(raws);
    let next = Arc::new(AtomicUsize::new(0));
    let before = meter.sample();
    let start = Instant::now();
    let mut first_error = None;
    let results = join_tasks(args.baseline_concurrency.max(1), |_| {
        let (raws, next) = (raws.clone(), next.clone());
        async move {
            let mut errors = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(raw) = raws.get(i) else { break };
                if let Err(e) = node.send_raw(raw).await {
                    errors.push(format!("{e:#}"));
                }
            }
            errors
        }
    })
    .await;
    let elapsed = start.elapsed();
    for errors in results {
        if let Some(e) = errors.into_iter().next() {
            first_error.get_or_insert(e);
        }
    }
    if let Some(e) = first_error {
        anyhow::bail!("the node refused a baseline transfer: {e}");
    }
    anyhow::ensure!(
        node.wait_nonce(&address, n as u64, Duration::from_secs(60))
            .await?,
        "the baseline's {n} transfers were not all mined within 60 s"
    );
    let mined_after = start.elapsed();
    let used = before.until(&meter.sample());
    Ok(Baseline {
        sent: n,
        per_sec: n as f64 / elapsed.as_secs_f64(),
        mined_after,
        node_cpu: used.node,
    })
}

/// Runs `tasks` copies of `make(i)` concurrently on this task and collects their outputs.
async fn join_tasks<F, Fut, T>(tasks: usize, make: F) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    futures::future::join_all((0..tasks).map(make)).await
}

/// A withdrawal the clients created: its id and when its create request was sent (Unix seconds).
type Sent = (uuid::Uuid, f64);

impl Bench {
    /// Creates and approves `n` withdrawals over gRPC (round-robin over `senders`), waits until
    /// every one is CONFIRMED (or the phase stalls or times out), then measures and verifies.
    async fn phase(
        &self,
        label: &str,
        senders: &[Sender],
        n: usize,
        instances: usize,
    ) -> anyhow::Result<PhaseResult> {
        let tenants: Vec<uuid::Uuid> = senders.iter().map(|s| s.tenant.as_uuid()).collect();
        self.services.run_instances(instances)?;
        // The new instances' first polls and passes, before the clock starts.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let watch_before = self.services.watch_totals();
        let witness_before = self.services.witness_totals();
        let cpu_before = self.meter.sample();
        let logins_before = cpu::by_login(&self.owner, self.meter.hz).await;
        let start = Instant::now();
        let driver = tokio::spawn(drive(
            self.clients.clone(),
            Arc::new(senders.to_vec()),
            n,
            self.args.clients,
            self.args.rate,
        ));

        // Wait for the outcome, polling the states of the phase's operations.
        let timeout = Duration::from_secs(self.args.phase_timeout);
        let mut driven = None;
        let mut driver = Some(driver);
        let mut ingest = Duration::ZERO;
        let (mut last, mut last_change) = (BTreeMap::new(), Instant::now());
        let states = loop {
            if let Some(handle) = driver.take_if(|h| h.is_finished()) {
                driven = Some(handle.await??);
                ingest = start.elapsed();
            }
            let states = states(&self.owner, &tenants).await?;
            let confirmed = states.get("CONFIRMED").copied().unwrap_or(0);
            if driven.is_some() && usize::try_from(confirmed)? >= n {
                break states;
            }
            if states != last {
                last = states.clone();
                last_change = Instant::now();
            }
            let stalled = driven.is_some() && last_change.elapsed() > Duration::from_secs(20);
            if stalled || start.elapsed() > timeout {
                break states;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let used = cpu_before.until(&self.meter.sample());
        let logins = cpu::login_use(
            &logins_before,
            &cpu::by_login(&self.owner, self.meter.hz).await,
        );
        let watch = watch_before.until(&self.services.watch_totals());
        let witness = witness_before.until(&self.services.witness_totals());
        if let Some(handle) = driver.take() {
            handle.abort();
        }
        let (sent, client_errors, first_error) = driven.unwrap_or_default();

        // Latency: the CONFIRMED transition's time minus the create request's send time.
        let rows = transitions(&self.owner, &tenants).await?;
        let sent_at: HashMap<uuid::Uuid, f64> = sent.iter().copied().collect();
        let first_sent = sent.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
        let mut latencies = Vec::new();
        let mut last_confirmed = f64::NEG_INFINITY;
        let mut stage = [(); 5].map(|()| Vec::new());
        let mut reached = [f64::NEG_INFINITY; 4];
        for row in &rows {
            for (i, at) in [row.approved, row.signed, row.broadcast, row.confirmed]
                .into_iter()
                .enumerate()
            {
                if let Some(at) = at {
                    reached[i] = reached[i].max(at - first_sent);
                }
            }
            if let (Some(&at), Some(confirmed)) = (sent_at.get(&row.op_id), row.confirmed) {
                latencies.push(secs(confirmed - at));
                last_confirmed = last_confirmed.max(confirmed);
            }
            let steps = [
                sent_at.get(&row.op_id).copied(),
                Some(row.created),
                row.approved,
                row.signed,
                row.broadcast,
                row.confirmed,
            ];
            for (i, pair) in steps.windows(2).enumerate() {
                if let [Some(a), Some(b)] = pair {
                    stage[i].push(secs(b - a));
                }
            }
        }
        let span = (last_confirmed - first_sent).max(f64::MIN_POSITIVE);
        let summary = summarize(latencies, 0, Duration::from_secs_f64(span.max(1e-9)));
        let names = [
            "request -> created",
            "created -> approved",
            "approved -> signed",
            "signed -> broadcast",
            "broadcast -> confirmed",
        ];
        let stages = names
            .into_iter()
            .zip(stage)
            .map(|(name, durations)| (name, summarize(durations, 0, Duration::from_secs(1)).p50))
            .collect();

        let mut failures = self.verify(senders, n, &states).await?;
        let duplicates = self.duplicates(&tenants).await?;
        if duplicates.total() != 0 {
            failures.push(format!("duplicate work: {duplicates:?}"));
        }
        let per_instance: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT actor_id, actor, count(*) FROM operation_transitions \
             WHERE tenant_id = ANY($1) AND actor IN ('broadcaster', 'chain_watcher', 'reconciler') \
             GROUP BY actor_id, actor ORDER BY actor_id, actor",
        )
        .bind(&tenants)
        .fetch_all(&self.owner)
        .await?;
        // No release is proposed on the happy path; a refusal would mean the witness's evidence
        // contradicts an honest reconciler's.
        if witness.refused_total() > 0 {
            failures.push(format!(
                "the witness refused {} proposed releases (by reason: {:?})",
                witness.refused_total(),
                witness.refused
            ));
        }
        if client_errors > 0 {
            failures.push(format!(
                "{client_errors} create or approve calls failed (first: {})",
                first_error.as_deref().unwrap_or("-")
            ));
        }
        Ok(PhaseResult {
            label: label.to_owned(),
            senders: senders.len(),
            instances,
            duplicates,
            per_instance,
            withdrawals: n,
            per_sec: summary.per_sec,
            p50: summary.p50,
            p99: summary.p99,
            used,
            logins,
            ingest_secs: ingest.as_secs_f64(),
            span_secs: span,
            states,
            stages,
            reached: ["APPROVED", "SIGNED", "BROADCAST", "CONFIRMED"]
                .into_iter()
                .zip(reached)
                .collect(),
            watch,
            witness,
            client_errors,
            first_error,
            failures,
        })
    }

    /// Work of the phase's withdrawals done more than once.
    async fn duplicates(&self, tenants: &[uuid::Uuid]) -> anyhow::Result<Duplicates> {
        let raws: Vec<(String,)> = sqlx::query_as(
            "SELECT encode(raw_tx, 'hex') FROM tx_attempts WHERE tenant_id = ANY($1)",
        )
        .bind(tenants)
        .fetch_all(&self.owner)
        .await?;
        let mut out = Duplicates::default();
        if let Some(recorder) = &self.recorder {
            let sent = recorder.sent_transactions();
            let (mut sends, mut unsent) = (0, 0);
            for (raw,) in &raws {
                match sent.get(raw).copied().unwrap_or(0) {
                    0 => unsent += 1,
                    n => sends += n - 1,
                }
            }
            (out.sends, out.unsent) = (Some(sends), Some(unsent));
        }
        /// How many rows of `$from` matching `$filter` there are beyond each withdrawal's first.
        macro_rules! beyond_first {
            ($filter:literal, $from:literal) => {
                concat!(
                    "SELECT coalesce(sum(n - 1), 0)::bigint FROM (SELECT count(*) AS n FROM ",
                    $from,
                    " WHERE tenant_id = ANY($1) AND ",
                    $filter,
                    " GROUP BY tenant_id, op_id) x"
                )
            };
        }
        for (query, field) in [
            (beyond_first!("true", "tx_attempts"), &mut out.attempts),
            (
                beyond_first!(
                    "from_state = 'SIGNED' AND to_state IN ('BROADCAST', 'UNKNOWN')",
                    "operation_transitions"
                ),
                &mut out.broadcasts,
            ),
            (
                beyond_first!("to_state = 'CONFIRMED'", "operation_transitions"),
                &mut out.confirmations,
            ),
            (
                beyond_first!("kind = 'SETTLE'", "ledger_entries"),
                &mut out.settlements,
            ),
        ] {
            let (n,): (i64,) = sqlx::query_as(query)
                .bind(tenants)
                .fetch_one(&self.owner)
                .await?;
            *field = n;
        }
        Ok(out)
    }

    /// What must hold after a phase; each violation as a sentence (empty: all hold).
    async fn verify(
        &self,
        senders: &[Sender],
        n: usize,
        states: &BTreeMap<String, i64>,
    ) -> anyhow::Result<Vec<String>> {
        let mut failures = Vec::new();
        let n = i64::try_from(n)?;
        let tenants: Vec<uuid::Uuid> = senders.iter().map(|s| s.tenant.as_uuid()).collect();
        let confirmed = states.get("CONFIRMED").copied().unwrap_or(0);
        let total: i64 = states.values().sum();
        if confirmed != n || total != n {
            // Why the others are not: each one's last move (actor and reason) and escalation.
            let why: Vec<(String, String, String, String)> = sqlx::query_as(
                "SELECT o.state, COALESCE(t.actor, '-'), COALESCE(t.reason, '-'), \
                   COALESCE((SELECT string_agg(e.reason_code || '/' || e.owner, ',') \
                     FROM escalations e WHERE e.tenant_id = o.tenant_id AND e.op_id = o.op_id), '-') \
                 FROM withdrawal_ops o LEFT JOIN LATERAL ( \
                   SELECT actor, reason FROM operation_transitions x \
                   WHERE x.tenant_id = o.tenant_id AND x.op_id = o.op_id \
                   ORDER BY x.transition_id DESC LIMIT 1) t ON true \
                 WHERE o.tenant_id = ANY($1) AND o.state <> 'CONFIRMED'",
            )
            .bind(&tenants)
            .fetch_all(&self.owner)
            .await?;
            failures.push(format!(
                "{confirmed} of {total} withdrawals CONFIRMED, expected all {n} (states {states:?}; \
                 the others' last move and escalations: {why:?})"
            ));
        }
        let (ops, with_one): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE attempts = 1) FROM ( \
               SELECT o.op_id, count(a.op_id) AS attempts FROM withdrawal_ops o \
               LEFT JOIN tx_attempts a USING (tenant_id, op_id) \
               WHERE o.tenant_id = ANY($1) GROUP BY o.tenant_id, o.op_id) x",
        )
        .bind(&tenants)
        .fetch_one(&self.owner)
        .await?;
        if with_one != ops {
            failures.push(format!(
                "{with_one} of {ops} withdrawals have exactly one tx_attempts row"
            ));
        }
        let violations = self.setup.check_invariants().await.map_err(store_err)?;
        if !violations.is_empty() {
            failures.push(format!("ledger invariants violated: {violations:?}"));
        }
        for sender in senders {
            let (count,): (i64,) =
                sqlx::query_as("SELECT count(*) FROM withdrawal_ops WHERE tenant_id = $1")
                    .bind(sender.tenant.as_uuid())
                    .fetch_one(&self.owner)
                    .await?;
            let nonce = self.node.nonce(&sender.address).await?;
            if i64::try_from(nonce)? != count {
                failures.push(format!(
                    "hot wallet {} has on-chain nonce {nonce}, expected {count} (its withdrawals)",
                    sender.address
                ));
            }
        }
        Ok(failures)
    }
}

/// Seconds as a duration (negative differences, from clock granularity, count as zero).
fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// Withdrawal counts by state for `tenants`.
async fn states(db: &PgPool, tenants: &[uuid::Uuid]) -> anyhow::Result<BTreeMap<String, i64>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT state, count(*) FROM withdrawal_ops WHERE tenant_id = ANY($1) GROUP BY state",
    )
    .bind(tenants)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// When one operation reached each state (Unix seconds, from the transition log).
#[derive(Debug)]
struct Timeline {
    op_id: uuid::Uuid,
    created: f64,
    approved: Option<f64>,
    signed: Option<f64>,
    broadcast: Option<f64>,
    confirmed: Option<f64>,
}

type TimelineRow = (
    uuid::Uuid,
    f64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

async fn transitions(db: &PgPool, tenants: &[uuid::Uuid]) -> anyhow::Result<Vec<Timeline>> {
    let rows: Vec<TimelineRow> = sqlx::query_as(
        "SELECT o.op_id, extract(epoch FROM o.created_at)::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'APPROVED'))::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'SIGNED'))::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'BROADCAST'))::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'CONFIRMED'))::float8 \
         FROM withdrawal_ops o JOIN operation_transitions t USING (tenant_id, op_id) \
         WHERE o.tenant_id = ANY($1) GROUP BY o.tenant_id, o.op_id, o.created_at",
    )
    .bind(tenants)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(op_id, created, approved, signed, broadcast, confirmed)| Timeline {
                op_id,
                created,
                approved,
                signed,
                broadcast,
                confirmed,
            },
        )
        .collect())
}

/// What the clients did: the withdrawals created, failed calls and the first failure.
type Driven = (Vec<Sent>, usize, Option<String>);

/// `clients` concurrent clients creating (over the operations API, client key) and then approving
/// (over the approvals API, approver key) `n` withdrawals; paced to `rate` creates/s when > 0.
async fn drive(
    clients: Clients,
    senders: Arc<Vec<Sender>>,
    n: usize,
    concurrency: usize,
    rate: f64,
) -> anyhow::Result<Driven> {
    let next = Arc::new(AtomicUsize::new(0));
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for c in 0..concurrency.min(n) {
        let mut operations =
            OperationsServiceClient::new(clients.operations[c % clients.operations.len()].clone());
        let mut approvals =
            ApprovalsServiceClient::new(clients.approvals[c % clients.approvals.len()].clone());
        let (senders, next) = (senders.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let (mut sent, mut errors, mut first_error) = (Vec::new(), 0_usize, None);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                if rate > 0.0 {
                    tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate))
                        .await;
                }
                let sender = &senders[i % senders.len()];
                let at = epoch_now();
                match one(&mut operations, &mut approvals, sender).await {
                    Ok(op_id) => sent.push((op_id, at)),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
            }
            (sent, errors, first_error)
        }));
    }
    let (mut sent, mut errors, mut first_error) = (Vec::with_capacity(n), 0, None);
    for task in tasks {
        let (s, e, f) = task.await?;
        sent.extend(s);
        errors += e;
        first_error = first_error.or(f);
    }
    Ok((sent, errors, first_error))
}

/// One withdrawal created and approved; its id.
async fn one(
    operations: &mut OperationsServiceClient<Channel>,
    approvals: &mut ApprovalsServiceClient<Channel>,
    sender: &Sender,
) -> Result<uuid::Uuid, String> {
    let request = pb::CreateWithdrawalRequest {
        idempotency_key: uuid::Uuid::new_v4().to_string(),
        payload: Some(pb::WithdrawalPayload {
            source_account: "treasury".into(),
            asset: "ETH".into(),
            network: NETWORK.into(),
            destination: format!("{:#x}", random_address()),
            memo: None,
            amount: "100".into(),
            fee_cap: "1000000000000000".into(),
            policy_version: 1,
        }),
    };
    let created = operations
        .create_withdrawal(authed(&sender.client, request))
        .await
        .map_err(|s| format!("create: {}", status_text(&s)))?
        .into_inner()
        .withdrawal
        .ok_or_else(|| "create: no withdrawal in the response".to_owned())?;
    let op_id = created
        .withdrawal_id
        .parse::<uuid::Uuid>()
        .map_err(|_| "create: the withdrawal id is not a uuid".to_owned())?;
    let payload_hash = PayloadHash::from_hex(&created.payload_hash)
        .map_err(|_| "create: the payload hash is not 32 bytes of hex".to_owned())?;
    let (statement, signature) = sender
        .trust
        .approval(
            OperationId::from_uuid(op_id),
            payload_hash,
            crate::trust::flags_from_wire(&created.risk_flags),
        )
        .map_err(|e| format!("approve: {e}"))?;
    let approved = approvals
        .approve_withdrawal(authed(
            &sender.approver,
            pb::ApproveWithdrawalRequest {
                withdrawal_id: created.withdrawal_id,
                acknowledged_risk_flags: created.risk_flags,
                approval_statement: statement.canonical_bytes(),
                signature,
            },
        ))
        .await
        .map_err(|s| format!("approve: {}", status_text(&s)))?
        .into_inner();
    if approved.state != pb::WithdrawalState::Approved as i32 {
        return Err(format!(
            "approve: state {} after one approval",
            approved.state
        ));
    }
    Ok(op_id)
}
