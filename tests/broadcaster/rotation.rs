//! A wallet rotation while withdrawals are in flight, through the real broadcaster and watcher at
//! three confirmations: the transfers pending from the old wallet are fee-bumped by the old
//! wallet at their own nonces, new withdrawals go out from the new wallet, each withdrawal is
//! paid exactly once (every stored byte string sent again pays nothing more), and the old wallet
//! retires by itself only once all of its operations are confirmed at final depth: RETIRED in the
//! registry, its key dropped, so no replacement of its nonces can be signed any more.

use opledger_proto::v1::{AttemptKind, SignReplacementRequest};
use opledger_testkit::Anvil;
use opledger_tests::chain::{CONFIRMATIONS, broadcaster_config};
use opledger_tests::signer::{
    CALLER_TOKEN, HOT_WALLET, InProcessSigner, NETWORK, ROTATED_WALLET, TestWallets, approve,
    client,
};
use opledger_tests::{BOB, Stack, authed, reason};
use std::time::Duration;

const OLD_AMOUNTS: [u128; 3] = [
    1_000_000_000_000_000,
    2_000_000_000_000_000,
    3_000_000_000_000_000,
];
const NEW_AMOUNTS: [u128; 2] = [4_000_000_000_000_000, 5_000_000_000_000_000];

/// The status of `sender` in the signers' wallet registry.
async fn wallet_status(stack: &Stack, sender: &str) -> anyhow::Result<String> {
    let (status,): (String,) =
        sqlx::query_as("SELECT status FROM signer_wallets WHERE network = $1 AND sender = $2")
            .bind(NETWORK)
            .bind(sender)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(status)
}

/// Each attempt of the withdrawal `op`: (attempt, kind, sender, hash), in attempt order.
async fn attempts_of(
    stack: &Stack,
    op: &str,
) -> anyhow::Result<Vec<(i32, String, String, String)>> {
    Ok(sqlx::query_as(
        "SELECT attempt, kind, sender, tx_hash FROM tx_attempts WHERE op_id = $1::uuid \
         ORDER BY attempt",
    )
    .bind(op)
    .fetch_all(stack.admin.pool())
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_while_withdrawals_are_in_flight_pays_each_once_and_retires_the_old_wallet_once_they_are_final()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "10000000000000000000")
        .await?;
    let node = Anvil::start().await?;
    node.set_automine(false).await?;
    let paid_before = node.balance(BOB).await?;

    // Three withdrawals in flight from the old wallet: submitted, pending in the node's pool.
    let old_signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let cfg = broadcaster_config(&stack, &old_signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let mut old = Vec::new();
    for amount in OLD_AMOUNTS {
        let w = stack.withdraw(&acme, &amount.to_string(), BOB).await?;
        approve(&stack, &acme, &w).await?;
        old.push(w.withdrawal_id);
    }
    assert_eq!(broadcaster.tick(64, 8).await, OLD_AMOUNTS.len());
    for op in &old {
        assert_eq!(stack.state(op).await?, "BROADCAST");
    }
    drop(broadcaster);
    drop(old_signer);

    // The rotation: the new wallet active, the old one retiring.
    let signer =
        InProcessSigner::start_with_wallets(&stack.db, acme.id, TestWallets::Rotated(true)).await?;
    let mut cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    // A short reorganization window (still above the three confirmations), so that the confirmed
    // withdrawals leave it within the test.
    cfg.reorg_window_blocks = 5;
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    // The stuck transfers are fee-bumped, each by the old wallet at its own nonce.
    let bumped = broadcaster.bump_stuck(NETWORK, 0, 64).await;
    assert_eq!(
        bumped.len(),
        OLD_AMOUNTS.len(),
        "each stuck transfer bumped: {bumped:?}"
    );
    for (nonce, op) in old.iter().enumerate() {
        let attempts = attempts_of(&stack, op).await?;
        let shape: Vec<(i32, &str, &str)> = attempts
            .iter()
            .map(|(n, kind, sender, _)| (*n, kind.as_str(), sender.as_str()))
            .collect();
        assert_eq!(
            shape,
            vec![(1, "ORIGINAL", HOT_WALLET), (2, "FEE_BUMP", HOT_WALLET)],
            "withdrawal at the old wallet's nonce {nonce}"
        );
    }
    // New withdrawals are signed by the new wallet.
    let mut new = Vec::new();
    for amount in NEW_AMOUNTS {
        let w = stack.withdraw(&acme, &amount.to_string(), BOB).await?;
        approve(&stack, &acme, &w).await?;
        new.push(w.withdrawal_id);
    }
    assert_eq!(broadcaster.tick(64, 8).await, NEW_AMOUNTS.len());
    for op in &new {
        let attempts = attempts_of(&stack, op).await?;
        assert_eq!(attempts.len(), 1);
        assert_eq!(
            (attempts[0].1.as_str(), attempts[0].2.as_str()),
            ("ORIGINAL", ROTATED_WALLET)
        );
    }
    // While its operations are in flight the old wallet is not retired (the signer checks every
    // second here).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(wallet_status(&stack, HOT_WALLET).await?, "RETIRING");

    // Blocks until every withdrawal is confirmed at final depth.
    let all: Vec<&String> = old.iter().chain(new.iter()).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        node.mine(1).await?;
        watcher.tick(64).await;
        let mut open = 0;
        for op in &all {
            if stack.state(op).await? != "CONFIRMED" {
                open += 1;
            }
        }
        if open == 0 {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{open} withdrawals not confirmed in time"
        );
    }

    // Each withdrawal paid once: one transaction per nonce of each wallet, and for each
    // withdrawal exactly one of its attempts mined, from its original's sender.
    let expected: u128 = OLD_AMOUNTS.iter().chain(NEW_AMOUNTS.iter()).sum();
    assert_eq!(node.balance(BOB).await? - paid_before, expected);
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 3);
    assert_eq!(node.nonce(ROTATED_WALLET, "latest").await?, 2);
    for op in &all {
        let mut mined = 0;
        for (_, _, sender, hash) in attempts_of(&stack, op).await? {
            if let Some(receipt) = node.receipt(&hash).await? {
                mined += 1;
                assert_eq!(receipt["status"], "0x1");
                assert_eq!(
                    receipt["from"].as_str().map(str::to_lowercase).as_deref(),
                    Some(sender.as_str())
                );
            }
        }
        assert_eq!(mined, 1, "exactly one mined attempt for each withdrawal");
    }
    let raw: Vec<(Vec<u8>,)> = sqlx::query_as("SELECT raw_tx FROM tx_attempts")
        .fetch_all(stack.admin.pool())
        .await?;
    assert_eq!(raw.len(), OLD_AMOUNTS.len() * 2 + NEW_AMOUNTS.len());
    // Every signed byte string sent again: nothing stored can pay a second time.
    for (bytes,) in &raw {
        let _ = node.send_raw_transaction(bytes).await;
    }
    node.mine(CONFIRMATIONS).await?;
    assert_eq!(
        node.balance(BOB).await? - paid_before,
        expected,
        "no second payable transaction"
    );
    assert_eq!(node.nonce(HOT_WALLET, "latest").await?, 3);
    assert_eq!(node.nonce(ROTATED_WALLET, "latest").await?, 2);
    // The ledger settled each hold once.
    assert_eq!(stack.entries(acme.id, "SETTLE").await?, 5);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (10_000_000_000_000_000_000 - expected, 0)
    );

    // Confirmed, but within the watcher's reorganization window: the old wallet is kept. The tests'
    // signer keeps no grace after a confirmation; the store test of retirement checks the grace.
    let (floor,): (i64,) =
        sqlx::query_as("SELECT floor_block FROM chain_reorg_floors WHERE network = $1")
            .bind(NETWORK)
            .fetch_one(stack.admin.pool())
            .await?;
    let (lowest,): (i64,) =
        sqlx::query_as("SELECT min(block_number) FROM inclusions WHERE reorged_at IS NULL")
            .fetch_one(stack.admin.pool())
            .await?;
    assert!(lowest > floor, "inclusions at {lowest}, floor {floor}");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(wallet_status(&stack, HOT_WALLET).await?, "RETIRING");
    // Past the window (the watcher's next heads), the old wallet retires by itself and its key is
    // gone: a replacement at one of its nonces (an operation put back to BROADCAST, as only a
    // reorganization deeper than the window could) is refused, nothing signed.
    node.mine(cfg.reorg_window_blocks + 1).await?;
    watcher.tick(64).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while wallet_status(&stack, HOT_WALLET).await? != "RETIRED" {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the old wallet did not retire"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(wallet_status(&stack, ROTATED_WALLET).await?, "ACTIVE");
    stack.force_state(&old[0], "BROADCAST").await?;
    let refused = client(signer.addr)
        .await?
        .sign_replacement(authed(
            CALLER_TOKEN,
            SignReplacementRequest {
                tenant_id: acme.id.to_string(),
                withdrawal_id: old[0].clone(),
                kind: AttemptKind::FeeBump as i32,
            },
        ))
        .await
        .expect_err("the retired wallet's key is gone");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&refused), "NO_KEY_FOR_SENDER");
    assert_eq!(
        attempts_of(&stack, &old[0]).await?.len(),
        2,
        "nothing signed"
    );
    Ok(())
}
