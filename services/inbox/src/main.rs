//! `opledger-inbox`: loads configuration and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (load, run) = (opledger_inbox::Config::load, opledger_inbox::run);
    opledger_server::main("opledger-inbox", "OPLEDGER_INBOX_", load, run).await
}
