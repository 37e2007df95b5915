//! `opledger-signer`: loads configuration and keys, and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (load, run) = (opledger_signer::Config::load, opledger_signer::run);
    opledger_server::main("opledger-signer", "OPLEDGER_SIGNER_", load, run).await
}
