//! `opledger-operations`: loads configuration and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    opledger_grpc::server::init_logging();
    let file = std::env::var_os("OPLEDGER_OPERATIONS_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_operations::Config::load(file.as_deref())?;
    Ok(opledger_operations::run(config).await?)
}
