//! `opledger-witness`: loads configuration and runs. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // JSON logs with trace ids; spans exported over OTLP/gRPC when OTEL_* says where.
    let telemetry = opledger_grpc::server::init_telemetry("opledger-witness");
    let result = serve().await;
    telemetry.shutdown().await;
    result
}

async fn serve() -> anyhow::Result<()> {
    let file = std::env::var_os("OPLEDGER_WITNESS_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_witness::Config::load(file.as_deref())?;
    Ok(opledger_witness::run(config).await?)
}
