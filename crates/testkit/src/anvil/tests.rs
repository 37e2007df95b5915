//! Tests of the anvil harness: the binary variable, and real nodes started, driven and stopped.

use super::*;
use serde_json::Value;
use std::path::Path;

const WEI_PER_ETH: u128 = 1_000_000_000_000_000_000;
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(10);

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn unset_binary_variable_is_a_clear_error() {
    for value in [None, Some(OsString::new())] {
        let err = anvil_bin(value).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "OPLEDGER_ANVIL_BIN is not set: run scripts/test.sh, which installs anvil from npm"
            )
        );
    }
    let err = anvil_bin(Some("/nonexistent/anvil".into()))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("is not a file"), "{err}");
}

#[tokio::test]
async fn start_and_stop() -> anyhow::Result<()> {
    let mut anvil = Anvil::start().await?;
    let pid = anvil.pid();
    assert!(pid > 0);
    assert!(process_exists(pid), "anvil pid {pid} is not running");
    assert!(anvil.is_running());
    assert!(anvil.rpc_url().starts_with("http://127.0.0.1:"));
    assert_eq!(anvil.block_number().await?, 0);

    anvil.stop();
    assert!(!anvil.is_running());
    assert!(
        !process_exists(pid),
        "anvil pid {pid} still exists after stop"
    );
    assert_eq!(anvil.pid(), pid);
    anvil.stop(); // idempotent
    let err = anvil.rpc("eth_blockNumber", json!([])).await.err();
    assert!(
        matches!(err, Some(RpcCallError::Transport { .. })),
        "{err:?}"
    );
    Ok(())
}

#[tokio::test]
async fn drop_kills_the_node() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let pid = anvil.pid();
    drop(anvil);
    assert!(
        !process_exists(pid),
        "anvil pid {pid} still exists after drop"
    );
    Ok(())
}

#[tokio::test]
async fn options_chain_id_accounts_and_balance() -> anyhow::Result<()> {
    let anvil = Anvil::start_with(AnvilOptions {
        chain_id: 1337,
        accounts: 3,
        balance_eth: 42,
        ..AnvilOptions::default()
    })
    .await?;
    assert_eq!(anvil.chain_id(), 1337);
    assert_eq!(anvil.rpc("eth_chainId", json!([])).await?, json!("0x539"));
    let accounts = anvil.rpc("eth_accounts", json!([])).await?;
    assert_eq!(accounts.as_array().map(Vec::len), Some(3), "{accounts}");
    assert_eq!(anvil.balance(DEV_KEYS[0].0).await?, 42 * WEI_PER_ETH);
    Ok(())
}

#[tokio::test]
async fn dev_accounts_are_funded_and_match_anvil() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    assert_eq!(anvil.chain_id(), 31337);
    assert_eq!(anvil.rpc("eth_chainId", json!([])).await?, json!("0x7a69"));
    let accounts = anvil.rpc("eth_accounts", json!([])).await?;
    let log = anvil.log_tail(200);
    for (i, (address, secret)) in DEV_KEYS.iter().enumerate() {
        assert_eq!(anvil.balance(address).await?, 10_000 * WEI_PER_ETH);
        assert_eq!(
            accounts[i].as_str().map(str::to_ascii_lowercase),
            Some(address.to_ascii_lowercase())
        );
        // Anvil prints its accounts and keys at startup.
        assert!(
            log.contains(&format!("({i}) {address}")),
            "address {i} not in log:\n{log}"
        );
        assert!(
            log.contains(&format!("({i}) {secret}")),
            "key {i} not in log:\n{log}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn mine_snapshot_revert_and_reorg() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let start = anvil.block_number().await?;
    anvil.mine(3).await?;
    assert_eq!(anvil.block_number().await?, start + 3);
    anvil.mine(0).await?;
    assert_eq!(anvil.block_number().await?, start + 3);

    let snapshot = anvil.snapshot().await?;
    anvil.mine(2).await?;
    assert_eq!(anvil.block_number().await?, start + 5);
    assert!(anvil.revert(&snapshot).await?);
    assert_eq!(anvil.block_number().await?, start + 3);

    let head = anvil.block_number().await?;
    let block_hash = |block: Value| block.get("hash").cloned().unwrap_or(Value::Null);
    let tag = format!("{head:#x}");
    let before = block_hash(
        anvil
            .rpc("eth_getBlockByNumber", json!([tag, false]))
            .await?,
    );
    anvil.reorg(2).await?;
    assert_eq!(anvil.block_number().await?, head);
    let after = block_hash(
        anvil
            .rpc("eth_getBlockByNumber", json!([tag, false]))
            .await?,
    );
    assert!(before.is_string());
    assert_ne!(before, after, "the head block was not replaced");
    Ok(())
}

#[tokio::test]
async fn automine_sends_and_mines() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let (from, _) = DEV_KEYS[0];
    let (to, _) = DEV_KEYS[1];
    let hash = anvil
        .send_transaction(json!({"from": from, "to": to, "value": "0x1"}))
        .await?;
    let receipt = anvil.wait_receipt(&hash, RECEIPT_TIMEOUT).await?;
    assert_eq!(receipt.get("status"), Some(&json!("0x1")), "{receipt}");
    assert_eq!(anvil.nonce(from, "latest").await?, 1);
    assert_eq!(anvil.balance(to).await?, 10_000 * WEI_PER_ETH + 1);
    Ok(())
}

#[tokio::test]
async fn dropped_transaction_is_never_mined() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;
    let (from, _) = DEV_KEYS[0];
    let (to, _) = DEV_KEYS[1];
    anvil.set_automine(false).await?;
    let hash = anvil
        .send_transaction(json!({"from": from, "to": to, "value": "0x1"}))
        .await?;
    assert_eq!(
        anvil.txpool_status().await?,
        TxpoolStatus {
            pending: 1,
            queued: 0
        }
    );
    assert_eq!(anvil.nonce(from, "pending").await?, 1);
    assert_eq!(anvil.nonce(from, "latest").await?, 0);
    assert_eq!(anvil.receipt(&hash).await?, None);

    assert!(anvil.drop_transaction(&hash).await?);
    assert!(!anvil.drop_transaction(&hash).await?);
    assert_eq!(anvil.txpool_status().await?.pending, 0);
    let start = anvil.block_number().await?;
    anvil.mine(1).await?;
    assert_eq!(anvil.block_number().await?, start + 1);
    assert_eq!(anvil.receipt(&hash).await?, None);
    assert_eq!(anvil.nonce(from, "latest").await?, 0);
    Ok(())
}

#[tokio::test]
async fn rejected_raw_transactions_carry_anvil_messages() -> anyhow::Result<()> {
    let anvil = Anvil::start().await?;

    // Garbage bytes: anvil cannot decode them.
    let err = anvil.send_raw_transaction(&[0xde, 0xad, 0xbe, 0xef]).await;
    let error = match err {
        Err(RpcCallError::Rpc { error, .. }) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    };
    assert!(
        error.message.to_ascii_lowercase().contains("decode"),
        "{error}"
    );
    assert_ne!(error.code, 0);

    // A transaction signed by anvil itself, sent twice with automine off, then again once
    // mined: the node's own words for each case.
    anvil.set_automine(false).await?;
    let (from, _) = DEV_KEYS[0];
    let (to, _) = DEV_KEYS[1];
    let raw = anvil
        .sign_transaction(json!({
            "from": from, "to": to, "value": "0x1", "nonce": "0x0", "gas": "0x5208",
            "maxFeePerGas": "0x77359400", "maxPriorityFeePerGas": "0x1",
            "chainId": format!("{:#x}", anvil.chain_id()),
        }))
        .await?;
    let hash = anvil.send_raw_transaction(&raw).await?;
    let again = anvil.send_raw_transaction(&raw).await.err();
    assert_eq!(
        again.as_ref().and_then(RpcCallError::message),
        Some("transaction already imported"),
        "{again:?}"
    );
    anvil.mine(1).await?;
    let receipt = anvil.wait_receipt(&hash, RECEIPT_TIMEOUT).await?;
    assert_eq!(receipt.get("status"), Some(&json!("0x1")), "{receipt}");
    let late = anvil.send_raw_transaction(&raw).await.err();
    assert_eq!(
        late.as_ref().and_then(RpcCallError::message),
        Some("nonce too low"),
        "{late:?}"
    );

    // Through anyhow, with context, the JSON-RPC error is still found.
    let wrapped = anyhow::Error::from(late.ok_or_else(|| anyhow!("no error"))?)
        .context("sending the withdrawal");
    assert_eq!(
        RpcError::find_in(&wrapped).map(|e| e.message.as_str()),
        Some("nonce too low")
    );
    Ok(())
}

#[tokio::test]
async fn block_time_mines_by_itself() -> anyhow::Result<()> {
    let anvil = Anvil::start_with(AnvilOptions {
        block_time: Some(1),
        ..AnvilOptions::default()
    })
    .await?;
    let start = anvil.block_number().await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while anvil.block_number().await? <= start {
        assert!(
            Instant::now() < deadline,
            "no block mined with --block-time 1 within 10s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        Anvil::start_with(AnvilOptions {
            block_time: Some(0),
            ..AnvilOptions::default()
        })
        .await
        .is_err()
    );
    Ok(())
}
