//! Options and fixed settings of the sign benchmark, shared by the run and its parts.

/// Options of `opledger-bench sign`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Superuser URL of a PostgreSQL cluster (the bench creates its own database in it).
    #[arg(long, env = "OPLEDGER_BENCH_ADMIN_URL", hide_env_values = true)]
    pub(super) admin_url: String,
    /// Approved withdrawals signed in each measured phase.
    #[arg(long, default_value_t = 2000)]
    pub(super) withdrawals: usize,
    /// Concurrent callers of `sign_withdrawal` in each phase.
    #[arg(long, default_value_t = 16)]
    pub(super) workers: usize,
    /// Sender addresses of each phase (one tenant and hot wallet each; withdrawals round-robin).
    #[arg(long, value_delimiter = ',', default_values_t = [1_usize, 8])]
    pub(super) senders: Vec<usize>,
    /// Pooled connections of the signer's store (the signer's default when omitted).
    #[arg(long)]
    pub(super) db_connections: Option<u32>,
    /// Seconds each `evm::sign` baseline runs.
    #[arg(long, default_value_t = 3)]
    pub(super) baseline_seconds: u64,
    /// Where the hot wallets' keys are: `keystore` (in the signer's memory) or `pkcs11` (generated
    /// in a SoftHSM2 token of the run's own: needs SOFTHSM2_CONF and OPLEDGER_PKCS11_MODULE, which
    /// scripts/bench.sh sets).
    #[arg(long, value_enum, default_value_t = Backend::Keystore)]
    pub(super) backend: Backend,
}

/// Where the benchmark's hot-wallet keys are held.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// In the signer's memory (a keystore's key).
    Keystore,
    /// In a PKCS#11 token (SoftHSM2), one session per wallet.
    Pkcs11,
}

impl Args {
    /// Refuses options the benchmark cannot run with.
    pub(super) fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.withdrawals >= 1, "--withdrawals must be at least 1");
        anyhow::ensure!(self.workers >= 1, "--workers must be at least 1");
        anyhow::ensure!(
            !self.senders.is_empty() && self.senders.iter().all(|&n| n >= 1),
            "--senders must name counts of at least 1"
        );
        Ok(())
    }
}

pub(super) const DB: &str = "opledger_bench_sign";
pub(super) const SIGNER_USER: &str = "opledger_bench_signer";
pub(super) const SIGNER_PASSWORD: &str = "opledger-bench-signer";
pub(super) const NETWORK: &str = "anvil";
/// Withdrawals signed before the measured phases (own tenant and wallet, not reported).
pub(super) const WARMUP: usize = 100;
/// Source accounts per tenant the preparation spreads its holds over.
pub(super) const ACCOUNTS: usize = 4;
/// Concurrent tasks preparing withdrawals.
pub(super) const PREPARE_TASKS: usize = 16;
/// Threads of the parallel signing baseline.
pub(super) const BASELINE_THREADS: usize = 2;
