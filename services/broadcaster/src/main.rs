//! `opledger-broadcaster`: loads configuration and runs the worker. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    opledger_grpc::server::init_logging();
    let file = std::env::var_os("OPLEDGER_BROADCASTER_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_broadcaster::Config::load(file.as_deref())?;
    Ok(opledger_broadcaster::run(config).await?)
}
