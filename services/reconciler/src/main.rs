//! `opledger-reconciler`: loads configuration and runs. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    opledger_grpc::server::init_logging();
    let file = std::env::var_os("OPLEDGER_RECONCILER_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_reconciler::Config::load(file.as_deref())?;
    Ok(opledger_reconciler::run(config).await?)
}
