//! The create benchmark: gRPC `CreateWithdrawal` against the real service, versus pgbench.

use crate::database::{self, BenchDatabase, LoginRole};
use crate::pgbench;
use crate::report::{Summary, machine, ms, summarize};
use opledger_domain::ids::TenantId;
use opledger_proto::v1 as pb;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_store::Store;
use opledger_store::keys::Role;
use rand::RngCore;
use sqlx::postgres::PgConnectOptions;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Options of `opledger-bench create`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Superuser URL of a PostgreSQL cluster (the bench creates its own database in it).
    #[arg(long, env = "OPLEDGER_BENCH_ADMIN_URL", hide_env_values = true)]
    admin_url: String,
    /// Seconds each measured phase runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrencies to measure.
    #[arg(long, value_delimiter = ',', default_values_t = [16_usize, 64])]
    concurrency: Vec<usize>,
    /// Source accounts the workers spread over (worker i uses account i mod N). 1 puts every
    /// create on one hot balance row: the worst case of the design's serialization point.
    #[arg(long, default_value_t = 1)]
    accounts: usize,
}

const DB: &str = "opledger_bench";
const APP_USER: &str = "opledger_bench_app";
const APP_PASSWORD: &str = "opledger-bench-app";

pub async fn run(args: Args) -> anyhow::Result<()> {
    let admin = PgConnectOptions::from_str(&args.admin_url)?;
    let (
        BenchDatabase {
            owner,
            role_url: app_url,
        },
        store,
        tenant,
    ) = database::fresh_service_tenant(
        &admin,
        DB,
        LoginRole {
            user: APP_USER,
            password: APP_PASSWORD,
            group: "opledger_operations",
        },
    )
    .await?;
    let client_key = store
        .create_api_key(tenant, Role::Client, "bench")
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    let grpc_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let mut service = spawn_service(&app_url, grpc_port)?;
    let endpoint = format!("http://127.0.0.1:{grpc_port}");
    wait_ready(&endpoint).await?;

    anyhow::ensure!(args.accounts >= 1, "--accounts must be at least 1");
    let accounts = args.accounts;
    credit_accounts(&store, tenant, accounts).await?;

    let token: Arc<str> = Arc::from(client_key.token.as_str());
    let duration = Duration::from_secs(args.seconds);
    // Warm up connections, caches and the service's statement cache.
    let _ = creates(&endpoint, &token, 8, accounts, Duration::from_secs(2)).await?;
    // Steady state: planner statistics exist, as they do on any database autovacuum has seen.
    // Without this the service's cached generic plans would be the ones made on empty tables.
    sqlx::query("ANALYZE").execute(&owner).await?;

    let dir = std::env::temp_dir().join(format!("opledger-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let bench_url = database::database_url(&args.admin_url, DB)?;
    let mut rows = Vec::new();
    let mut replay_keys = Vec::new();
    for &c in &args.concurrency {
        let (summary, keys) = creates(&endpoint, &token, c, accounts, duration).await?;
        replay_keys = keys;
        let ceiling = pgbench::run(&bench_url, &tenant.to_string(), c, accounts, duration, &dir)?;
        rows.push((c, summary, ceiling));
    }
    let replay_c = args.concurrency.iter().copied().max().unwrap_or(64);
    let replays = replays(&endpoint, &token, replay_c, duration, Arc::new(replay_keys)).await?;
    service.kill().ok();
    let _ = service.wait();
    std::fs::remove_dir_all(&dir).ok();

    print(&args, &rows, replay_c, &replays);
    Ok(())
}

/// Opening balances of the bench accounts, as the database owner credits them
/// (`opledger-admin credit`): a service's credit needs the witness, which this benchmark of
/// creates does not run.
async fn credit_accounts(store: &Store, tenant: TenantId, accounts: usize) -> anyhow::Result<()> {
    for i in 0..accounts {
        let key =
            opledger_domain::idempotency::IdempotencyKey::parse(&uuid::Uuid::new_v4().to_string())?;
        store
            .credit_account(opledger_store::ledger::NewCredit {
                tenant_id: tenant,
                key: &key,
                account: &opledger_domain::payload::AccountName::parse(&account_name(i))?,
                asset: &opledger_domain::payload::AssetCode::parse("ETH")?,
                amount: opledger_domain::amount::Amount::parse("1000000000000000000000000000000")?,
            })
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    }
    Ok(())
}

/// Prints the report: the setup, one table row per concurrency and the replays.
fn print(args: &Args, rows: &[(usize, Summary, Summary)], replay_c: usize, replays: &Summary) {
    println!("opledger-bench create: CreateWithdrawal over gRPC vs the same SQL through pgbench");
    println!("machine: {}", machine());
    println!(
        "phase: {} s each; {} source account(s); service, PostgreSQL (fsync on) and both clients \
         on this machine over loopback",
        args.seconds, args.accounts
    );
    println!(
        "| concurrency | creates | creates/s | p50 ms | p99 ms | errors | pgbench tx | pgbench tx/s | pgbench p50 ms | pgbench p99 ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (c, s, p) in rows {
        println!(
            "| {c} | {} | {:.0} | {} | {} | {} | {} | {:.0} | {} | {} | {:.2} |",
            s.count,
            s.per_sec,
            ms(s.p50),
            ms(s.p99),
            s.errors,
            p.count,
            p.per_sec,
            ms(p.p50),
            ms(p.p99),
            s.per_sec / p.per_sec
        );
    }
    let last_create = rows.last().map(|(_, s, _)| s.per_sec).unwrap_or(0.0);
    println!(
        "replays at concurrency {replay_c}: {} in {} s, {:.0}/s, p50 {} ms, p99 {} ms, errors {}; {:.2}x the create rate",
        replays.count,
        args.seconds,
        replays.per_sec,
        ms(replays.p50),
        ms(replays.p99),
        replays.errors,
        replays.per_sec / last_create
    );
}

fn spawn_service(app_url: &str, port: u16) -> anyhow::Result<std::process::Child> {
    let exe = std::env::current_exe()?;
    let bin = exe.with_file_name("opledger-operations");
    anyhow::ensure!(
        bin.exists(),
        "{} is missing: cargo build --release --workspace",
        bin.display()
    );
    Ok(std::process::Command::new(bin)
        .env("OPLEDGER_OPERATIONS_DATABASE_URL", app_url)
        .env("OPLEDGER_OPERATIONS_LISTEN", format!("127.0.0.1:{port}"))
        .env("OPLEDGER_OPERATIONS_METRICS_LISTEN", "127.0.0.1:0")
        .env("OPLEDGER_OPERATIONS_DB_MAX_CONNECTIONS", "32")
        // The benchmark measures creates, not executors: its tenants have no signer wallets.
        .env("OPLEDGER_OPERATIONS_REQUIRE_EXECUTOR", "false")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .spawn()?)
}

async fn wait_ready(endpoint: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match OperationsServiceClient::connect(endpoint.to_owned()).await {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

fn authed<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(value) = format!("Bearer {token}").parse() {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

fn random_destination() -> String {
    let mut bytes = [0_u8; 20];
    rand::rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("0x{hex}")
}

/// The name of bench account `i` (the same names the pgbench script uses).
fn account_name(i: usize) -> String {
    format!("treasury-{i}")
}

fn request(key: String, account: &str) -> pb::CreateWithdrawalRequest {
    pb::CreateWithdrawalRequest {
        idempotency_key: key,
        payload: Some(pb::WithdrawalPayload {
            source_account: account.to_owned(),
            asset: "ETH".into(),
            network: "anvil".into(),
            destination: random_destination(),
            memo: None,
            amount: "100".into(),
            fee_cap: "1000000000000000".into(),
            policy_version: 1,
        }),
    }
}

async fn channels(endpoint: &str, n: usize) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(Channel::from_shared(endpoint.to_owned())?.connect().await?);
    }
    Ok(out)
}

/// `c` workers creating new withdrawals for `duration`; returns the summary and the requests made.
async fn creates(
    endpoint: &str,
    token: &Arc<str>,
    c: usize,
    accounts: usize,
    duration: Duration,
) -> anyhow::Result<(Summary, Vec<pb::CreateWithdrawalRequest>)> {
    let chans = channels(endpoint, c.min(16)).await?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..c {
        let mut client = OperationsServiceClient::new(chans[i % chans.len()].clone());
        let token = token.clone();
        let account = account_name(i % accounts);
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors, mut made) = (Vec::new(), 0_usize, Vec::new());
            while start.elapsed() < duration {
                let req = request(uuid::Uuid::new_v4().to_string(), &account);
                let t = Instant::now();
                match client.create_withdrawal(authed(&token, req.clone())).await {
                    Ok(_) => {
                        lat.push(t.elapsed());
                        made.push(req);
                    }
                    Err(_) => errors += 1,
                }
            }
            (lat, errors, made)
        }));
    }
    let (mut all, mut errors, mut made) = (Vec::new(), 0, Vec::new());
    for task in tasks {
        let (lat, e, m) = task.await?;
        all.extend(lat);
        errors += e;
        made.extend(m);
    }
    Ok((summarize(all, errors, start.elapsed()), made))
}

/// `c` workers replaying already-created requests for `duration`.
async fn replays(
    endpoint: &str,
    token: &Arc<str>,
    c: usize,
    duration: Duration,
    made: Arc<Vec<pb::CreateWithdrawalRequest>>,
) -> anyhow::Result<Summary> {
    anyhow::ensure!(!made.is_empty(), "no created withdrawals to replay");
    let chans = channels(endpoint, c.min(16)).await?;
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..c {
        let mut client = OperationsServiceClient::new(chans[i % chans.len()].clone());
        let (token, made) = (token.clone(), made.clone());
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors, mut n) = (Vec::new(), 0_usize, i);
            while start.elapsed() < duration {
                let req = made[n % made.len()].clone();
                n += c;
                let t = Instant::now();
                match client.create_withdrawal(authed(&token, req)).await {
                    Ok(r) if r.get_ref().replayed => lat.push(t.elapsed()),
                    _ => errors += 1,
                }
            }
            (lat, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    for task in tasks {
        let (lat, e) = task.await?;
        all.extend(lat);
        errors += e;
    }
    Ok(summarize(all, errors, start.elapsed()))
}
