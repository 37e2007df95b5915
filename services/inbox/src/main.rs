//! `opledger-inbox`: loads configuration and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    opledger_grpc::server::init_logging();
    let file = std::env::var_os("OPLEDGER_INBOX_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_inbox::Config::load(file.as_deref())?;
    Ok(opledger_inbox::run(config).await?)
}
