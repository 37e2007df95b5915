//! `opledger-admin`: schema migrations, tenants, API keys, webhook endpoints and ledger invariant
//! checks.
//!
//! Runs with the owner role's database URL (`--database-url` or `OPLEDGER_ADMIN_DATABASE_URL`).
//! Issued API keys are printed once on stdout and never stored in clear. Trust statements are
//! signed here with a tenant administrator key read from a file and published as new versions.

mod cli;
mod controls;
mod database;
mod hsm;
mod keystore;
mod output;
mod trust;
mod webhook;

use clap::Parser;
use cli::{Cli, Command, ControlsCommand, DepositAddressCommand, TenantCommand};
use opledger_store::{Store, StoreConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Keystore { command } = &cli.command {
        return keystore::keystore(command, cli.json);
    }
    if let Command::Hsm { command } = &cli.command {
        return hsm::hsm(command, cli.json);
    }
    if let Command::Trust {
        command: trust::TrustCommand::Keygen { out },
    } = &cli.command
    {
        return trust::keygen(out, cli.json);
    }
    if let Command::Controls {
        command: ControlsCommand::Report { junit, repo, out },
    } = &cli.command
    {
        let go = controls::report(junit.as_deref(), repo, out, &machine())?;
        std::process::exit(if go { 0 } else { 1 });
    }
    let config = StoreConfig {
        max_connections: 2,
        ..StoreConfig::default()
    };
    let store = Store::connect(&cli.database_url, config)
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to the database: {}", e.log_safe()))?;
    run(&store, cli.command, cli.json).await
}

/// Runs a command that needs the database.
async fn run(store: &Store, command: Command, json: bool) -> anyhow::Result<()> {
    match command {
        Command::Migrate => database::migrate(store, json).await?,
        Command::Tenant {
            command: TenantCommand::Create { name },
        } => database::create_tenant(store, &name, json).await?,
        Command::Key { command } => database::key(store, command, json).await?,
        Command::Credit {
            tenant,
            account,
            asset,
            amount,
            key,
        } => {
            let flags = database::CreditFlags {
                tenant: &tenant,
                account: &account,
                asset: &asset,
                amount: &amount,
                key: &key,
            };
            database::credit(store, flags, json).await?;
        }
        Command::DepositAddress {
            command:
                DepositAddressCommand::Add {
                    tenant,
                    network,
                    address,
                    account,
                },
        } => {
            database::add_deposit_address(store, &tenant, &network, &address, &account, json)
                .await?;
        }
        Command::Webhook { command } => webhook::webhook(store, command, json).await?,
        Command::Trust { command } => trust::run(store, command, json).await?,
        // Handled before connecting to the database.
        Command::Keystore { .. } | Command::Hsm { .. } | Command::Controls { .. } => {}
        Command::CheckInvariants => database::check_invariants(store, json).await?,
    }
    Ok(())
}

/// The machine this runs on, for reports: CPU model and count.
fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{cpus} cores, {model}, {}", std::env::consts::OS)
}
