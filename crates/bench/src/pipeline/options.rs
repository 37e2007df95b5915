//! Options and fixed settings of the pipeline benchmark: its command line, its database roles,
//! the network id and the targets it reports against.

use crate::database::LoginRole;
use std::path::PathBuf;

/// Options of `opledger-bench pipeline`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Superuser URL of a PostgreSQL cluster (the bench creates its own database in it).
    #[arg(long, env = "OPLEDGER_BENCH_ADMIN_URL", hide_env_values = true)]
    pub(super) admin_url: String,
    /// The anvil binary (`scripts/anvil.sh install` prints its path).
    #[arg(long, env = "OPLEDGER_ANVIL_BIN")]
    pub(super) anvil_bin: PathBuf,
    /// Withdrawals in each measured phase (and pre-signed transfers of the node baseline).
    #[arg(long, default_value_t = 1000)]
    pub(super) withdrawals: usize,
    /// Sender addresses of each phase (one tenant and hot wallet each; withdrawals round-robin).
    #[arg(long, value_delimiter = ',', default_values_t = [1_usize, 8])]
    pub(super) senders: Vec<usize>,
    /// Concurrent clients, each creating a withdrawal and then approving it.
    #[arg(long, default_value_t = 16)]
    pub(super) clients: usize,
    /// Offered load in creates per second; 0 sends as fast as the clients go.
    #[arg(long, default_value_t = 0.0)]
    pub(super) rate: f64,
    /// Broadcaster `batch_size`: due operations per poll (the production default).
    #[arg(long, default_value_t = 64)]
    pub(super) batch_size: u32,
    /// Broadcaster `watch_batch_size`: BROADCAST operations the watcher examines per new head
    /// (the production default).
    #[arg(long, default_value_t = 2000)]
    pub(super) watch_batch_size: u32,
    /// Broadcaster `concurrency` (operations signed and submitted at once).
    #[arg(long, default_value_t = 16)]
    pub(super) concurrency: usize,
    /// Pooled database connections of the signer.
    #[arg(long, default_value_t = 8)]
    pub(super) signer_connections: u32,
    /// Seconds between anvil's blocks.
    #[arg(long, default_value_t = 1)]
    pub(super) block_time: u64,
    /// Concurrent submitters of the node baseline.
    #[arg(long, default_value_t = 4)]
    pub(super) baseline_concurrency: usize,
    /// Seconds a phase may take before it is given up (and fails verification).
    #[arg(long, default_value_t = 120)]
    pub(super) phase_timeout: u64,
    /// Evidence endpoints of the watcher, the reconciler and the witness: this many JSON-RPC
    /// proxies in front of the one node, all of which must agree (the quorum is this number). 1
    /// reads the node directly.
    #[arg(long, default_value_t = 1)]
    pub(super) evidence_endpoints: usize,
    /// Broadcaster, reconciler and witness instances of each phase, against the one database:
    /// every sender count is measured once per value, in this order (`1,2` alternates one and
    /// two).
    #[arg(long, value_delimiter = ',', default_values_t = [1_usize])]
    pub(super) instances: Vec<usize>,
    /// Submit straight to the node instead of through the proxy that counts each signed
    /// transaction's `eth_sendRawTransaction` calls: that proxy is one more HTTP hop inside every
    /// broadcaster pass, which a baseline without it does not pay. Sends beyond the first and
    /// attempts never sent are then not measured (printed as n/a); every other duplicate is.
    /// Refused with `--instances` above 1.
    #[arg(long)]
    pub(super) no_send_counter: bool,
}

impl Args {
    /// Refuses options the benchmark cannot run with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.withdrawals >= 1, "--withdrawals must be at least 1");
        anyhow::ensure!(self.clients >= 1, "--clients must be at least 1");
        // Two replicas sending one signed transaction twice is what `--instances` is there to
        // catch, and only the counting proxy sees it.
        anyhow::ensure!(
            !self.no_send_counter || self.instances.iter().all(|&n| n <= 1),
            "--no-send-counter cannot be combined with more than one instance: \
             repeated sends between replicas would go uncounted"
        );
        anyhow::ensure!(
            self.batch_size >= 1 && self.watch_batch_size >= 1 && self.concurrency >= 1,
            "--batch-size, --watch-batch-size and --concurrency must be at least 1"
        );
        anyhow::ensure!(self.rate >= 0.0, "--rate must not be negative");
        anyhow::ensure!(self.block_time >= 1, "--block-time must be at least 1");
        anyhow::ensure!(
            !self.senders.is_empty() && self.senders.iter().all(|&n| n >= 1),
            "--senders must name counts of at least 1"
        );
        anyhow::ensure!(
            !self.instances.is_empty() && self.instances.iter().all(|&n| (1..=8).contains(&n)),
            "--instances must name counts from 1 to 8"
        );
        Ok(())
    }
}

pub(super) const DB: &str = "opledger_bench_pipeline";
/// The services' login roles, each a member of its own service's group role only.
const fn login(user: &'static str, group: &'static str) -> LoginRole<'static> {
    LoginRole {
        user,
        password: user,
        group,
    }
}
pub(super) const OPERATIONS: LoginRole<'static> =
    login("opledger_bench_operations", "opledger_operations");
pub(super) const APPROVALS: LoginRole<'static> =
    login("opledger_bench_approvals", "opledger_approvals");
pub(super) const SIGNER: LoginRole<'static> = login("opledger_bench_signer", "opledger_signer");
pub(super) const BROADCASTER: LoginRole<'static> =
    login("opledger_bench_broadcaster", "opledger_broadcaster");
pub(super) const RECONCILER: LoginRole<'static> =
    login("opledger_bench_reconciler", "opledger_reconciler");
pub(super) const WITNESS: LoginRole<'static> = login("opledger_bench_witness", "opledger_witness");
/// The network id of the anvil node in payloads, the signer and the broadcaster.
pub(super) const NETWORK: &str = "anvil";
/// Withdrawals of the unreported warm-up phase (own tenant and hot wallet).
pub(super) const WARMUP: usize = 100;
/// ETH each hot wallet gets from anvil's first dev account (in wei: 10 ETH).
pub(super) const FUNDING_WEI: u128 = 10_000_000_000_000_000_000;
/// gRPC connections of the clients to each service.
pub(super) const CHANNELS: usize = 4;
/// Targets the results are reported against.
pub(super) const TARGET_PER_SEC: f64 = 300.0;
pub(super) const TARGET_P50_SECS: f64 = 3.0;
pub(super) const TARGET_CPU_PER_1000: f64 = 5.0;
