//! `opledger-approvals`: loads configuration and serves. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (load, run) = (opledger_approvals::Config::load, opledger_approvals::run);
    opledger_server::main("opledger-approvals", "OPLEDGER_APPROVALS_", load, run).await
}
