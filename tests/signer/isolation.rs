//! The signer's isolation: its database role can write nothing but signing columns and attempts,
//! and its binary links no chain, RPC or HTTP client.

use opledger_tests::signer::{approve, signer_url};
use opledger_tests::{ALICE, Stack};

#[tokio::test]
async fn the_signer_role_cannot_touch_payloads_hashes_ledger_or_keys() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = sqlx::PgPool::connect(&signer_url(&stack.db).await?).await?;
    let op: uuid::Uuid = w.withdrawal_id.parse()?;
    let refused: [&'static str; 9] = [
        "UPDATE withdrawal_payloads SET amount = 1 WHERE op_id = $1",
        "UPDATE withdrawal_ops SET payload_hash = '\\x00' WHERE op_id = $1",
        "SELECT idempotency_key_hash FROM withdrawal_ops WHERE op_id = $1",
        "UPDATE ledger_accounts SET available = available + 1 WHERE $1::uuid IS NOT NULL",
        "SELECT * FROM ledger_holds WHERE op_id = $1",
        "SELECT * FROM api_keys WHERE $1::uuid IS NOT NULL",
        "INSERT INTO approvals (tenant_id, op_id, approver_id, payload_hash) SELECT tenant_id, op_id, 'x', payload_hash FROM approvals WHERE op_id = $1",
        "DELETE FROM tx_attempts WHERE op_id = $1",
        "UPDATE withdrawal_ops SET state = 'CONFIRMED', version = version + 1 WHERE op_id = $1",
    ];
    for sql in refused {
        let result = sqlx::query(sql).bind(op).execute(&signer).await;
        assert!(result.is_err(), "the signer role could run: {sql}");
    }
    // Even a move it may make only happens from the right state.
    let moved = sqlx::query(
        "UPDATE withdrawal_ops SET state = 'SIGNED', version = version + 1 WHERE op_id = $1",
    )
    .bind(op)
    .execute(&signer)
    .await;
    assert!(moved.is_err(), "APPROVED -> SIGNED skips the claim");
    // What it needs, it can read.
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM withdrawal_payloads WHERE op_id = $1")
        .bind(op)
        .fetch_one(&signer)
        .await?;
    assert_eq!(n, 1);
    Ok(())
}

#[test]
fn the_signer_binary_links_no_chain_rpc_or_http_client() -> anyhow::Result<()> {
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "opledger-signer",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout)?;
    assert!(tree.contains("opledger-evm"), "the tree is the signer's");
    for forbidden in [
        "reqwest",
        "ureq",
        "isahc",
        "surf",
        "hyper-rustls",
        "hyper-tls",
        "alloy-provider",
        "alloy-transport",
        "alloy-rpc-client",
        "ethers",
        "web3",
        "jsonrpsee",
    ] {
        assert!(
            !tree
                .lines()
                .any(|l| l.split_whitespace().next() == Some(forbidden)),
            "the signer depends on {forbidden}"
        );
    }
    Ok(())
}

#[test]
fn the_deployment_example_configuration_loads_and_validates() -> anyhow::Result<()> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/signer/signer.example.toml");
    let config = opledger_signer::Config::load(Some(&path))?;
    assert!(
        config.tls.as_ref().is_some_and(|t| t.client_ca.is_some()),
        "the example uses mutual TLS"
    );
    assert_eq!(config.wallets.len(), 1);
    Ok(())
}
