//! The path without faults, and two executors at once.

use opledger_tests::Stack;
use opledger_tests::custodian::{Sim, approved_withdrawal, books, drive_until, executor, state};
use serde_json::json;
use std::time::Duration;

const AMOUNT: &str = "1000000000000000";

#[tokio::test]
async fn an_approved_withdrawal_is_requested_once_under_our_reference_and_paid_once()
-> anyhow::Result<()> {
    let sim = Sim::start(json!({"seed": 1, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    let (w, destination) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 5)?]).await?;
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["BROADCAST", "CONFIRMED"],
        Duration::from_secs(20),
    )
    .await?;

    // The request was stored before the call, bound to the approved payload, and sent once.
    let (body, sha, hash_ok, sends): (Vec<u8>, Vec<u8>, bool, i64) = sqlx::query_as(
        "SELECT q.body, q.body_sha256, q.payload_hash = o.payload_hash, \
           (SELECT count(*) FROM custodian_sends s WHERE s.op_id = q.op_id) \
         FROM custodian_requests q JOIN withdrawal_ops o USING (tenant_id, op_id) \
         WHERE q.op_id = $1::uuid",
    )
    .bind(&w.withdrawal_id)
    .fetch_one(stack.admin.pool())
    .await?;
    assert!(hash_ok);
    assert_eq!(sends, 1);
    let sent: serde_json::Value = serde_json::from_slice(&body)?;
    assert_eq!(sent["externalTxId"], w.withdrawal_id.as_str());
    assert_eq!(
        sent["destination"]["oneTimeAddress"]["address"],
        destination.as_str()
    );
    assert_eq!(sent["amount"], "0.001");
    assert_eq!(sha.len(), 32);

    // The double paid it once, on chain, from its wallet, to the approved destination.
    let transfers = sim.transfers_of(&w.withdrawal_id).await?;
    assert_eq!(transfers.len(), 1, "{transfers:?}");
    assert_eq!(transfers[0]["destination"], destination.as_str());
    assert_eq!(transfers[0]["amount_wei"], AMOUNT);
    // Followed: the provider's records of our reference are stored until one names the
    // transaction; on a network this executor does not watch, the provider's COMPLETED record
    // settles the hold.
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["CONFIRMED"],
        Duration::from_secs(20),
    )
    .await?;
    let (hash, hold): (String, String) = sqlx::query_as(
        "SELECT r.tx_hash, (SELECT status FROM ledger_holds WHERE op_id = $1::uuid) \
         FROM custodian_records r WHERE r.op_id = $1::uuid AND r.tx_hash IS NOT NULL \
         ORDER BY r.record_id DESC LIMIT 1",
    )
    .bind(&w.withdrawal_id)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(transfers[0]["hash"], hash.as_str());
    assert_eq!(hold, "SETTLED");
    stack.assert_invariants().await
}

#[tokio::test]
async fn two_executors_on_the_same_withdrawals_send_each_once() -> anyhow::Result<()> {
    let sim = Sim::start(json!({"seed": 2, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(
            approved_withdrawal(&stack, &acme, AMOUNT)
                .await?
                .0
                .withdrawal_id,
        );
    }
    let one = executor(&stack, "executor-1", vec![sim.account(&acme, 5)?]).await?;
    let two = executor(&stack, "executor-2", vec![sim.account(&acme, 5)?]).await?;
    for _ in 0..20 {
        tokio::join!(one.pass(16, 4), two.pass(16, 4));
        let mut done = 0;
        for id in &ids {
            if state(&stack, id).await? == "BROADCAST" {
                done += 1;
            }
        }
        if done == ids.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for id in &ids {
        assert_eq!(state(&stack, id).await?, "BROADCAST");
        let (sends,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM custodian_sends WHERE op_id = $1::uuid")
                .bind(id)
                .fetch_one(stack.admin.pool())
                .await?;
        assert_eq!(sends, 1, "sent once");
        assert_eq!(sim.transfers_of(id).await?.len(), 1, "paid once");
    }
    stack.assert_invariants().await
}

#[tokio::test]
async fn an_approval_forged_with_the_approvals_login_is_never_sent_to_the_custodian()
-> anyhow::Result<()> {
    let sim = Sim::start(json!({"seed": 3, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    // A second withdrawal, moved to APPROVED by the approvals service's login with no signed
    // decision at all (what its grants allow).
    let forged = opledger_tests::custodian::requested_withdrawal(&stack, &acme, AMOUNT).await?;
    let approvals = stack
        .db
        .pool_as(opledger_testkit::ServiceRole::Approvals)
        .await?;
    let moved = sqlx::query(
        "UPDATE withdrawal_ops SET state = 'APPROVED', last_actor = 'approvals', \
           last_actor_id = 'attacker', last_reason = 'forged', version = version + 1, \
           updated_at = now() WHERE op_id = $1::uuid AND state = 'REQUESTED'",
    )
    .bind(&forged)
    .execute(&approvals)
    .await?;
    assert_eq!(moved.rows_affected(), 1);
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 5)?]).await?;
    drive_until(
        &stack,
        &[&executor],
        &forged,
        &["FAILED_TERMINAL"],
        Duration::from_secs(20),
    )
    .await?;
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["BROADCAST", "CONFIRMED"],
        Duration::from_secs(20),
    )
    .await?;
    let (requests, events, owner): (i64, i64, String) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM custodian_requests WHERE op_id = $1::uuid), \
           (SELECT count(*) FROM security_events WHERE op_id = $1::uuid \
              AND kind = 'CUSTODIAN_APPROVALS_NOT_VERIFIED'), \
           (SELECT owner FROM escalations WHERE op_id = $1::uuid)",
    )
    .bind(&forged)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!((requests, events, owner.as_str()), (0, 1, "security"));
    assert!(sim.transfers_of(&forged).await?.is_empty(), "nothing sent");
    assert_eq!(sim.transfers_of(&w.withdrawal_id).await?.len(), 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_watched_network_settles_only_from_the_chain_at_final_depth_with_the_inclusion()
-> anyhow::Result<()> {
    let sim = Sim::start(json!({"seed": 4, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 5)?])
        .await?
        .with_chains(opledger_tests::custodian::chains(&sim)?);
    // Paid and COMPLETED at the provider, but one block deep: not final, not settled.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sim.transfers_of(&w.withdrawal_id).await?.is_empty() {
        executor.pass(16, 4).await;
        anyhow::ensure!(std::time::Instant::now() < deadline, "never paid");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..5 {
        executor.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "BROADCAST");
    // Two more blocks: final at 3 confirmations.
    sim.anvil()?.mine(2).await?;
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["CONFIRMED"],
        Duration::from_secs(20),
    )
    .await?;
    let transfer = &sim.transfers_of(&w.withdrawal_id).await?[0];
    let receipt = sim
        .anvil()?
        .receipt(transfer["hash"].as_str().unwrap_or_default())
        .await?
        .ok_or_else(|| anyhow::anyhow!("no receipt"))?;
    let (tx_hash, block_hash): (String, String) = sqlx::query_as(
        "SELECT tx_hash, block_hash FROM inclusions WHERE op_id = $1::uuid AND reorged_at IS NULL",
    )
    .bind(&w.withdrawal_id)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(Some(tx_hash.as_str()), transfer["hash"].as_str());
    assert_eq!(Some(block_hash.as_str()), receipt["blockHash"].as_str());
    stack.assert_invariants().await
}

/// While the evidence of its chain has no agreement, an approved withdrawal is neither claimed nor
/// sent (the bound its payout must come after cannot be read), the readings are counted
/// (`opledger_evidence_no_verdict_total{service="custodian"}`) and its network is held back from
/// the queue; once the endpoint answers again it is sent, once, and settles from the chain.
#[tokio::test]
async fn without_evidence_of_its_chain_an_approved_withdrawal_is_not_sent() -> anyhow::Result<()> {
    use opledger_testkit::{RpcMode, RpcProxy};
    let sim = Sim::start(json!({"seed": 5, "rules": []}), 0).await?;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let node = RpcProxy::start(&sim.anvil()?.rpc_url()).await?;
    node.set_mode(RpcMode::Down);
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 5)?])
        .await?
        .with_chains(opledger_tests::custodian::chains_at(&node.url())?);
    for _ in 0..4 {
        executor.pass(16, 4).await;
    }
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "APPROVED");
    let before = books(&stack, &w.withdrawal_id).await?;
    assert_eq!(before.sends, 0, "{before:?}");
    assert!(sim.requests().await?.is_empty());
    let metrics = opledger_chain::evidence::no_evidence().render("custodian");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("opledger_evidence_no_verdict_total{")
                && l.contains("service=\"custodian\"")
                && l.contains("network=\"anvil\"")
                && !l.ends_with(" 0")),
        "{metrics}"
    );

    // Held back, it takes no place in the executor's queue.
    let login = opledger_store::Store::connect(
        &stack.url(opledger_testkit::ServiceRole::Custodian),
        opledger_store::StoreConfig::default(),
    )
    .await
    .map_err(|e| anyhow::anyhow!(e.log_safe()))?
    .custodian();
    let queued = |held: Vec<String>| {
        let login = login.clone();
        async move { anyhow::Ok(login.custodian_due(Duration::ZERO, 16, &held).await?.len()) }
    };
    assert_eq!(queued(Vec::new()).await?, 1);
    assert_eq!(queued(vec!["anvil".to_owned()]).await?, 0);

    node.set_mode(RpcMode::Honest);
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["BROADCAST", "CONFIRMED"],
        Duration::from_secs(20),
    )
    .await?;
    sim.mined_transfer(&w.withdrawal_id, Duration::from_secs(20))
        .await?;
    sim.anvil()?.mine(3).await?;
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["CONFIRMED"],
        Duration::from_secs(20),
    )
    .await?;
    assert_eq!(books(&stack, &w.withdrawal_id).await?.sends, 1);
    stack.assert_invariants().await
}
