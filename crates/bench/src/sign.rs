//! The sign benchmark: signatures persisted per second by the real signer (the library in-process,
//! connected under its restricted database role), for one sender and for several, versus
//! `evm::sign` alone as the CPU ceiling of signing.

use crate::database::{self, BenchDatabase, LoginRole};
use opledger_signer::config::{Config, NetworkConfig, TrustRootConfig};
use opledger_signer::{Signer, Wallets};
use opledger_store::{Store, StoreConfig};
use sqlx::postgres::PgConnectOptions;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

mod checks;
mod measure;
mod options;
mod report;
mod setup;
mod types;

use checks::verify;
use measure::{check_errors, sign_all};
use options::{DB, NETWORK, PREPARE_TASKS, SIGNER_PASSWORD, SIGNER_USER, WARMUP};
use setup::{network, prepare};

pub use options::Args;

pub async fn run(args: Args) -> anyhow::Result<()> {
    args.validate()?;
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
    let keys = setup::Keys::of(args.backend)?;
    let (warmup_sender, mut phases) =
        setup::phases(&setup, &mut wallets, &keys, &args.senders).await?;

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
    let (signer, pool_size) =
        start_signer(&args, &network, trust_roots, wallets, &signer_url).await?;

    // The CPU ceiling of signing alone, measured while the database is idle.
    let baselines = measure::baselines(&network, args.baseline_seconds).await?;

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
    report::print(&args, pool_size, prepared, &rows, &baselines, started);
    Ok(())
}

/// The signer library, connected as the restricted login role at `signer_url`, with the wallets
/// registered; and its pool size.
async fn start_signer(
    args: &Args,
    network: &NetworkConfig,
    trust_roots: Vec<TrustRootConfig>,
    wallets: Wallets,
    signer_url: &str,
) -> anyhow::Result<(Signer, u32)> {
    let mut config = Config {
        instance_id: "bench-signer".into(),
        networks: BTreeMap::from([(NETWORK.to_owned(), network.clone())]),
        trust_roots,
        ..Config::default()
    };
    if let Some(n) = args.db_connections {
        config.base.db_max_connections = n;
    }
    let pool_size = config.base.db_max_connections;
    let store = Store::connect(signer_url, opledger_server::store_config(&config.base))
        .await
        .map_err(|e| anyhow::anyhow!("the signer role cannot connect: {}", e.log_safe()))?;
    let signer = Signer::new(store.signer(), Arc::new(config), Arc::new(wallets));
    // Originals come only from registered ACTIVE wallets (migration 24), as in the service.
    signer
        .register_wallets()
        .await
        .map_err(|e| anyhow::anyhow!("cannot register the wallets: {e}"))?;
    Ok((signer, pool_size))
}
