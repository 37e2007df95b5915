//! Evidence that cannot mislead, at real depth (three confirmations): endpoints that disagree or
//! lag give no verdict; a nonce consumed without any of our attempts is an anomaly for security,
//! never a release; a reverted transfer goes to an owner and is released only by a resolution the
//! evidence supports.

use opledger_domain::state::OperationState;
use opledger_proto::v1::CreateWithdrawalRequest;
use opledger_reconciler::Finding;
use opledger_store::broadcast::{Due, Unresolved};
use opledger_testkit::{
    Anvil, DEV_KEYS, FaultMode, FaultProxy, RpcMode, RpcProxy, deploy_test_token,
};
use opledger_tests::chain::{
    CONFIRMATIONS, Chain, broadcaster_config, evidence, reconciler_config, witness,
};
use opledger_tests::signer::{HOT_WALLET, InProcessSigner, NETWORK, TOKEN, approve, attempts};
use opledger_tests::{BOB, Stack, Tenant, authed, new_key, payload};

/// Signs and submits `w` through a proxy that loses the node's answer: UNKNOWN, its transfer
/// accepted by the node.
async fn submit_losing_the_answer(chain: &Chain, w: &str) -> anyhow::Result<()> {
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", chain.node.port()).parse()?).await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&chain.stack, &chain.signer, &proxy.url("http")),
        chain.stack.admin.broadcaster(),
    )?;
    proxy.set_mode(FaultMode::ForwardThenDropResponse);
    broadcaster
        .handle(&Due {
            tenant_id: chain.acme.id,
            op_id: w.parse()?,
            state: OperationState::Approved,
            network: NETWORK.into(),
        })
        .await?;
    anyhow::ensure!(chain.stack.state(w).await? == "UNKNOWN", "not UNKNOWN");
    Ok(())
}

async fn held(stack: &Stack, tenant: &Tenant, asset: &str) -> anyhow::Result<u128> {
    Ok(stack.balance(tenant.id, "treasury", asset).await?.1)
}

#[tokio::test]
async fn endpoints_that_disagree_or_lag_give_no_verdict_until_they_agree() -> anyhow::Result<()> {
    let chain = Chain::start().await?;
    let (honest, other) = (
        RpcProxy::start(&chain.node.rpc_url()).await?,
        RpcProxy::start(&chain.node.rpc_url()).await?,
    );
    let mut cfg = reconciler_config(&chain.stack, &chain.signer, &chain.node.rpc_url());
    cfg.chain.evidence.insert(
        NETWORK.to_owned(),
        evidence(&[&honest.url(), &other.url()], 2),
    );
    let reconciler = opledger_reconciler::reconciler(&cfg, chain.stack.admin.reconciler())?;
    // A chain long enough for a lag of 20 blocks to be one (below that, a lagging endpoint is an
    // honest one at a lower pinned block).
    chain.node.mine(30).await?;
    let w = chain
        .stack
        .withdraw(&chain.acme, "5000000000000000", BOB)
        .await?;
    approve(&chain.stack, &chain.acme, &w).await?;
    submit_losing_the_answer(&chain, &w.withdrawal_id).await?;
    chain.node.mine(CONFIRMATIONS - 1).await?;
    // The transfer is final on the chain, but one of the two endpoints says otherwise each time.
    for mode in [
        RpcMode::HideReceipts,
        RpcMode::Lag(20),
        RpcMode::ForkedReceipts,
        RpcMode::RewriteNonce(1),
        RpcMode::Down,
    ] {
        other.set_mode(mode);
        assert_eq!(
            reconciler.tick(0, 64).await,
            vec![Finding::NoVerdict],
            "{mode:?}"
        );
        assert_eq!(chain.stack.state(&w.withdrawal_id).await?, "UNKNOWN");
        assert_eq!(
            held(&chain.stack, &chain.acme, "ETH").await?,
            5_000_000_000_000_000
        );
        assert_eq!(
            attempts(&chain.stack, &w.withdrawal_id).await?,
            1,
            "no cancel either"
        );
    }
    let metrics = opledger_chain::evidence::no_evidence().render("reconciler");
    for reason in ["disagreement", "lag", "too_few_answers"] {
        assert!(
            metrics.contains(&format!("network=\"{NETWORK}\",reason=\"{reason}\"")),
            "{metrics}"
        );
    }
    // Both agree: the settlement.
    other.set_mode(RpcMode::Honest);
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::Confirmed]);
    assert_eq!(held(&chain.stack, &chain.acme, "ETH").await?, 0);
    chain.stack.assert_invariants().await
}

#[tokio::test]
async fn a_final_cancel_is_not_released_while_an_endpoint_hides_it() -> anyhow::Result<()> {
    let chain = Chain::start().await?;
    chain.node.set_automine(false).await?;
    let (honest, other) = (
        RpcProxy::start(&chain.node.rpc_url()).await?,
        RpcProxy::start(&chain.node.rpc_url()).await?,
    );
    let mut cfg = reconciler_config(&chain.stack, &chain.signer, &chain.node.rpc_url());
    cfg.chain.evidence.insert(
        NETWORK.to_owned(),
        evidence(&[&honest.url(), &other.url()], 2),
    );
    let reconciler = opledger_reconciler::reconciler(&cfg, chain.stack.admin.reconciler())?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&chain.stack, &chain.signer, &chain.node.rpc_url()),
        chain.stack.admin.broadcaster(),
    )?;
    let w = chain
        .stack
        .withdraw(&chain.acme, "7000000000000000", BOB)
        .await?;
    approve(&chain.stack, &chain.acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    let (hash,): (String,) =
        sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(chain.stack.admin.pool())
            .await?;
    assert!(chain.node.drop_transaction(&hash).await?);
    chain.node.mine(1).await?;
    assert!(matches!(
        reconciler.tick(0, 64).await.as_slice(),
        [Finding::CancelSubmitted(_)]
    ));
    chain.node.mine(CONFIRMATIONS).await?;
    other.set_mode(RpcMode::HideReceipts);
    for _ in 0..2 {
        assert_eq!(reconciler.tick(0, 64).await, vec![Finding::NoVerdict]);
        assert_eq!(chain.stack.state(&w.withdrawal_id).await?, "UNKNOWN");
        assert_eq!(
            held(&chain.stack, &chain.acme, "ETH").await?,
            7_000_000_000_000_000
        );
    }
    other.set_mode(RpcMode::Honest);
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::AwaitingWitness]);
    // The witness reads through the same two endpoints: while one hides the cancel, it attests
    // nothing either.
    let witness = witness(&chain.stack, &[&honest.url(), &other.url()], 2).await?;
    other.set_mode(RpcMode::HideReceipts);
    assert_eq!(
        witness.tick(64).await,
        vec![opledger_witness::Outcome::NoVerdict]
    );
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::NoVerdict]);
    assert_eq!(chain.stack.state(&w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(
        held(&chain.stack, &chain.acme, "ETH").await?,
        7_000_000_000_000_000
    );
    other.set_mode(RpcMode::Honest);
    assert_eq!(
        witness.tick(64).await,
        vec![opledger_witness::Outcome::Attested]
    );
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::VerifiedNotSent]);
    assert_eq!(held(&chain.stack, &chain.acme, "ETH").await?, 0);
    chain.stack.assert_invariants().await
}

#[tokio::test]
async fn a_nonce_consumed_without_our_attempt_goes_to_security_with_the_hold() -> anyhow::Result<()>
{
    let chain = Chain::start().await?;
    chain.node.set_automine(false).await?;
    let reconciler = opledger_reconciler::reconciler(
        &reconciler_config(&chain.stack, &chain.signer, &chain.node.rpc_url()),
        chain.stack.admin.reconciler(),
    )?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&chain.stack, &chain.signer, &chain.node.rpc_url()),
        chain.stack.admin.broadcaster(),
    )?;
    let before = chain.node.balance(BOB).await?;
    let w = chain
        .stack
        .withdraw(&chain.acme, "7000000000000000", BOB)
        .await?;
    approve(&chain.stack, &chain.acme, &w).await?;
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    let (hash,): (String,) =
        sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(chain.stack.admin.pool())
            .await?;
    assert!(chain.node.drop_transaction(&hash).await?);
    // The hot wallet's key signs something we never persisted, at our nonce (a compromised key).
    chain
        .node
        .send_transaction(serde_json::json!({
            "from": HOT_WALLET, "to": DEV_KEYS[1].0, "value": "0x1", "nonce": "0x0"
        }))
        .await?;
    chain.node.mine(CONFIRMATIONS).await?;
    assert_eq!(chain.node.nonce(HOT_WALLET, "latest").await?, 1);
    // The old decision released the hold here ("nonce consumed by another transaction").
    assert_eq!(
        reconciler.tick(0, 64).await,
        vec![Finding::Escalated("NONCE_MOVED_WITHOUT_OUR_ATTEMPT")]
    );
    assert_eq!(
        chain.stack.state(&w.withdrawal_id).await?,
        "FAILED_TERMINAL"
    );
    assert_eq!(
        held(&chain.stack, &chain.acme, "ETH").await?,
        7_000_000_000_000_000
    );
    let (owner,): (String,) = sqlx::query_as("SELECT owner FROM escalations WHERE op_id = $1")
        .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(chain.stack.admin.pool())
        .await?;
    assert_eq!(owner, "security");
    let (events,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM security_events WHERE kind = 'NONCE_MOVED_WITHOUT_OUR_ATTEMPT'",
    )
    .fetch_one(chain.stack.admin.pool())
    .await?;
    assert_eq!(events, 1);
    // What the security team's paging alert (OpledgerSecurityEscalation) reads.
    let gauges = chain.stack.admin.metrics_snapshot().await?.to_prometheus();
    assert!(
        gauges.contains(
            "opledger_open_escalations{owner=\"security\",reason=\"NONCE_MOVED_WITHOUT_OUR_ATTEMPT\"} 1"
        ),
        "{gauges}"
    );
    // No resolution releases it either: that needs evidence from outside the chain.
    let op = Unresolved {
        tenant_id: chain.acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::FailedTerminal,
        network: NETWORK.into(),
    };
    let refused = reconciler
        .resolve(&op, OperationState::VerifiedNotSent, "op-1", "looks unsent")
        .await
        .expect_err("a moved nonce is not proof");
    assert!(
        refused.to_string().contains("none of our attempts"),
        "{refused}"
    );
    assert_eq!(
        held(&chain.stack, &chain.acme, "ETH").await?,
        7_000_000_000_000_000
    );
    assert_eq!(chain.node.balance(BOB).await?, before);
    chain.stack.assert_invariants().await
}

#[tokio::test]
async fn a_reverted_transfer_has_an_owner_and_is_released_only_on_final_evidence()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "USDC", "1000000000").await?;
    let node = Anvil::start().await?;
    // The hot wallet deploys the token (its nonce 0) holding only 10 units: a transfer of 500
    // reverts on chain.
    assert_eq!(deploy_test_token(&node, 10).await?, TOKEN);
    let signer = InProcessSigner::start_at_nonce(&stack.db, acme.id, 1).await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &node.rpc_url()),
        stack.admin.broadcaster(),
    )?;
    let reconciler = opledger_reconciler::reconciler(
        &reconciler_config(&stack, &signer, &node.rpc_url()),
        stack.admin.reconciler(),
    )?;
    let mut p = payload("500", BOB);
    p.asset = "USDC".into();
    let w = stack
        .client()
        .await?
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
    assert_eq!(broadcaster.tick(64, 8).await, 1);
    // Automine includes it, but its receipt can lag the answer: wait for it.
    let (hash,): (String,) =
        sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    let receipt = node
        .wait_receipt(&hash, std::time::Duration::from_secs(10))
        .await?;
    assert_eq!(receipt["status"], "0x0", "the transfer reverted on chain");
    let op = Unresolved {
        tenant_id: acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::Broadcast,
        network: NETWORK.into(),
    };
    // Included and reverted, not final: nobody decides yet.
    assert_eq!(reconciler.tick(0, 64).await, vec![Finding::Waiting]);
    node.mine(CONFIRMATIONS - 1).await?;
    assert_eq!(
        reconciler.tick(0, 64).await,
        vec![Finding::Escalated("REVERTED")]
    );
    assert_eq!(stack.state(&w.withdrawal_id).await?, "FAILED_TERMINAL");
    assert_eq!(
        held(&stack, &acme, "USDC").await?,
        500,
        "hold kept for the owner"
    );
    // Its owner and reason, and what the owner's paging alert (OpledgerFailedTerminalWithdrawal,
    // by owner) reads.
    let (state, owner, reason) = stack.ending(&w.withdrawal_id).await?;
    assert_eq!(
        (state.as_str(), owner.as_str(), reason.as_str()),
        ("FAILED_TERMINAL", "payments-operations", "REVERTED")
    );
    let gauges = stack.admin.metrics_snapshot().await?.to_prometheus();
    assert!(
        gauges.contains(
            "opledger_open_escalations{owner=\"payments-operations\",reason=\"REVERTED\"} 1"
        ),
        "{gauges}"
    );
    let op = Unresolved {
        state: OperationState::FailedTerminal,
        ..op
    };
    let refused = reconciler
        .resolve(&op, OperationState::Confirmed, "op-1", "paid?")
        .await
        .expect_err("a reverted transfer paid nobody");
    assert!(refused.to_string().contains("reverted"), "{refused}");
    // The operator's resolution is a proposal: the hold stays until the witness, reading the
    // chain itself, attests the same reverted attempt in the same block.
    let release = || {
        reconciler.resolve(
            &op,
            OperationState::VerifiedNotSent,
            "op-1",
            "reverted: nothing moved",
        )
    };
    let waiting = release().await.expect_err("not witnessed yet");
    assert!(
        matches!(
            waiting,
            opledger_reconciler::reconcile::ReconcileError::AwaitingWitness
        ),
        "{waiting}"
    );
    assert_eq!(stack.state(&w.withdrawal_id).await?, "FAILED_TERMINAL");
    assert_eq!(
        held(&stack, &acme, "USDC").await?,
        500,
        "held until witnessed"
    );
    let witness = witness(&stack, &[&node.rpc_url()], 1).await?;
    assert_eq!(
        witness.tick(64).await,
        vec![opledger_witness::Outcome::Attested]
    );
    let done = release().await?;
    assert_eq!(done, OperationState::VerifiedNotSent);
    assert_eq!(
        stack.balance(acme.id, "treasury", "USDC").await?,
        (1_000_000_000, 0),
        "released once"
    );
    stack.assert_invariants().await
}
