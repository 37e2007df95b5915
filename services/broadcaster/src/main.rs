//! `opledger-broadcaster`: loads configuration and runs the worker. See the crate docs.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (load, run) = (
        opledger_broadcaster::Config::load,
        opledger_broadcaster::run,
    );
    opledger_server::main("opledger-broadcaster", "OPLEDGER_BROADCASTER_", load, run).await
}
