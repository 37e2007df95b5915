//! `opledger-custodian-executor`: loads configuration and runs. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    use opledger_custodian_executor::{Config, run};
    let name = "opledger-custodian-executor";
    opledger_server::main(name, "OPLEDGER_CUSTODIAN_", Config::load, run).await
}
