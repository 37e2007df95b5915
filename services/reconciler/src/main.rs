//! `opledger-reconciler`: loads configuration and runs. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // JSON logs with trace ids; spans exported over OTLP/gRPC when OTEL_* says where.
    let telemetry = opledger_grpc::server::init_telemetry("opledger-reconciler");
    let result = serve().await;
    telemetry.shutdown().await;
    result
}

async fn serve() -> anyhow::Result<()> {
    let file = std::env::var_os("OPLEDGER_RECONCILER_CONFIG").map(std::path::PathBuf::from);
    let config = opledger_reconciler::Config::load(file.as_deref())?;
    Ok(opledger_reconciler::run(config).await?)
}
