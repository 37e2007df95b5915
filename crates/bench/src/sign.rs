//! The sign benchmark: signatures persisted per second by the real signer (the library in-process,
//! connected under its restricted database role), for one sender and for several, versus
//! `evm::sign` alone as the CPU ceiling of signing.

use crate::database::{self, BenchDatabase, LoginRole};
use crate::report::{Summary, machine, ms, summarize};
use alloy_primitives::{Address, U256};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_evm::signer::{self as evm, LocalKey};
use opledger_evm::tx::{TransferKind, TransferRequest};
use opledger_signer::config::{Config, NetworkConfig};
use opledger_signer::{Signer, Wallets};
use opledger_store::{Store, StoreConfig};
use sqlx::postgres::PgConnectOptions;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod setup;

use setup::*;

/// Options of `opledger-bench sign`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Superuser URL of a PostgreSQL cluster (the bench creates its own database in it).
    #[arg(long, env = "OPLEDGER_BENCH_ADMIN_URL", hide_env_values = true)]
    admin_url: String,
    /// Approved withdrawals signed in each measured phase.
    #[arg(long, default_value_t = 2000)]
    withdrawals: usize,
    /// Concurrent callers of `sign_withdrawal` in each phase.
    #[arg(long, default_value_t = 16)]
    workers: usize,
    /// Sender addresses of each phase (one tenant and hot wallet each; withdrawals round-robin).
    #[arg(long, value_delimiter = ',', default_values_t = [1_usize, 8])]
    senders: Vec<usize>,
    /// Pooled connections of the signer's store (the signer's default when omitted).
    #[arg(long)]
    db_connections: Option<u32>,
    /// Seconds each `evm::sign` baseline runs.
    #[arg(long, default_value_t = 3)]
    baseline_seconds: u64,
}

const DB: &str = "opledger_bench_sign";
const SIGNER_USER: &str = "opledger_bench_signer";
const SIGNER_PASSWORD: &str = "opledger-bench-signer";
const NETWORK: &str = "anvil";
/// Withdrawals signed before the measured phases (own tenant and wallet, not reported).
const WARMUP: usize = 100;
/// Source accounts per tenant the preparation spreads its holds over.
const ACCOUNTS: usize = 4;
/// Concurrent tasks preparing withdrawals.
const PREPARE_TASKS: usize = 16;
/// Threads of the parallel signing baseline.
const BASELINE_THREADS: usize = 2;

/// One sender: a tenant with its hot wallet on the bench network.
#[derive(Debug, Clone)]
struct Sender {
    tenant: TenantId,
    client_key_id: String,
    approver_key_id: String,
    /// The tenant's published trust statement and approver key.
    trust: crate::trust::TenantTrust,
    address: String,
}

/// One measured phase: its senders and the approved withdrawals it signs.
#[derive(Debug)]
struct Phase {
    label: String,
    senders: Vec<Sender>,
    work: Vec<(TenantId, OperationId)>,
}

/// What a phase measured.
#[derive(Debug)]
struct Measured {
    summary: Summary,
    /// Sum of the latencies of the successful calls.
    busy: Duration,
    first_error: Option<String>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.withdrawals >= 1, "--withdrawals must be at least 1");
    anyhow::ensure!(args.workers >= 1, "--workers must be at least 1");
    anyhow::ensure!(
        !args.senders.is_empty() && args.senders.iter().all(|&n| n >= 1),
        "--senders must name counts of at least 1"
    );
    let started = Instant::now();
    let admin = PgConnectOptions::from_str(&args.admin_url)?;
    // Like production: a login role in opledger_signer only (no other service role), so the column
    // grants and the trigger guarding the signer's moves apply to every call.
    let role = LoginRole {
        user: SIGNER_USER,
        password: SIGNER_PASSWORD,
        group: "opledger_signer",
    };
    let BenchDatabase {
        owner,
        role_url: signer_url,
    } = database::fresh(&admin, DB, PREPARE_TASKS as u32, role).await?;
    // Setup runs as the superuser; only the signer below uses the restricted role.
    let setup = Store::from_pool(owner.clone(), StoreConfig::default());

    let network = network();
    let mut wallets = Wallets::default();
    let warmup_sender = new_sender(&setup, &mut wallets, "bench-sign-warmup").await?;
    let mut phases = Vec::new();
    for (p, &n) in args.senders.iter().enumerate() {
        let mut senders = Vec::new();
        for i in 0..n {
            senders.push(new_sender(&setup, &mut wallets, &format!("bench-sign-{p}-{i}")).await?);
        }
        let label = if n == 1 {
            "1 sender".to_owned()
        } else {
            format!("{n} senders")
        };
        phases.push(Phase {
            label,
            senders,
            work: Vec::new(),
        });
    }

    let prepare_start = Instant::now();
    let warmup_work = prepare(&setup, std::slice::from_ref(&warmup_sender), WARMUP).await?;
    for phase in &mut phases {
        phase.work = prepare(&setup, &phase.senders, args.withdrawals).await?;
    }
    let prepared = prepare_start.elapsed();
    // Statistics after the bulk load, as autovacuum would provide on any database in use.
    sqlx::query("ANALYZE").execute(&owner).await?;

    let trust_roots = std::iter::once(&warmup_sender)
        .chain(phases.iter().flat_map(|p| p.senders.iter()))
        .map(|s| s.trust.root())
        .collect();
    let mut config = Config {
        instance_id: "bench-signer".into(),
        networks: BTreeMap::from([(NETWORK.to_owned(), network.clone())]),
        trust_roots,
        ..Config::default()
    };
    if let Some(n) = args.db_connections {
        config.db_max_connections = n;
    }
    let pool_size = config.db_max_connections;
    let store = Store::connect(&signer_url, config.store_config())
        .await
        .map_err(|e| anyhow::anyhow!("the signer role cannot connect: {}", e.log_safe()))?;
    let signer = Signer::new(store, Arc::new(config), Arc::new(wallets));
    // Originals come only from registered ACTIVE wallets (migration 24), as in the service.
    signer
        .register_wallets()
        .await
        .map_err(|e| anyhow::anyhow!("cannot register the wallets: {e}"))?;

    // The CPU ceiling of signing alone, measured while the database is idle.
    let baseline_for = Duration::from_secs(args.baseline_seconds);
    let net = network.clone();
    let (single, parallel) = tokio::task::spawn_blocking(move || {
        Ok::<_, anyhow::Error>((
            baseline(&net, 1, baseline_for)?,
            baseline(&net, BASELINE_THREADS, baseline_for)?,
        ))
    })
    .await??;
    let per_signature = single.1.as_secs_f64() / single.0 as f64;
    let single_rate = single.0 as f64 / single.1.as_secs_f64();
    let parallel_rate = parallel.0 as f64 / parallel.1.as_secs_f64();

    // Warm-up: pooled connections, prepared statements, the first nonce rows.
    let warm = sign_all(&signer, warmup_work, args.workers).await?;
    check_errors("warm-up", &warm)?;
    verify(
        &owner,
        "warm-up",
        std::slice::from_ref(&warmup_sender),
        WARMUP,
    )
    .await?;

    let mut rows = Vec::new();
    for phase in phases {
        let measured = sign_all(&signer, phase.work, args.workers).await?;
        check_errors(&phase.label, &measured)?;
        verify(&owner, &phase.label, &phase.senders, args.withdrawals).await?;
        rows.push((phase.label, phase.senders.len(), measured));
    }

    println!(
        "opledger-bench sign: signatures persisted per second by the real signer vs evm::sign alone"
    );
    println!("machine: {}", machine());
    println!(
        "setup: opledger-signer in-process as a login role in opledger_signer, pool {pool_size} \
         connections; PostgreSQL (fsync on) on this machine; {} approved withdrawals per phase \
         (native ETH, random destinations), prepared in {:.1} s, then ANALYZE; {WARMUP} warm-up \
         signatures on their own wallet",
        args.withdrawals,
        prepared.as_secs_f64()
    );
    println!(
        "| phase | senders | workers | signatures | signatures/s | p50 ms | p99 ms | errors | signing share | database share | ratio to baseline |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (label, senders, m) in &rows {
        let s = &m.summary;
        let signing = if m.busy.is_zero() {
            0.0
        } else {
            (s.count as f64 * per_signature / m.busy.as_secs_f64()).min(1.0)
        };
        println!(
            "| {label} | {senders} | {} | {} | {:.0} | {} | {} | {} | {:.1}% | {:.1}% | {:.3} |",
            args.workers,
            s.count,
            s.per_sec,
            ms(s.p50),
            ms(s.p99),
            s.errors,
            signing * 100.0,
            (1.0 - signing) * 100.0,
            s.per_sec / single_rate
        );
    }
    println!(
        "baseline evm::sign, 1 thread: {} in {:.1} s, {single_rate:.0}/s, {:.1} µs per signature",
        single.0,
        single.1.as_secs_f64(),
        per_signature * 1e6
    );
    println!(
        "baseline evm::sign, {BASELINE_THREADS} threads: {} in {:.1} s, {parallel_rate:.0}/s, \
         {:.2}x the 1-thread rate",
        parallel.0,
        parallel.1.as_secs_f64(),
        parallel_rate / single_rate
    );
    println!(
        "method: signing share = signatures x the 1-thread baseline time per signature / the sum \
         of sign_withdrawal latencies; database share = 1 - signing share (round trips, commits, \
         waits for a pooled connection and for the sender's nonce row lock, other CPU); ratio = \
         signatures/s / the 1-thread baseline rate"
    );
    println!(
        "verified after each phase (SQL): one ORIGINAL tx_attempts row per withdrawal, nonces \
         0..n-1 per sender without gaps or duplicates and matching signer_nonces, every \
         operation SIGNED"
    );
    println!("total run: {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `evm::sign` of native transfers shaped like the signer's, on `threads` threads for `duration`:
/// signatures made and the time taken.
fn baseline(
    network: &NetworkConfig,
    threads: usize,
    duration: Duration,
) -> anyhow::Result<(usize, Duration)> {
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
    let keys = (0..threads)
        .map(|_| LocalKey::from_secret_bytes(random_secret()))
        .collect::<Result<Vec<_>, _>>()?;
    let requests: Vec<TransferRequest> = (0..256)
        .map(|_| TransferRequest {
            to: random_address(),
            ..template.clone()
        })
        .collect();
    let start = Instant::now();
    let counts = std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .iter()
            .map(|key| {
                let requests = &requests;
                scope.spawn(move || {
                    let mut n = 0_usize;
                    while start.elapsed() < duration {
                        let request = TransferRequest {
                            nonce: n as u64,
                            ..requests[n % requests.len()].clone()
                        };
                        std::hint::black_box(evm::sign(&request, key)?);
                        n += 1;
                    }
                    Ok::<_, evm::SignError>(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a baseline thread panicked"))?
                    .map_err(anyhow::Error::from)
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    Ok((counts.iter().sum(), start.elapsed()))
}

/// `workers` concurrent callers of `sign_withdrawal` over `work` until every withdrawal was tried
/// once. A call that answers with an attempt it did not sign itself counts as an error.
async fn sign_all(
    signer: &Signer,
    work: Vec<(TenantId, OperationId)>,
    workers: usize,
) -> anyhow::Result<Measured> {
    let work = Arc::new(work);
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (signer, work, next) = (signer.clone(), work.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors, mut first_error) = (Vec::new(), 0_usize, None);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(tenant, op)) = work.get(i) else {
                    break;
                };
                let t = Instant::now();
                match signer.sign_withdrawal(tenant, op).await {
                    Ok(signed) if !signed.already_signed => lat.push(t.elapsed()),
                    Ok(_) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| "already signed".to_owned());
                    }
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| signer_err(&e));
                    }
                }
            }
            (lat, errors, first_error)
        }));
    }
    let (mut all, mut errors, mut first_error) = (Vec::new(), 0, None);
    for task in tasks {
        let (lat, e, first) = task.await?;
        all.extend(lat);
        errors += e;
        first_error = first_error.or(first);
    }
    let elapsed = start.elapsed();
    let busy = all.iter().sum();
    Ok(Measured {
        summary: summarize(all, errors, elapsed),
        busy,
        first_error,
    })
}

fn check_errors(label: &str, m: &Measured) -> anyhow::Result<()> {
    anyhow::ensure!(
        m.summary.errors == 0,
        "{label}: {} of {} sign_withdrawal calls failed (first: {})",
        m.summary.errors,
        m.summary.errors + m.summary.count,
        m.first_error.as_deref().unwrap_or("-")
    );
    Ok(())
}

/// Checks in SQL what the phase must have left: one attempt per withdrawal, gapless nonces per
/// sender from 0 matching the nonce counter, every operation SIGNED.
async fn verify(
    db: &sqlx::PgPool,
    label: &str,
    senders: &[Sender],
    withdrawals: usize,
) -> anyhow::Result<()> {
    let tenants: Vec<uuid::Uuid> = senders.iter().map(|s| s.tenant.as_uuid()).collect();
    let n = i64::try_from(withdrawals)?;

    let (ops, with_one): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE a.attempts = 1) \
         FROM withdrawal_ops o \
         LEFT JOIN (SELECT tenant_id, op_id, count(*) AS attempts FROM tx_attempts \
                    GROUP BY tenant_id, op_id) a USING (tenant_id, op_id) \
         WHERE o.tenant_id = ANY($1)",
    )
    .bind(&tenants)
    .fetch_one(db)
    .await?;
    anyhow::ensure!(
        ops == n && with_one == n,
        "{label}: {with_one} of {ops} withdrawals have exactly one tx_attempts row, expected {n}"
    );

    let per_sender: Vec<(String, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT a.sender, count(*), min(a.nonce), max(a.nonce), count(DISTINCT a.nonce), \
           max(s.next_nonce) \
         FROM tx_attempts a JOIN signer_nonces s ON s.network = a.network AND s.sender = a.sender \
         WHERE a.tenant_id = ANY($1) AND a.kind = 'ORIGINAL' GROUP BY a.sender ORDER BY a.sender",
    )
    .bind(&tenants)
    .fetch_all(db)
    .await?;
    let mut expected: Vec<&str> = senders.iter().map(|s| s.address.as_str()).collect();
    expected.sort_unstable();
    let found: Vec<&str> = per_sender.iter().map(|r| r.0.as_str()).collect();
    anyhow::ensure!(
        found == expected,
        "{label}: attempts came from {} senders, expected the phase's {}",
        found.len(),
        expected.len()
    );
    let mut total = 0;
    for (sender, count, min, max, distinct, next) in &per_sender {
        anyhow::ensure!(
            *min == 0 && *max == count - 1 && distinct == count && next == count,
            "{label}: sender {sender} has {count} attempts with nonces {min}..={max}, \
             {distinct} distinct, next_nonce {next}"
        );
        total += count;
    }
    anyhow::ensure!(
        total == n,
        "{label}: {total} original attempts, expected {n}"
    );

    let states: Vec<(String, i64)> = sqlx::query_as(
        "SELECT state, count(*) FROM withdrawal_ops WHERE tenant_id = ANY($1) GROUP BY state",
    )
    .bind(&tenants)
    .fetch_all(db)
    .await?;
    anyhow::ensure!(
        states == [("SIGNED".to_owned(), n)],
        "{label}: operation states {states:?}, expected all {n} SIGNED"
    );
    Ok(())
}
