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
use crate::report::Summary;
use anyhow::Context;
use opledger_domain::ids::TenantId;
use opledger_inbox::keys::KeyRing;
use opledger_store::Store;
use opledger_webhook::seal::BodyKey;
use opledger_webhook::secret::SigningSecret;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use zeroize::Zeroizing;

mod checks;
mod cpu;
mod load;
mod options;
mod report;
mod script;
mod service;

use checks::{check_rows, per_commit, processed};
use cpu::{Cpu, Used};
use load::{Deliveries, Load, load};
use options::{
    APP_PASSWORD, APP_USER, BODY_LEN, DB, EVENT_TYPES, MAX_ERROR_RATE, MAX_POOL, PGBENCH_SOURCE,
    SOURCE, WARM_UP,
};
use report::Row;
use service::{Ports, Service};

pub use options::Args;

pub async fn run(args: Args) -> anyhow::Result<()> {
    args.validate()?;
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
    let (endpoint_id, body_keys, secret) = endpoint(&store, tenant).await?;

    let dir = std::env::temp_dir().join(format!("opledger-bench-webhook-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let bench_url = database::database_url(&args.admin_url, DB)?;
    let script = script::record_delivery_script(&endpoint_id, BODY_LEN)?;
    let cpu = Cpu::new(&owner).await;
    let deliveries = Arc::new(Deliveries::new(&secret));
    let duration = Duration::from_secs(args.seconds);
    let bench = Bench {
        owner,
        app_url,
        body_keys,
        endpoint_id,
        tenant,
        bench_url,
        script,
        dir,
        cpu,
        deliveries,
        duration,
        processors: args.processors,
    };

    let mut rows = Vec::new();
    let mut totals = Totals::default();
    for &c in &args.concurrency {
        rows.push(bench.concurrency(c, &mut totals).await?);
    }
    std::fs::remove_dir_all(&bench.dir).ok();
    report::print(&args, &rows);

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

/// One HMAC endpoint, its secret sealed with the bench's body key as the service will open it:
/// the endpoint's id, the body keys as the service's configuration string, and the secret.
async fn endpoint(
    store: &Store,
    tenant: TenantId,
) -> anyhow::Result<(String, Zeroizing<String>, SigningSecret)> {
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
    Ok((endpoint_id, body_keys, secret))
}

/// Everything a concurrency's phases need.
struct Bench {
    owner: PgPool,
    /// URL of the service's login role.
    app_url: String,
    /// The service's body keys (configuration string).
    body_keys: Zeroizing<String>,
    endpoint_id: String,
    tenant: TenantId,
    /// pgbench's URL of the bench database.
    bench_url: String,
    /// pgbench's script of one delivery.
    script: String,
    /// pgbench's working directory.
    dir: PathBuf,
    cpu: Cpu,
    deliveries: Arc<Deliveries>,
    /// How long each measured phase runs.
    duration: Duration,
    /// Processor workers of the service.
    processors: usize,
}

/// Rows expected so far, over every concurrency (warm-ups included).
#[derive(Debug, Default)]
struct Totals {
    /// Deliveries the service accepted.
    accepted: usize,
    /// Requests to the service that failed (their transaction may have committed).
    errors: usize,
    /// pgbench's transactions.
    pgbench: usize,
}

/// What one phase against the service measured.
struct ServicePhase {
    warm: Load,
    measured: Load,
    used: Used,
    /// Work items the processor finished during the measured phase.
    applied: i64,
    /// Work items still pending when the phase ended.
    backlog: i64,
    per_commit: f64,
}

impl Bench {
    /// Concurrency `c`: the service (started for it and stopped after), then pgbench with the
    /// machine to itself, the rows of both checked.
    async fn concurrency(&self, c: usize, totals: &mut Totals) -> anyhow::Result<Row> {
        let pool = (c + 4).min(MAX_POOL);
        let ports = Ports::free()?;
        let mut service = Service::spawn(
            &self.app_url,
            &ports,
            self.body_keys.as_str(),
            pool,
            self.processors,
        )?;
        let url = format!(
            "http://127.0.0.1:{}/webhooks/{SOURCE}/{}",
            ports.http, self.endpoint_id
        );
        let phase = self
            .against_service(&mut service, ports.http, &url, c)
            .await;
        service.stop();
        let phase = phase?;
        totals.accepted += phase.warm.summary.count + phase.measured.summary.count;
        totals.errors += phase.warm.summary.errors + phase.measured.summary.errors;
        let app_rows = check_rows(&self.owner, SOURCE, totals.accepted, totals.errors).await?;

        let (ceiling, pg_used) = self.ceiling(c)?;
        totals.pgbench += ceiling.count;
        let pg_rows =
            check_rows(&self.owner, PGBENCH_SOURCE, totals.pgbench, ceiling.errors).await?;
        // Nobody can open these bodies: keep every later processor away from them.
        sqlx::query(
            "UPDATE inbox_work SET status = 'RESOLVED', outcome = 'BENCH_BASELINE', \
               updated_at = now() \
             WHERE status = 'PENDING' AND inbox_id IN \
               (SELECT inbox_id FROM inbox_events WHERE source = $1)",
        )
        .bind(PGBENCH_SOURCE)
        .execute(&self.owner)
        .await?;
        Ok(Row {
            c,
            pool,
            per_commit: phase.per_commit,
            http: phase.measured,
            used: phase.used,
            applied: phase.applied,
            backlog: phase.backlog,
            app_rows,
            ceiling,
            pg_used,
            pg_rows,
        })
    }

    /// `c` clients against the running `service` at `url`: a warm-up, ANALYZE, then the measured
    /// phase with its CPU, the processor's progress and deliveries per commit.
    async fn against_service(
        &self,
        service: &mut Service,
        http: u16,
        url: &str,
        c: usize,
    ) -> anyhow::Result<ServicePhase> {
        let (owner, cpu, deliveries) = (&self.owner, &self.cpu, &self.deliveries);
        service.wait_ready(http).await?;
        let client = reqwest::Client::builder()
            .http1_only()
            .no_proxy()
            .pool_max_idle_per_host(c)
            .timeout(Duration::from_secs(30))
            .build()?;
        let warm = load(&client, url, deliveries, c, WARM_UP).await?;
        // Steady state: planner statistics exist, as on any database autovacuum has seen.
        sqlx::query("ANALYZE").execute(owner).await?;
        let done_before = processed(owner).await?;
        let (started,): (chrono::DateTime<chrono::Utc>,) =
            sqlx::query_as("SELECT clock_timestamp()")
                .fetch_one(owner)
                .await?;
        let before = cpu.sample(Some(service.pid()));
        let measured = load(&client, url, deliveries, c, self.duration).await?;
        let used = before.until(&cpu.sample(Some(service.pid())));
        let done_after = processed(owner).await?;
        let per_commit = per_commit(owner, started).await?;
        Ok(ServicePhase {
            warm,
            measured,
            used,
            applied: done_after.0 - done_before.0,
            backlog: done_after.1,
            per_commit,
        })
    }

    /// The same transaction through pgbench at concurrency `c` (the service stopped): what it
    /// measured and the CPU it used.
    fn ceiling(&self, c: usize) -> anyhow::Result<(Summary, Used)> {
        let before = self.cpu.sample(None);
        let ceiling = pgbench::run_script(
            &self.bench_url,
            "webhook",
            &self.script,
            &[("tenant", &self.tenant.to_string())],
            c,
            self.duration,
            &self.dir,
        )?;
        let pg_used = before.until(&self.cpu.sample(None));
        Ok((ceiling, pg_used))
    }
}
