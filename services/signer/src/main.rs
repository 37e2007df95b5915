//! `opledger-signer`: loads configuration and keys, and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    opledger_grpc::server::init_logging();
    let file = std::env::var_os("OPLEDGER_SIGNER_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_signer::Config::load(file.as_deref())?;
    Ok(opledger_signer::run(config).await?)
}
