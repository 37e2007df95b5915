//! `opledger-bench`: benchmarks against a baseline measured in the same run.
//!
//! `opledger-bench create --admin-url URL` provisions a fresh database, starts the real
//! `opledger-operations` binary (built next to this one), drives `CreateWithdrawal` over gRPC at
//! each concurrency, replays created keys, and runs the very same SQL of the create transaction
//! (the store's own statement texts) through `pgbench` as the ceiling. It prints creates/s,
//! p50/p99 latency, the ratio to the ceiling and the machine it ran on.
//!
//! `opledger-bench sign --admin-url URL` provisions a fresh database, prepares approved
//! withdrawals and drives the real signer library in-process (under a login role in
//! `opledger_signer`, as in production) for one sender address and for eight. It prints
//! signatures persisted per second, p50/p99 latency, the share of call time spent signing versus
//! in the database, and the ratio to `evm::sign` alone measured in the same run, and verifies the
//! attempts and nonces in SQL after each phase.
//!
//! `opledger-bench pipeline --admin-url URL --anvil-bin PATH` runs operations, approvals, the
//! signer and the broadcaster (worker and chain watcher) in-process against an anvil node mining a
//! block every second, creates and approves withdrawals over gRPC for one sender address and for
//! eight, and prints confirmed withdrawals per second, create -> CONFIRMED latency, CPU seconds
//! per 1,000 withdrawals (services, PostgreSQL, anvil) and the ratio to the node's own
//! `eth_sendRawTransaction` rate measured in the same run; every phase is verified in SQL and on
//! chain.

mod create;
mod database;
mod pgbench;
mod pipeline;
mod report;
mod sign;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "opledger-bench")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// CreateWithdrawal over gRPC versus the raw SQL of the same transaction through pgbench.
    Create(create::Args),
    /// Signatures persisted per second by the real signer versus evm::sign alone.
    Sign(sign::Args),
    /// Create -> CONFIRMED through every service on anvil versus the node's raw submission rate.
    Pipeline(pipeline::Args),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Create(args) => create::run(args).await,
        Command::Sign(args) => sign::run(args).await,
        Command::Pipeline(args) => pipeline::run(args).await,
    }
}
