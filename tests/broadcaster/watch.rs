//! The chain watcher: confirmation at final depth (three confirmations, agreed by the quorum)
//! settles the hold once; no receipt concludes nothing; evidence is read only when the agreed
//! head moves.

use opledger_tests::chain::Chain;
use opledger_tests::chain::{CONFIRMATIONS, broadcaster_config};
use opledger_tests::signer::{NETWORK, approve};
use opledger_tests::{BOB, Stack};

#[tokio::test]
async fn confirmation_after_three_blocks_settles_the_hold_once() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    assert_eq!(CONFIRMATIONS, 3, "the test counts three blocks");
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let w = stack.withdraw(&acme, "5000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    node.mine(1).await?; // automine already included it; one more block: 2 of 3
    let pass = watcher.tick(64).await;
    assert_eq!((pass.new_heads, pass.confirmed), (1, 0));
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    assert_eq!(
        watcher.tick(64).await.new_heads,
        0,
        "no new block, no receipt lookups"
    );
    node.mine(1).await?;
    let pass = watcher.tick(64).await;
    assert_eq!(pass.confirmed, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "CONFIRMED");
    // The hold left the platform exactly once: held 0, available reduced by the amount.
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (10_000_000_000_000_000_000 - 5_000_000_000_000_000, 0)
    );
    node.mine(1).await?;
    assert_eq!(watcher.tick(64).await.confirmed, 0, "confirmed once");
    assert_eq!(stack.entries(acme.id, "SETTLE").await?, 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn without_a_receipt_or_an_answer_nothing_is_concluded() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    node.set_automine(false).await?;
    let cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let w = stack.withdraw(&acme, "5000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    // Pending in the pool, not mined: no receipt.
    assert_eq!(watcher.tick(64).await.confirmed, 0);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    // The node goes away: no verdict either.
    drop(node);
    // Nothing happened (only the time spent trying to pin differs from an empty pass).
    let pass = watcher.tick(64).await;
    assert_eq!(
        opledger_broadcaster::watcher::Pass {
            stages: Default::default(),
            ..pass
        },
        opledger_broadcaster::watcher::Pass::default()
    );
    assert_eq!(stack.state(&w.withdrawal_id).await?, "BROADCAST");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        5_000_000_000_000_000,
        "hold kept"
    );
    stack.assert_invariants().await
}

async fn settled(stack: &Stack, kind: &str) -> anyhow::Result<i64> {
    let sql = "SELECT count(*) FROM ledger_entries WHERE kind = $1";
    let (n,): (i64,) = sqlx::query_as(sql)
        .bind(kind)
        .fetch_one(stack.admin.pool())
        .await?;
    Ok(n)
}

#[tokio::test]
async fn a_reorg_after_confirmation_reopens_the_hold_and_re_confirms_once() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let (kept, gone) = (
        stack.withdraw(&acme, "1000000000000000", BOB).await?,
        stack.withdraw(&acme, "2000000000000000", BOB).await?,
    );
    approve(&stack, &acme, &kept).await?;
    approve(&stack, &acme, &gone).await?;
    assert_eq!(broadcaster.tick(64, 1).await, 2);
    assert_eq!(watcher.tick(64).await.confirmed, 0, "not final yet");
    node.mine(CONFIRMATIONS - 1).await?;
    assert_eq!(watcher.tick(64).await.confirmed, 2);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        0,
        "both settled"
    );
    let raw = |id: &str| {
        let id: uuid::Uuid = id.parse().unwrap_or_default();
        let pool = stack.admin.pool().clone();
        async move {
            let (raw,): (Vec<u8>,) =
                sqlx::query_as("SELECT raw_tx FROM tx_attempts WHERE op_id = $1")
                    .bind(id)
                    .fetch_one(&pool)
                    .await?;
            anyhow::Ok(format!("0x{}", hex::encode(raw)))
        }
    };
    let kept_raw = raw(&kept.withdrawal_id).await?;
    // Replace the two blocks of the transfers and the two on top: the first transfer is
    // re-included elsewhere (at final depth again), the second is gone.
    let depth = 2 + (CONFIRMATIONS - 1);
    node.rpc("anvil_reorg", serde_json::json!([depth, [[kept_raw, 0]]]))
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let pass = watcher.tick(64).await;
    assert_eq!(pass.reopened, 2, "{pass:?}");
    assert_eq!(
        stack.state(&kept.withdrawal_id).await?,
        "CONFIRMED",
        "re-confirmed in its new block"
    );
    assert_eq!(
        stack.state(&gone.withdrawal_id).await?,
        "BROADCAST",
        "back to BROADCAST, never payable"
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        2_000_000_000_000_000,
        "the vanished one is held again"
    );
    // Ledger: 3 settlements, 2 reopenings: each operation posted once net.
    assert_eq!(
        (
            settled(&stack, "SETTLE").await?,
            settled(&stack, "REOPEN").await?
        ),
        (3, 2)
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_stuck_transfer_is_fee_bumped_and_paid_once() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    node.set_automine(false).await?;
    let cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let before = node.balance(BOB).await?;
    let w = stack.withdraw(&acme, "8000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    // Not mined yet: the stuck transfer gets a fee bump, persisted by the signer before it is sent.
    let classes = broadcaster.bump_stuck(NETWORK, 0, 64).await;
    assert_eq!(
        classes,
        vec![opledger_chain::SubmitClass::Accepted],
        "the node takes the replacement"
    );
    let (count, fees): (i64, Vec<String>) = sqlx::query_as(
        "SELECT count(*), array_agg(max_fee_per_gas::text ORDER BY attempt) FROM tx_attempts WHERE op_id = $1",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(count, 2);
    assert!(
        fees[1].parse::<u128>()? > fees[0].parse::<u128>()?,
        "{fees:?}"
    );
    node.mine(1).await?;
    assert_eq!(watcher.tick(64).await.confirmed, 0, "included, not final");
    node.mine(CONFIRMATIONS - 1).await?;
    assert_eq!(
        watcher.tick(64).await.confirmed,
        1,
        "confirmed through the bump's receipt"
    );
    assert_eq!(stack.state(&w.withdrawal_id).await?, "CONFIRMED");
    assert_eq!(
        node.balance(BOB).await? - before,
        8_000_000_000_000_000,
        "paid once"
    );
    assert_eq!(
        node.nonce(opledger_tests::signer::HOT_WALLET, "latest")
            .await?,
        1
    );
    assert!(
        broadcaster.bump_stuck(NETWORK, 0, 64).await.is_empty(),
        "nothing stuck any more"
    );
    stack.assert_invariants().await
}

/// The withdrawal is still BROADCAST with its 0.005 ETH held.
async fn unsettled(stack: &Stack, acme: &opledger_tests::Tenant, op: &str) -> anyhow::Result<()> {
    assert_eq!(stack.state(op).await?, "BROADCAST");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        5_000_000_000_000_000,
        "hold kept"
    );
    Ok(())
}

#[tokio::test]
async fn the_watcher_settles_nothing_while_one_of_its_two_endpoints_lies_or_lags()
-> anyhow::Result<()> {
    use opledger_testkit::{RpcMode, RpcProxy};
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let (honest, liar) = (
        RpcProxy::start(&node.rpc_url()).await?,
        RpcProxy::start(&node.rpc_url()).await?,
    );
    let mut cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    cfg.chain.evidence.insert(
        opledger_tests::signer::NETWORK.to_owned(),
        opledger_tests::chain::evidence(&[&honest.url(), &liar.url()], 2),
    );
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    // A chain long enough for a lag of 20 blocks to be one.
    node.mine(30).await?;
    let w = stack.withdraw(&acme, "5000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    // Final on the chain (automine included it, two more blocks), but one endpoint is a block
    // behind: within the lag window that pins the lower block, where it is not final yet.
    node.mine(CONFIRMATIONS - 1).await?;
    liar.set_mode(RpcMode::Lag(1));
    assert_eq!(watcher.tick(64).await.confirmed, 0, "a block behind");
    unsettled(&stack, &acme, &w.withdrawal_id).await?;
    // Then it hides the receipt, names another fork's block, lags beyond the window.
    for mode in [
        RpcMode::HideReceipts,
        RpcMode::ForkedReceipts,
        RpcMode::Lag(20),
    ] {
        liar.set_mode(mode);
        node.mine(1).await?;
        assert_eq!(watcher.tick(64).await.confirmed, 0, "{mode:?}");
        unsettled(&stack, &acme, &w.withdrawal_id).await?;
    }
    let metrics = opledger_chain::evidence::no_evidence().render("broadcaster");
    // The liar's answers are left out (too few remain for the quorum), the laggard's too far
    // behind.
    for reason in ["too_few_answers", "lag"] {
        assert!(
            metrics.contains(&format!("reason=\"{reason}\"")),
            "{reason}: {metrics}"
        );
    }
    liar.set_mode(RpcMode::Honest);
    node.mine(1).await?;
    assert_eq!(watcher.tick(64).await.confirmed, 1, "both agree: settled");
    stack.assert_invariants().await
}

#[tokio::test]
async fn of_two_watchers_on_one_database_one_watches_and_the_other_takes_over_when_it_ends()
-> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let first = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let second = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let w = stack.withdraw(&acme, "5000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    node.mine(1).await?;
    assert_eq!(
        first.tick(64).await.new_heads,
        1,
        "the first takes the lease"
    );
    assert!(first.leads(NETWORK));
    // The second reads nothing, from the chain or the store, while the first holds it.
    for _ in 0..3 {
        assert_eq!(
            second.tick(64).await,
            opledger_broadcaster::watcher::Pass::default()
        );
        assert!(!second.leads(NETWORK), "a standby does not fee-bump either");
    }
    node.mine(1).await?;
    assert_eq!(second.tick(64).await.confirmed, 0);
    assert_eq!(first.tick(64).await.confirmed, 1);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "CONFIRMED");

    // The first ends (its session with it): the second watches from its next pass.
    drop(first);
    let next = stack.withdraw(&acme, "6000000000000000", BOB).await?;
    approve(&stack, &acme, &next).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    node.mine(2).await?;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut confirmed = 0;
    while confirmed == 0 {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the second watcher never took over"
        );
        confirmed = second.tick(64).await.confirmed;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(second.leads(NETWORK));
    assert_eq!(stack.state(&next.withdrawal_id).await?, "CONFIRMED");
    assert_eq!(stack.entries(acme.id, "SETTLE").await?, 2);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_mined_cancel_relabelled_as_a_fee_bump_goes_to_security_not_to_settlement()
-> anyhow::Result<()> {
    use opledger_proto::v1::{AttemptKind, SignReplacementRequest};
    use opledger_tests::signer::{CALLER_TOKEN, client};
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    node.set_automine(false).await?;
    let paid_before = node.balance(BOB).await?;
    let cfg = broadcaster_config(&stack, &signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let w = stack.withdraw(&acme, "5000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    assert_eq!(
        broadcaster.tick(64, 8).await,
        1,
        "the transfer is in the pool"
    );
    // Our cancel, signed and sent: it replaces the transfer in the pool.
    stack.force_state(&w.withdrawal_id, "UNKNOWN").await?;
    let cancel = client(signer.addr)
        .await?
        .sign_replacement(opledger_tests::authed(
            CALLER_TOKEN,
            SignReplacementRequest {
                tenant_id: acme.id.to_string(),
                withdrawal_id: w.withdrawal_id.clone(),
                kind: AttemptKind::Cancel as i32,
            },
        ))
        .await?
        .into_inner()
        .attempt
        .ok_or_else(|| anyhow::anyhow!("no cancel"))?;
    node.send_raw_transaction(&cancel.raw_transaction).await?;
    // The database owner relabels the cancel as a fee bump (a transfer), bypassing the row's
    // triggers, and puts the withdrawal back to BROADCAST: read by its stored kind, the mined
    // cancel would be settled as the payout.
    stack
        .relabel_attempt(&w.withdrawal_id, 2, "FEE_BUMP")
        .await?;
    stack.force_state(&w.withdrawal_id, "BROADCAST").await?;
    node.mine(CONFIRMATIONS).await?;
    let pass = watcher.tick(64).await;
    assert_eq!((pass.confirmed, pass.escalated), (0, 1));
    let (state, owner, reason) = stack.ending(&w.withdrawal_id).await?;
    assert_eq!(
        (state.as_str(), owner.as_str(), reason.as_str()),
        ("FAILED_TERMINAL", "security", "ATTEMPT_CONTENT_MISMATCH")
    );
    let (events,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM security_events WHERE kind = 'ATTEMPT_CONTENT_MISMATCH'",
    )
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(events, 1);
    // Nothing settled, the hold kept, the recipient unpaid.
    assert_eq!(stack.entries(acme.id, "SETTLE").await?, 0);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        5_000_000_000_000_000,
        "hold kept"
    );
    assert_eq!(node.balance(BOB).await?, paid_before);
    node.mine(1).await?;
    assert_eq!(
        watcher.tick(64).await.confirmed,
        0,
        "and not on a later pass"
    );
    Ok(())
}
