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
//!
//! `opledger-bench webhook --admin-url URL` starts the real `opledger-inbox` binary (built next to
//! this one) with one HMAC endpoint, posts signed `deposit.confirmed` deliveries over HTTP/1.1
//! keep-alive connections at each concurrency (signature check, inbox row and work item committed
//! before each 200; the processor applies them concurrently), and runs the raw SQL of the same
//! transaction through `pgbench` as the ceiling. It prints webhooks/s, p50/p99 latency, the ratio,
//! CPU seconds per 1,000 by process and the machine, and verifies the rows in SQL after each phase.

mod create;
mod database;
mod pgbench;
mod pipeline;
mod report;
mod sign;
mod trust;
mod verify;
mod webhook;

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
    /// Verified webhooks ingested per second over HTTP/1.1 versus the same SQL through pgbench.
    Webhook(webhook::Args),
    /// The signer's approval verification per withdrawal versus recomputing the payload hash.
    Verify(verify::Args),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // reqwest's TLS (compiled in for the chain crate's https:// nodes) needs a rustls provider
    // before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match Cli::parse().command {
        Command::Create(args) => create::run(args).await,
        Command::Sign(args) => sign::run(args).await,
        Command::Pipeline(args) => pipeline::run(args).await,
        Command::Webhook(args) => webhook::run(args).await,
        Command::Verify(args) => verify::run(args).await,
    }
}
