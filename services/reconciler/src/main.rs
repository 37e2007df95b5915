//! `opledger-reconciler`: loads configuration and runs. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (load, run) = (opledger_reconciler::Config::load, opledger_reconciler::run);
    opledger_server::main("opledger-reconciler", "OPLEDGER_RECONCILER_", load, run).await
}
