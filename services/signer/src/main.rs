//! `opledger-signer`: loads configuration and keys, and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // JSON logs with trace ids; spans exported over OTLP/gRPC when OTEL_* says where.
    let telemetry = opledger_grpc::server::init_telemetry("opledger-signer");
    let result = serve().await;
    telemetry.shutdown().await;
    result
}

async fn serve() -> anyhow::Result<()> {
    let file = std::env::var_os("OPLEDGER_SIGNER_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_signer::Config::load(file.as_deref())?;
    Ok(opledger_signer::run(config).await?)
}
