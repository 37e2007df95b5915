//! `opledger-operations`: loads configuration and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (load, run) = (opledger_operations::Config::load, opledger_operations::run);
    opledger_server::main("opledger-operations", "OPLEDGER_OPERATIONS_", load, run).await
}
