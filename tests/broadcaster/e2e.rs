//! End to end on a real node: 100 withdrawals, native ETH and an ERC-20 token, created,
//! approved, signed, submitted and confirmed. On-chain transfers from the hot wallet match the
//! operations one to one, and the ledger is settled exactly once.

use opledger_proto::v1::CreateWithdrawalRequest;
use opledger_testkit::{Anvil, deploy_test_token, token_balance};
use opledger_tests::chain::broadcaster_config;
use opledger_tests::signer::{HOT_WALLET, InProcessSigner, TOKEN, approve};
use opledger_tests::{Stack, authed, new_key, payload};
use std::collections::HashMap;
use std::time::Duration;

const DESTINATIONS: [&str; 4] = [
    "0x1000000000000000000000000000000000000001",
    "0x2000000000000000000000000000000000000002",
    "0x3000000000000000000000000000000000000003",
    "0x4000000000000000000000000000000000000004",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_withdrawals_in_eth_and_a_token_are_paid_once_each() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000000")
        .await?;
    stack
        .fund(&acme, "treasury", "USDC", "1000000000000")
        .await?;
    let node = Anvil::start().await?;
    // The hot wallet deploys the token (its nonce 0) and holds the supply.
    let token = deploy_test_token(&node, 1_000_000_000_000).await?;
    assert_eq!(token, TOKEN, "the signer's configured token address");
    let signer = InProcessSigner::start_at_nonce(&stack.db, acme.id, 1).await?;
    let mut cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    // Submission timeouts are not this test's subject (tests/reconciler covers UNKNOWN): under a
    // loaded CI machine a 2 s budget can expire while the node is busy.
    cfg.submit_timeout_ms = 10_000;
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;

    let mut expected: HashMap<(&str, &str), u128> = HashMap::new();
    let mut ids = Vec::new();
    let mut client = stack.client().await?;
    for i in 0..100_u128 {
        let (asset, amount) = if i % 10 < 7 {
            ("ETH", 1_000_000_000_000 + i)
        } else {
            ("USDC", 1_000 + i)
        };
        let to = DESTINATIONS[(i % 4) as usize];
        let mut p = payload(&amount.to_string(), to);
        p.asset = asset.into();
        let w = client
            .create_withdrawal(authed(
                &acme.client,
                CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(p),
                },
            ))
            .await?
            .into_inner()
            .withdrawal
            .ok_or_else(|| anyhow::anyhow!("no withdrawal"))?;
        approve(&stack, &acme, &w).await?;
        *expected.entry((asset, to)).or_default() += amount;
        ids.push(w.withdrawal_id);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        broadcaster.tick(64, 8).await;
        watcher.tick(256).await;
        let (open,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM withdrawal_ops WHERE state <> 'CONFIRMED'")
                .fetch_one(stack.admin.pool())
                .await?;
        if open == 0 {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let states: Vec<(String, i64)> = sqlx::query_as(
                "SELECT state, count(*) FROM withdrawal_ops GROUP BY state ORDER BY state",
            )
            .fetch_all(stack.admin.pool())
            .await?;
            anyhow::bail!(
                "{open} withdrawals not confirmed in time; states {states:?}; submissions {:?}",
                broadcaster.submission_counts()
            );
        }
        node.mine(1).await?;
    }

    // One transaction per operation from the hot wallet, and nothing else.
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 1 + 100);
    let (attempts, distinct_nonces): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT nonce) FROM tx_attempts")
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!((attempts, distinct_nonces), (100, 100));
    let hashes: Vec<(String,)> = sqlx::query_as("SELECT tx_hash FROM tx_attempts")
        .fetch_all(stack.admin.pool())
        .await?;
    for (hash,) in &hashes {
        let receipt = node
            .receipt(hash)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no receipt"))?;
        assert_eq!(receipt["status"], "0x1");
        assert_eq!(
            receipt["from"].as_str().map(str::to_lowercase).as_deref(),
            Some(HOT_WALLET)
        );
    }
    for to in DESTINATIONS {
        assert_eq!(
            node.balance(to).await?,
            expected.get(&("ETH", to)).copied().unwrap_or(0),
            "ETH to {to}"
        );
        assert_eq!(
            token_balance(&node, &token, to).await?,
            expected.get(&("USDC", to)).copied().unwrap_or(0),
            "USDC to {to}"
        );
    }
    // The ledger: nothing held, every hold settled once.
    let eth_paid: u128 = expected
        .iter()
        .filter(|((a, _), _)| *a == "ETH")
        .map(|(_, v)| v)
        .sum();
    let usdc_paid: u128 = expected
        .iter()
        .filter(|((a, _), _)| *a == "USDC")
        .map(|(_, v)| v)
        .sum();
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (100_000_000_000_000_000_000 - eth_paid, 0)
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "USDC").await?,
        (1_000_000_000_000 - usdc_paid, 0)
    );
    let (settles,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM ledger_entries WHERE kind = 'SETTLE'")
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(settles, 100);
    assert_eq!(ids.len(), 100);
    stack.assert_invariants().await
}
