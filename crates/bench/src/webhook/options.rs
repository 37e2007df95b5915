//! Options and fixed settings of the webhook benchmark: its command line, its database role,
//! the endpoint's labels and the limits a run is held to.

use std::time::Duration;

/// Options of `opledger-bench webhook`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Superuser URL of a PostgreSQL cluster (the bench creates its own database in it).
    #[arg(long, env = "OPLEDGER_BENCH_ADMIN_URL", hide_env_values = true)]
    pub(super) admin_url: String,
    /// Seconds each measured phase runs (after a 2 s warm-up).
    #[arg(long, default_value_t = 15)]
    pub(super) seconds: u64,
    /// Concurrencies to measure (HTTP/1.1 connections, one request in flight on each).
    #[arg(long, value_delimiter = ',', default_values_t = [16_usize, 64])]
    pub(super) concurrency: Vec<usize>,
    /// Processor workers inside the measured inbox: 0 (default) measures an ingress-only
    /// instance, the deployment where ingress and processing scale separately; 2 measures the
    /// all-in-one default, whose processor competes for the same two cores.
    #[arg(long, default_value_t = 0)]
    pub(super) processors: usize,
}

impl Args {
    /// Refuses options the benchmark cannot run with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.concurrency.is_empty() && self.concurrency.iter().all(|&c| c > 0),
            "--concurrency must list positive numbers"
        );
        anyhow::ensure!(self.seconds > 0, "--seconds must be at least 1");
        Ok(())
    }
}

pub(super) const DB: &str = "opledger_bench_webhook";
pub(super) const APP_USER: &str = "opledger_bench_inbox";
pub(super) const APP_PASSWORD: &str = "opledger-bench-inbox";
/// The provider label of the bench endpoint.
pub(super) const SOURCE: &str = "watcher";
/// The label pgbench's rows carry instead (same length, so the same index entries' size).
pub(super) const PGBENCH_SOURCE: &str = "pgbench";
pub(super) const EVENT_TYPES: [&str; 3] = ["deposit.confirmed", "transfer.status", "kyt.result"];
pub(super) const WARM_UP: Duration = Duration::from_secs(2);
/// More failed requests than this share fails the run.
pub(super) const MAX_ERROR_RATE: f64 = 0.001;
/// Deposits spread over this many accounts (the processor credits them).
pub(super) const ACCOUNTS: u64 = 64;
/// The pool the service gets: one connection per client plus the processors' and the
/// retention job's, at most this many (the bench cluster allows 400).
pub(super) const MAX_POOL: usize = 80;
/// The length of every delivery body (see `Deliveries::next`).
pub(super) const BODY_LEN: usize = 215;
