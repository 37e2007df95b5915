//! `opledger-custodian-sim`: a conformance double of three custodian providers (Fireblocks v1,
//! BitGo, Coinbase Prime) over HTTP, executing real transfers on a local chain from its own hot
//! wallet, with a seeded, replayable fault schedule. The wire contract is
//! `docs/custodian-wire.md`; the configuration and the faults are in the crate's README.

mod accept;
mod admin;
mod amount;
mod app;
mod bitgo;
mod chain;
mod clock;
mod config;
mod executor;
mod faults;
mod fireblocks;
mod fireblocks_auth;
mod hmac_sha;
mod keys;
mod prime;
mod profile;
mod record;
mod reply;
mod server;
mod state;
mod views;
mod webhooks;

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "opledger-custodian-sim",
    about = "A custodian double over HTTP"
)]
struct Args {
    /// The configuration file (JSON).
    #[arg(long)]
    config: PathBuf,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let config = config::Config::load(&args.config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(run(config))
}

async fn run(config: config::Config) -> anyhow::Result<()> {
    let listen = config.listen.clone();
    let app = app::App::new(config)?;
    let mut router = admin::routes();
    if app.config.fireblocks.is_some() {
        router = router.merge(fireblocks::routes());
    }
    if app.config.bitgo.is_some() {
        router = router.merge(bitgo::routes());
    }
    if app.config.prime.is_some() {
        router = router.merge(prime::routes());
    }
    let router = router
        .fallback(not_found)
        .method_not_allowed_fallback(not_allowed)
        .with_state(app.clone());
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let address = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on {address}")?;
        stdout.flush()?;
    }
    tracing::info!(
        hot_wallet = app.hot_wallet(),
        "custodian double listening on {address}"
    );
    server::serve(listener, router, app).await;
    Ok(())
}

/// An unknown path: a body every profile's client can read as an error.
async fn not_found() -> axum::response::Response {
    let body = serde_json::json!({"message": "Not found", "code": 404, "error": "not found", "name": "NotFound"});
    reply::respond(&reply::answer(404, &body), reply::Note::default())
}

/// A known path with another method.
async fn not_allowed() -> axum::response::Response {
    let body = serde_json::json!({"message": "Method not allowed", "code": 405, "error": "method not allowed", "name": "MethodNotAllowed"});
    reply::respond(&reply::answer(405, &body), reply::Note::default())
}
