//! The webhook benchmark: signed `deposit.confirmed` deliveries over HTTP/1.1 (keep-alive, on
//! loopback) to the real `opledger-inbox` binary, which checks the signature, seals the body and
//! commits the inbox row with its work item before answering 200; versus the raw SQL of that same
//! transaction through pgbench in the same run.
//!
//! The service runs with its default configuration apart from its addresses, keys, pool size and
//! processor count: `--processors 0` (the default) measures an ingress-only instance, as deployed
//! when ingress and processing scale separately; `--processors 2` the all-in-one default, whose
//! processor applies what the ingress accepts while the load runs. The service is
//! stopped while pgbench runs, so the ceiling has the machine to itself, and pgbench's rows (their
//! own `source`, whose bodies nobody can open) are marked RESOLVED before the next phase so no
//! processor ever claims them.

use crate::database::{self, BenchDatabase, LoginRole};
use crate::pgbench;
use crate::report::{Summary, machine, ms, summarize};
use anyhow::Context;
use opledger_inbox::keys::KeyRing;
use opledger_store::inbox::RECORD_DELIVERY_SQL;
use opledger_webhook::seal::{BodyKey, NONCE_LEN, TAG_LEN};
use opledger_webhook::secret::SigningSecret;
use opledger_webhook::verify::sign_v1;
use rand::RngCore;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Options of `opledger-bench webhook`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Superuser URL of a PostgreSQL cluster (the bench creates its own database in it).
    #[arg(long, env = "OPLEDGER_BENCH_ADMIN_URL", hide_env_values = true)]
    admin_url: String,
    /// Seconds each measured phase runs (after a 2 s warm-up).
    #[arg(long, default_value_t = 15)]
    seconds: u64,
    /// Concurrencies to measure (HTTP/1.1 connections, one request in flight on each).
    #[arg(long, value_delimiter = ',', default_values_t = [16_usize, 64])]
    concurrency: Vec<usize>,
    /// Processor workers inside the measured inbox: 0 (default) measures an ingress-only
    /// instance, the deployment where ingress and processing scale separately; 2 measures the
    /// all-in-one default, whose processor competes for the same two cores.
    #[arg(long, default_value_t = 0)]
    processors: usize,
}

const DB: &str = "opledger_bench_webhook";
const APP_USER: &str = "opledger_bench_inbox";
const APP_PASSWORD: &str = "opledger-bench-inbox";
/// The provider label of the bench endpoint.
const SOURCE: &str = "watcher";
/// The label pgbench's rows carry instead (same length, so the same index entries' size).
const PGBENCH_SOURCE: &str = "pgbench";
const EVENT_TYPES: [&str; 3] = ["deposit.confirmed", "transfer.status", "kyt.result"];
const WARM_UP: Duration = Duration::from_secs(2);
/// More failed requests than this share fails the run.
const MAX_ERROR_RATE: f64 = 0.001;
/// Deposits spread over this many accounts (the processor credits them).
const ACCOUNTS: u64 = 64;
/// The pool the service gets: one connection per client plus the processors' and the
/// retention job's, at most this many (the bench cluster allows 400).
const MAX_POOL: usize = 80;

pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.concurrency.is_empty() && args.concurrency.iter().all(|&c| c > 0),
        "--concurrency must list positive numbers"
    );
    anyhow::ensure!(args.seconds > 0, "--seconds must be at least 1");
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
            group: "opledger_inbox",
        },
    )
    .await?;

    // One HMAC endpoint, its secret sealed with the bench's body key as the service will open it.
    let body_key = BodyKey::generate(1);
    let body_keys = body_key.to_config_string();
    let ring = KeyRing::new(vec![body_key]).context("empty key ring")?;
    let endpoint_id = opledger_store::inbox::new_endpoint_id();
    let (first, secret) = ring
        .new_hmac_secret(&endpoint_id)
        .context("sealing the endpoint secret")?;
    let types: Vec<String> = EVENT_TYPES.iter().map(|t| (*t).to_owned()).collect();
    store
        .create_webhook_endpoint_with_id(&endpoint_id, tenant, SOURCE, &types, &first)
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;

    let dir = std::env::temp_dir().join(format!("opledger-bench-webhook-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let bench_url = database::database_url(&args.admin_url, DB)?;
    let script = record_delivery_script(&endpoint_id, BODY_LEN)?;
    let cpu = Cpu::new(&owner).await;
    let deliveries = Arc::new(Deliveries::new(&secret));
    let duration = Duration::from_secs(args.seconds);

    let mut rows = Vec::new();
    let (mut accepted_total, mut errors_total, mut pgbench_total) = (0_usize, 0_usize, 0_usize);
    for &c in &args.concurrency {
        let pool = (c + 4).min(MAX_POOL);
        let ports = Ports::free()?;
        let mut service =
            Service::spawn(&app_url, &ports, body_keys.as_str(), pool, args.processors)?;
        let url = format!(
            "http://127.0.0.1:{}/webhooks/{SOURCE}/{endpoint_id}",
            ports.http
        );
        let phase = async {
            service.wait_ready(ports.http).await?;
            let client = reqwest::Client::builder()
                .http1_only()
                .no_proxy()
                .pool_max_idle_per_host(c)
                .timeout(Duration::from_secs(30))
                .build()?;
            let warm = load(&client, &url, &deliveries, c, WARM_UP).await?;
            // Steady state: planner statistics exist, as on any database autovacuum has seen.
            sqlx::query("ANALYZE").execute(&owner).await?;
            let done_before = processed(&owner).await?;
            let (started,): (chrono::DateTime<chrono::Utc>,) =
                sqlx::query_as("SELECT clock_timestamp()")
                    .fetch_one(&owner)
                    .await?;
            let before = cpu.sample(Some(service.pid()));
            let measured = load(&client, &url, &deliveries, c, duration).await?;
            let used = before.until(&cpu.sample(Some(service.pid())));
            let done_after = processed(&owner).await?;
            let per_commit = per_commit(&owner, started).await?;
            anyhow::Ok((
                warm,
                measured,
                used,
                done_after.0 - done_before.0,
                done_after.1,
                per_commit,
            ))
        }
        .await;
        service.stop();
        let (warm, measured, used, applied, backlog, per_commit) = phase?;
        accepted_total += warm.summary.count + measured.summary.count;
        errors_total += warm.summary.errors + measured.summary.errors;
        let app_rows = check_rows(&owner, SOURCE, accepted_total, errors_total).await?;

        let before = cpu.sample(None);
        let ceiling = pgbench::run_script(
            &bench_url,
            "webhook",
            &script,
            &[("tenant", &tenant.to_string())],
            c,
            duration,
            &dir,
        )?;
        let pg_used = before.until(&cpu.sample(None));
        pgbench_total += ceiling.count;
        let pg_rows = check_rows(&owner, PGBENCH_SOURCE, pgbench_total, ceiling.errors).await?;
        // Nobody can open these bodies: keep every later processor away from them.
        sqlx::query(
            "UPDATE inbox_work SET status = 'RESOLVED', outcome = 'BENCH_BASELINE', \
               updated_at = now() \
             WHERE status = 'PENDING' AND inbox_id IN \
               (SELECT inbox_id FROM inbox_events WHERE source = $1)",
        )
        .bind(PGBENCH_SOURCE)
        .execute(&owner)
        .await?;
        rows.push(Row {
            c,
            pool,
            per_commit,
            http: measured,
            used,
            applied,
            backlog,
            app_rows,
            ceiling,
            pg_used,
            pg_rows,
        });
    }
    std::fs::remove_dir_all(&dir).ok();
    print(&args, &rows);

    let failed: usize = rows.iter().map(|r| r.http.summary.errors).sum();
    let sent: usize = rows
        .iter()
        .map(|r| r.http.summary.count + r.http.summary.errors)
        .sum();
    anyhow::ensure!(
        (failed as f64) <= MAX_ERROR_RATE * sent as f64,
        "{failed} of {sent} measured requests failed (more than {:.1}%)",
        MAX_ERROR_RATE * 100.0
    );
    Ok(())
}

/// One concurrency's results.
#[derive(Debug)]
struct Row {
    c: usize,
    pool: usize,
    /// Mean deliveries per commit of the service during the measured phase.
    per_commit: f64,
    http: Load,
    used: Used,
    /// Work items the processor finished during the measured phase.
    applied: i64,
    /// Work items still pending when the phase ended.
    backlog: i64,
    app_rows: i64,
    ceiling: Summary,
    pg_used: Used,
    pg_rows: i64,
}

fn print(args: &Args, rows: &[Row]) {
    let concurrency: Vec<String> = args.concurrency.iter().map(usize::to_string).collect();
    println!(
        "opledger-bench webhook: signed deposit.confirmed deliveries over HTTP/1.1 to opledger-inbox \
         vs the same transaction through pgbench"
    );
    println!("machine: {}", machine());
    println!(
        "phase: {} s each after a {} s warm-up; one HMAC endpoint, {BODY_LEN}-byte bodies signed \
         (Standard Webhooks v1) per request, a new event id each; keep-alive connections, one \
         request in flight on each; inbox, PostgreSQL (fsync on), pgbench and the HTTP clients on \
         this machine over loopback",
        args.seconds,
        WARM_UP.as_secs()
    );
    if args.processors == 0 {
        println!(
            "the inbox runs as an ingress-only instance (processors = 0: the work items wait for \
             a processor instance); the service is stopped while pgbench runs"
        );
    } else {
        println!(
            "the inbox runs all-in-one: its processor ({} workers) applies the accepted deposits \
             concurrently; the service is stopped while pgbench runs",
            args.processors
        );
    }
    println!(
        "| concurrency | webhooks | webhooks/s | p50 ms | p99 ms | errors | pgbench tx | pgbench tx/s | pgbench avg ms | pgbench p50 ms | pgbench p99 ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let (s, p) = (&r.http.summary, &r.ceiling);
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {:.2} |",
            r.c,
            s.count,
            s.per_sec,
            ms(s.p50),
            ms(s.p99),
            s.errors,
            p.count,
            p.per_sec,
            ms(p.mean),
            ms(p.p50),
            ms(p.p99),
            s.per_sec / p.per_sec
        );
    }
    println!(
        "CPU seconds per 1,000 (machine: {} cores):",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| concurrency | webhooks: HTTP clients | inbox | PostgreSQL | pgbench tx: pgbench | PostgreSQL |"
    );
    println!("|---|---|---|---|---|---|");
    for r in rows {
        let per_k = |secs: Option<f64>, n: usize| match secs {
            Some(s) if n > 0 => format!("{:.2}", s * 1000.0 / n as f64),
            _ => "n/a".to_owned(),
        };
        let (n, m) = (r.http.summary.count, r.ceiling.count);
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.c,
            per_k(Some(r.used.bench), n),
            per_k(r.used.inbox, n),
            per_k(r.used.postgres, n),
            per_k(Some(r.pg_used.children), m),
            per_k(r.pg_used.postgres, m),
        );
    }
    for r in rows {
        println!(
            "concurrency {}: service pool {} connections; {:.1} deliveries per commit (group \
             commit; pgbench: 1); processor applied {} items during the measured phase ({:.0}/s), \
             {} pending when it ended",
            r.c,
            r.pool,
            r.per_commit,
            r.applied,
            r.applied as f64 / args.seconds as f64,
            r.backlog
        );
        for (kind, n) in &r.http.errors {
            println!("concurrency {}: {n} failed: {kind}", r.c);
        }
    }
    let last = rows.last();
    println!(
        "verified in SQL after each phase: inbox rows = accepted deliveries (warm-up included; \
         {} in all), pgbench rows = its transactions ({} in all), one work item per row",
        last.map_or(0, |r| r.app_rows),
        last.map_or(0, |r| r.pg_rows)
    );
    println!(
        "reproduce: bash scripts/bench.sh webhook --seconds {} --concurrency {} --processors {}",
        args.seconds,
        concurrency.join(","),
        args.processors
    );
}

/// Free loopback ports for the service.
#[derive(Debug)]
struct Ports {
    grpc: u16,
    http: u16,
    metrics: u16,
}

impl Ports {
    fn free() -> anyhow::Result<Ports> {
        // Held together so the three differ; released just before the service binds them.
        let listeners = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .collect::<Result<Vec<_>, _>>()?;
        let port = |i: usize| -> anyhow::Result<u16> { Ok(listeners[i].local_addr()?.port()) };
        Ok(Ports {
            grpc: port(0)?,
            http: port(1)?,
            metrics: port(2)?,
        })
    }
}

/// The `opledger-inbox` child process.
#[derive(Debug)]
struct Service {
    child: std::process::Child,
}

impl Service {
    fn spawn(
        app_url: &str,
        ports: &Ports,
        body_keys: &str,
        pool: usize,
        processors: usize,
    ) -> anyhow::Result<Service> {
        let exe = std::env::current_exe()?;
        let bin = exe.with_file_name("opledger-inbox");
        anyhow::ensure!(
            bin.exists(),
            "{} is missing: cargo build --release -p opledger-inbox -p opledger-bench",
            bin.display()
        );
        let mut command = std::process::Command::new(bin);
        // Only what the bench sets: no configuration file or variable from the caller's shell.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OPLEDGER_INBOX_") {
                command.env_remove(name);
            }
        }
        let child = command
            .env("OPLEDGER_INBOX_DATABASE_URL", app_url)
            .env("OPLEDGER_INBOX_LISTEN", format!("127.0.0.1:{}", ports.grpc))
            .env(
                "OPLEDGER_INBOX_HTTP_LISTEN",
                format!("127.0.0.1:{}", ports.http),
            )
            .env(
                "OPLEDGER_INBOX_METRICS_LISTEN",
                format!("127.0.0.1:{}", ports.metrics),
            )
            .env("OPLEDGER_INBOX_BODY_KEYS", body_keys)
            .env("OPLEDGER_INBOX_DB_MAX_CONNECTIONS", pool.to_string())
            .env("OPLEDGER_INBOX_PROCESSORS", processors.to_string())
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .spawn()?;
        Ok(Service { child })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the ingress accepts connections (the service binds it after connecting to
    /// the database).
    async fn wait_ready(&mut self, http: u16) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("opledger-inbox exited before serving: {status}");
            }
            match tokio::net::TcpStream::connect(("127.0.0.1", http)).await {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(e).context("opledger-inbox did not start listening");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    fn stop(mut self) {
        self.child.kill().ok();
        let _ = self.child.wait();
    }
}

/// The length of every delivery body (see [`Deliveries::next`]).
const BODY_LEN: usize = 215;

/// Distinct, realistic `deposit.confirmed` deliveries, signed when sent.
struct Deliveries {
    secret: SigningSecret,
    /// Random per run, so event and deposit ids never repeat across runs on one database.
    salt: u64,
    next: AtomicU64,
}

/// One request: its `webhook-*` headers and body.
struct Delivery {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

impl Deliveries {
    fn new(secret: &SigningSecret) -> Deliveries {
        Deliveries {
            secret: secret.clone(),
            salt: rand::rng().next_u64(),
            next: AtomicU64::new(0),
        }
    }

    /// The next delivery: a new event id and deposit id (a transaction hash and log index), one
    /// of [`ACCOUNTS`] accounts, signed now.
    fn next(&self) -> Delivery {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("msg_{:016x}{n:016x}", self.salt);
        let amount = 1_000_000 + (n.wrapping_mul(7_919) % 9_000_000);
        let body = format!(
            "{{\"type\":\"deposit.confirmed\",\"timestamp\":\"2026-12-01T12:00:00Z\",\
             \"data\":{{\"deposit_id\":\"0x{:032x}{n:032x}:{:02}\",\"account\":\"customer-{:02}\",\
             \"asset\":\"USDC\",\"amount\":\"{amount}\"}}}}",
            self.salt,
            n % 100,
            n % ACCOUNTS
        );
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        let signature = sign_v1(&self.secret, &id, now, body.as_bytes());
        Delivery {
            id,
            timestamp: now.to_string(),
            signature,
            body,
        }
    }
}

/// One load phase: the accepted deliveries' latencies and what failed, by kind.
#[derive(Debug)]
struct Load {
    summary: Summary,
    errors: BTreeMap<String, usize>,
}

/// `c` clients, each posting one delivery at a time on its keep-alive connection for
/// `duration`. Only a 200 whose body says `accepted` counts; anything else is an error.
async fn load(
    client: &reqwest::Client,
    url: &str,
    deliveries: &Arc<Deliveries>,
    c: usize,
    duration: Duration,
) -> anyhow::Result<Load> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..c {
        let (client, url, deliveries) = (client.clone(), url.to_owned(), deliveries.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors: BTreeMap<String, usize> = BTreeMap::new();
            while start.elapsed() < duration {
                let d = deliveries.next();
                let t = Instant::now();
                let sent = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("webhook-id", d.id)
                    .header("webhook-timestamp", d.timestamp)
                    .header("webhook-signature", d.signature)
                    .body(d.body)
                    .send()
                    .await;
                let kind = match sent {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        match response.bytes().await {
                            Ok(body) if status == 200 && is_accepted(&body) => {
                                latencies.push(t.elapsed());
                                continue;
                            }
                            Ok(body) => format!("HTTP {status} {}", answer_code(&body)),
                            Err(e) => format!("reading the answer: {e}"),
                        }
                    }
                    Err(e) => format!("request: {e}"),
                };
                *errors.entry(kind).or_default() += 1;
            }
            (latencies, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), BTreeMap::new());
    for task in tasks {
        let (latencies, e) = task.await?;
        all.extend(latencies);
        for (kind, n) in e {
            *errors.entry(kind).or_default() += n;
        }
    }
    let failed = errors.values().sum();
    Ok(Load {
        summary: summarize(all, failed, start.elapsed()),
        errors,
    })
}

/// The ingress's `status` code in an answer body.
fn answer_code(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("status")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "(no status)".to_owned())
}

fn is_accepted(body: &[u8]) -> bool {
    answer_code(body) == "accepted"
}

/// Work items of the bench endpoint's events: (finished by the processor, still pending).
async fn processed(owner: &PgPool) -> anyhow::Result<(i64, i64)> {
    Ok(sqlx::query_as(
        "SELECT count(*) FILTER (WHERE w.status = 'DONE'), \
           count(*) FILTER (WHERE w.status = 'PENDING') \
         FROM inbox_work w JOIN inbox_events e USING (inbox_id) WHERE e.source = $1",
    )
    .bind(SOURCE)
    .fetch_one(owner)
    .await?)
}

/// Mean deliveries per commit of the service since `since`: rows of one statement share their
/// transaction's `now()`, so each distinct `received_at` is one commit.
async fn per_commit(owner: &PgPool, since: chrono::DateTime<chrono::Utc>) -> anyhow::Result<f64> {
    let (rows, commits): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT received_at) FROM inbox_events \
         WHERE source = $1 AND received_at >= $2",
    )
    .bind(SOURCE)
    .bind(since)
    .fetch_one(owner)
    .await?;
    Ok(rows as f64 / commits.max(1) as f64)
}

/// Checks the rows of `source`: `expected` events (at most `uncertain` more: failed requests
/// whose transaction may have committed), every one an EVENT with exactly one work item.
async fn check_rows(
    owner: &PgPool,
    source: &str,
    expected: usize,
    uncertain: usize,
) -> anyhow::Result<i64> {
    let (events, work, other): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), count(w.inbox_id), count(*) FILTER (WHERE e.kind <> 'EVENT') \
         FROM inbox_events e LEFT JOIN inbox_work w USING (inbox_id) WHERE e.source = $1",
    )
    .bind(source)
    .fetch_one(owner)
    .await?;
    let expected = i64::try_from(expected)?;
    let uncertain = i64::try_from(uncertain)?;
    anyhow::ensure!(
        (expected..=expected + uncertain).contains(&events),
        "{source}: {events} inbox rows, expected {expected} (+ at most {uncertain})"
    );
    anyhow::ensure!(
        work == events && other == 0,
        "{source}: {events} inbox rows, {work} with a work item, {other} not EVENT"
    );
    Ok(events)
}

/// The pgbench script of one new delivery: `RECORD_DELIVERY_SQL` as one statement (its own
/// transaction), exactly as [`Store::record_delivery`] runs it on the new-event path, with literals of the sizes the
/// ingress binds (36-character event id, 32-byte hash, 24-byte nonce, body + 16-byte tag) and a
/// new event id per transaction.
fn record_delivery_script(endpoint_id: &str, body_len: usize) -> anyhow::Result<String> {
    let mut nonce = [0_u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    let mut ciphertext = vec![0_u8; body_len + TAG_LEN];
    rand::rng().fill_bytes(&mut ciphertext);
    let event_id =
        "('msg_' || lpad(to_hex(:r1::bigint), 16, '0') || lpad(to_hex(:r2::bigint), 16, '0'))";
    let body_hash = "sha256(('b' || :r1::text || ':' || :r2::text)::bytea)";
    let endpoint = format!("'{endpoint_id}'");
    let source = format!("'{PGBENCH_SOURCE}'");
    let nonce = format!("'\\x{}'::bytea", hex::encode(nonce));
    let ciphertext = format!("'\\x{}'::bytea", hex::encode(ciphertext));
    let record = pgbench::substitute(
        RECORD_DELIVERY_SQL,
        &[
            ":tenant::uuid",
            &source,
            event_id,
            &endpoint,
            body_hash,
            "'deposit.confirmed'",
            "'EVENT'",
            "NULL::text",
            "now()",
            "1::smallint",
            &nonce,
            &ciphertext,
            "NULL::uuid",
            // A `v1` (shared-secret) delivery keeps no signature.
            "NULL::bytea",
        ],
    )?;
    Ok(format!(
        "\\set r1 random(1, 4000000000000000000)\n\\set r2 random(1, 4000000000000000000)\n\
         {record};\n"
    ))
}

/// CPU time read from /proc: this process (the HTTP clients), its waited-for children
/// (pgbench), the inbox and the PostgreSQL cluster.
#[derive(Debug, Clone, Copy)]
struct Cpu {
    hz: f64,
    postmaster: Option<u32>,
}

/// CPU seconds at one moment, or used between two.
#[derive(Debug, Clone, Copy)]
struct Used {
    bench: f64,
    children: f64,
    inbox: Option<f64>,
    postgres: Option<f64>,
}

/// (parent pid, own ticks, waited-for children's ticks) of one process.
fn proc_stat(path: &Path) -> Option<(u32, u64, u64)> {
    let text = std::fs::read_to_string(path.join("stat")).ok()?;
    // Field 2 (the command) is in parentheses and may hold spaces: field 3 follows the last ')'.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some((
        u32::try_from(field(4)?).ok()?,
        field(14)? + field(15)?,
        field(16)? + field(17)?,
    ))
}

impl Cpu {
    async fn new(owner: &PgPool) -> Cpu {
        let hz = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|&hz| hz > 0.0)
            .unwrap_or(100.0);
        let backend: Option<(i32,)> = sqlx::query_as("SELECT pg_backend_pid()")
            .fetch_optional(owner)
            .await
            .ok()
            .flatten();
        let postmaster = backend
            .and_then(|(pid,)| proc_stat(&Path::new("/proc").join(pid.to_string())))
            .map(|(ppid, _, _)| ppid)
            .filter(|&ppid| ppid > 1);
        Cpu { hz, postmaster }
    }

    fn sample(&self, inbox: Option<u32>) -> Used {
        let this = proc_stat(Path::new("/proc/self")).unwrap_or((0, 0, 0));
        let ticks = |t: u64| t as f64 / self.hz;
        Used {
            bench: ticks(this.1),
            children: ticks(this.2),
            inbox: inbox
                .and_then(|pid| proc_stat(&Path::new("/proc").join(pid.to_string())))
                .map(|s| ticks(s.1)),
            postgres: self.postmaster.and_then(|pm| self.cluster(pm)),
        }
    }

    /// The postmaster's time and its exited backends', plus every live child's.
    fn cluster(&self, postmaster: u32) -> Option<f64> {
        let (_, own, children) = proc_stat(&Path::new("/proc").join(postmaster.to_string()))?;
        let mut total = own + children;
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let pid = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok());
            if pid.is_none() || pid == Some(postmaster) {
                continue;
            }
            if let Some((ppid, own, children)) = proc_stat(&entry.path())
                && ppid == postmaster
            {
                total += own + children;
            }
        }
        Some(total as f64 / self.hz)
    }
}

impl Used {
    fn until(&self, later: &Used) -> Used {
        let diff = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
        Used {
            bench: later.bench - self.bench,
            children: later.children - self.children,
            inbox: diff(self.inbox, later.inbox),
            postgres: diff(self.postgres, later.postgres),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_delivery_body_has_the_stated_length_and_parses_as_a_deposit() {
        let deliveries = Deliveries::new(&SigningSecret::generate());
        for _ in 0..200 {
            let d = deliveries.next();
            assert_eq!(d.body.len(), BODY_LEN, "{}", d.body);
            assert_eq!(d.id.len(), 36);
            let parsed = opledger_webhook::event::parse(d.body.as_bytes());
            assert!(
                matches!(parsed, Ok(opledger_webhook::event::Parsed::Known(_))),
                "{}",
                d.body
            );
        }
    }

    #[test]
    fn the_script_has_no_unsubstituted_parameter() {
        let script =
            record_delivery_script(&format!("whe_{}", "0".repeat(32)), BODY_LEN).expect("script");
        assert!(!script.contains('$'), "{script}");
        assert!(
            !script.contains("BEGIN;"),
            "one statement is its own transaction"
        );
    }
}
