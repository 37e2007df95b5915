//! `opledger-witness`: loads configuration and runs. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (load, run) = (opledger_witness::Config::load, opledger_witness::run);
    opledger_server::main("opledger-witness", "OPLEDGER_WITNESS_", load, run).await
}
