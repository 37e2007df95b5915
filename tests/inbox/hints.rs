//! A webhook about a self-signed transfer is a hint, never a settlement. The adversary holds one
//! custodian endpoint's secret (it signs whatever `transfer.status` it likes) or the inbox
//! service's own database login; neither can move a withdrawal, settle its hold or record an
//! inclusion. A verified `transfer.status` naming one of the withdrawal's transfer attempts only
//! leaves one `watch_hints` row for the watcher, which settles on chain evidence at final depth.

use opledger_domain::ids::OperationId;
use opledger_domain::state::{Actor, OperationState};
use opledger_proto::v1::{AttemptKind, SignReplacementRequest};
use opledger_store::transition::TransitionRequest;
use opledger_testkit::ServiceRole;
use opledger_tests::inbox::{World, event_id, transfer_status};
use opledger_tests::signer::{CALLER_TOKEN, InProcessSigner, approve, client, sign_request};
use opledger_tests::{ALICE, authed};

/// A custodian endpoint that may send `transfer.status`, and a withdrawal of 100 from a funded
/// treasury (900 available, 100 held), approved and signed by an in-process signer.
pub(crate) struct Signed {
    pub(crate) world: World,
    pub(crate) signer: InProcessSigner,
    pub(crate) op: String,
    pub(crate) tx_hash: String,
}

pub(crate) async fn signed() -> anyhow::Result<Signed> {
    let world = World::start("custodian", &["transfer.status"]).await?;
    let stack = &world.stack;
    stack.fund(&world.acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&world.acme, "100", ALICE).await?;
    approve(stack, &world.acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, world.acme.id).await?;
    let tx_hash = sign(&world, &signer, &w.withdrawal_id).await?;
    assert_eq!(stack.state(&w.withdrawal_id).await?, "SIGNED");
    assert_eq!(world.treasury().await?, (900, 100));
    Ok(Signed {
        world,
        signer,
        op: w.withdrawal_id,
        tx_hash,
    })
}

/// Signs `op` (APPROVED) and returns its original attempt's hash.
pub(crate) async fn sign(
    world: &World,
    signer: &InProcessSigner,
    op: &str,
) -> anyhow::Result<String> {
    let signed = client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(world.acme.id, op))
        .await?
        .into_inner();
    let attempt = signed
        .attempt
        .ok_or_else(|| anyhow::anyhow!("no attempt"))?;
    Ok(attempt.tx_hash)
}

/// Signs a replacement of `op` and returns its hash.
async fn replace(s: &Signed, kind: AttemptKind) -> anyhow::Result<String> {
    let signed = client(s.signer.addr)
        .await?
        .sign_replacement(authed(
            CALLER_TOKEN,
            SignReplacementRequest {
                tenant_id: s.world.acme.id.to_string(),
                withdrawal_id: s.op.clone(),
                kind: kind as i32,
            },
        ))
        .await?
        .into_inner();
    let attempt = signed
        .attempt
        .ok_or_else(|| anyhow::anyhow!("no attempt"))?;
    anyhow::ensure!(attempt.kind == kind as i32, "signed as another kind");
    Ok(attempt.tx_hash)
}

/// Moves `op` as the broadcaster would (setup, on the owner's connection).
async fn broadcaster_moves(
    world: &World,
    op: &str,
    from: OperationState,
    to: OperationState,
) -> anyhow::Result<()> {
    let request = TransitionRequest::new(
        world.acme.id,
        op.parse::<OperationId>()?,
        from,
        to,
        Actor::Broadcaster,
        "test-broadcaster",
        "moved by the test",
    );
    world
        .stack
        .admin
        .transition(&request)
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok(())
}

/// The operations with a watch hint for the tenant.
pub(crate) async fn hinted(world: &World) -> anyhow::Result<Vec<String>> {
    let rows: Vec<(uuid::Uuid,)> =
        sqlx::query_as("SELECT op_id FROM watch_hints WHERE tenant_id = $1 ORDER BY op_id")
            .bind(world.acme.id.as_uuid())
            .fetch_all(world.stack.admin.pool())
            .await?;
    Ok(rows.into_iter().map(|(op,)| op.to_string()).collect())
}

/// Nothing a webhook could have settled: the hold is open (900 available, 100 held), no hold was
/// ever settled, no inclusion is recorded, the webhook processor moved nothing.
pub(crate) async fn assert_nothing_settled(world: &World) -> anyhow::Result<()> {
    assert_eq!(world.treasury().await?, (900, 100));
    assert_eq!(world.rows("ledger_holds", "AND status = 'OPEN'").await?, 1);
    assert_eq!(world.rows("ledger_holds", "AND status <> 'OPEN'").await?, 0);
    assert_eq!(world.rows("inclusions", "").await?, 0);
    assert_eq!(
        world
            .rows("operation_transitions", "AND actor = 'webhook_processor'")
            .await?,
        0
    );
    world.stack.assert_invariants().await
}

#[tokio::test]
async fn a_transfer_status_webhook_never_settles_a_self_signed_withdrawal() -> anyhow::Result<()> {
    let s = signed().await?;
    let world = &s.world;
    broadcaster_moves(
        world,
        &s.op,
        OperationState::Signed,
        OperationState::Broadcast,
    )
    .await?;
    // The endpoint's secret signs "confirmed" for the withdrawal's own transaction.
    let confirmed = transfer_status(&s.op, "confirmed", &s.tx_hash);
    assert_eq!(world.post(&confirmed).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    assert_eq!(world.outcomes().await?, ["DONE:HINTED"]);
    assert_eq!(world.stack.state(&s.op).await?, "BROADCAST");
    assert_eq!(hinted(world).await?, [s.op.as_str()]);
    assert_nothing_settled(world).await?;
    s.world.stop().await
}

#[tokio::test]
async fn a_transfer_status_naming_a_cancel_is_a_dead_letter() -> anyhow::Result<()> {
    let s = signed().await?;
    let world = &s.world;
    broadcaster_moves(
        world,
        &s.op,
        OperationState::Signed,
        OperationState::Broadcast,
    )
    .await?;
    let bump = replace(&s, AttemptKind::FeeBump).await?;
    broadcaster_moves(
        world,
        &s.op,
        OperationState::Broadcast,
        OperationState::Unknown,
    )
    .await?;
    let cancel = replace(&s, AttemptKind::Cancel).await?;

    // "confirmed" naming the cancel: a zero-value self-transfer is no news about the payout.
    assert_eq!(
        world
            .post(&transfer_status(&s.op, "confirmed", &cancel))
            .await?,
        200
    );
    world
        .wait_rows(
            "inbox_work",
            "AND status = 'DEAD' AND owner = 'payments-operations'",
            1,
        )
        .await?;
    assert_eq!(world.outcomes().await?, ["DEAD:NOT_A_TRANSFER_ATTEMPT"]);
    assert_eq!(hinted(world).await?, Vec::<String>::new());
    assert_eq!(world.stack.state(&s.op).await?, "UNKNOWN");
    assert_nothing_settled(world).await?;

    // The transfer attempts of the same withdrawal (the fee bump and the original) are hints.
    for hash in [&bump, &s.tx_hash] {
        assert_eq!(
            world
                .post(&transfer_status(&s.op, "confirmed", hash))
                .await?,
            200
        );
    }
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 2)
        .await?;
    assert_eq!(
        world.outcomes().await?,
        ["DEAD:NOT_A_TRANSFER_ATTEMPT", "DONE:HINTED", "DONE:HINTED"]
    );
    assert_eq!(hinted(world).await?, [s.op.as_str()]);
    assert_eq!(world.stack.state(&s.op).await?, "UNKNOWN");
    assert_nothing_settled(world).await?;
    s.world.stop().await
}

#[tokio::test]
async fn duplicate_and_reordered_transfer_status_webhooks_leave_one_hint() -> anyhow::Result<()> {
    let s = signed().await?;
    let world = &s.world;
    let confirmed = transfer_status(&s.op, "confirmed", &s.tx_hash);
    let broadcast = transfer_status(&s.op, "broadcast", &s.tx_hash);
    // "confirmed" before "broadcast", each delivered three times under its event id, and the
    // "confirmed" re-sent under a new event id: all at once, for two processors.
    let (first, second, resent) = (event_id(), event_id(), event_id());
    let mut deliveries = Vec::new();
    for _ in 0..3 {
        deliveries.push((first.clone(), confirmed.clone()));
        deliveries.push((second.clone(), broadcast.clone()));
    }
    deliveries.push((resent, confirmed.clone()));
    let answers =
        futures::future::join_all(deliveries.iter().map(|(id, body)| world.post_as(id, body)))
            .await;
    let (mut accepted, mut duplicates) = (0, 0);
    for answer in answers {
        let (status, text) = answer?;
        assert_eq!(status, 200, "{text}");
        accepted += usize::from(text.contains("\"accepted\""));
        duplicates += usize::from(text.contains("\"duplicate\""));
    }
    assert_eq!((accepted, duplicates), (3, 4));
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 3)
        .await?;
    assert_eq!(
        world.outcomes().await?,
        ["DONE:HINTED", "DONE:HINTED", "DONE:HINTED"]
    );
    assert_eq!(world.rows("inbox_work", "").await?, 3);
    assert_eq!(hinted(world).await?, [s.op.as_str()]);
    assert_eq!(world.stack.state(&s.op).await?, "SIGNED");
    assert_nothing_settled(world).await?;
    s.world.stop().await
}

/// True when `sql` (binding `$1` op, `$2` tenant) is refused with `insufficient_privilege`.
async fn refused(pool: &sqlx::PgPool, sql: &'static str, s: &Signed) -> anyhow::Result<bool> {
    let result = sqlx::query(sql)
        .bind(s.op.parse::<uuid::Uuid>()?)
        .bind(s.world.acme.id.as_uuid())
        .execute(pool)
        .await;
    Ok(match result {
        Ok(_) => false,
        Err(e) => e
            .as_database_error()
            .and_then(|d| d.code())
            .is_some_and(|code| code == "42501"),
    })
}

#[tokio::test]
async fn the_inbox_login_setting_a_broadcast_withdrawal_confirmed_is_refused_by_the_database()
-> anyhow::Result<()> {
    let s = signed().await?;
    let world = &s.world;
    let stack = &world.stack;
    let inbox = stack.db.pool_as(ServiceRole::Inbox).await?;
    // The webhook processor's former move, SIGNED -> BROADCAST, is gone from the database too.
    assert!(
        refused(
            &inbox,
            "UPDATE withdrawal_ops SET state = 'BROADCAST', last_actor = 'webhook_processor', \
             version = version + 1 WHERE op_id = $1 AND tenant_id = $2",
            &s,
        )
        .await?
    );
    broadcaster_moves(
        world,
        &s.op,
        OperationState::Signed,
        OperationState::Broadcast,
    )
    .await?;
    // BROADCAST -> CONFIRMED as is, as the webhook processor, and posing as the settling actors.
    for sql in [
        "UPDATE withdrawal_ops SET state = 'CONFIRMED' WHERE op_id = $1 AND tenant_id = $2",
        "UPDATE withdrawal_ops SET state = 'CONFIRMED', last_actor = 'webhook_processor', \
         version = version + 1 WHERE op_id = $1 AND tenant_id = $2",
        "UPDATE withdrawal_ops SET state = 'CONFIRMED', last_actor = 'chain_watcher', \
         version = version + 1 WHERE op_id = $1 AND tenant_id = $2",
        "UPDATE withdrawal_ops SET state = 'CONFIRMED', last_actor = 'reconciler', \
         version = version + 1 WHERE op_id = $1 AND tenant_id = $2",
        // An inclusion for the reorganization check to trust.
        "INSERT INTO inclusions (tenant_id, op_id, tx_hash, block_number, block_hash) \
         VALUES ($2, $1, 'forged', 1, 'forged')",
    ] {
        assert!(refused(&inbox, sql, &s).await?, "{sql}");
    }
    // The hold function it may call settles nothing while the withdrawal is BROADCAST.
    let (settled,): (bool,) = sqlx::query_as("SELECT opledger_resolve_hold($2, $1, 'SETTLE')")
        .bind(s.op.parse::<uuid::Uuid>()?)
        .bind(world.acme.id.as_uuid())
        .fetch_one(&inbox)
        .await?;
    assert!(!settled);
    assert_eq!(stack.state(&s.op).await?, "BROADCAST");
    assert_eq!(hinted(world).await?, Vec::<String>::new());
    assert_nothing_settled(world).await?;
    s.world.stop().await
}

#[tokio::test]
async fn the_watcher_reads_hinted_withdrawals_before_older_ones() -> anyhow::Result<()> {
    let s = signed().await?;
    let (world, stack) = (&s.world, &s.world.stack);
    broadcaster_moves(
        world,
        &s.op,
        OperationState::Signed,
        OperationState::Broadcast,
    )
    .await?;
    // Two newer withdrawals in flight; the newest gets a webhook.
    let mut newer = Vec::new();
    for _ in 0..2 {
        let w = stack.withdraw(&world.acme, "100", ALICE).await?;
        approve(stack, &world.acme, &w).await?;
        let tx_hash = sign(world, &s.signer, &w.withdrawal_id).await?;
        broadcaster_moves(
            world,
            &w.withdrawal_id,
            OperationState::Signed,
            OperationState::Broadcast,
        )
        .await?;
        newer.push((w.withdrawal_id, tx_hash));
    }
    let network = opledger_tests::signer::NETWORK;
    let order = |rows: &[opledger_store::broadcast::Watching]| -> Vec<String> {
        rows.iter().map(|w| w.op_id.to_string()).collect()
    };
    let oldest_first = order(
        &stack
            .admin
            .watching(network, 3)
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?,
    );
    assert_eq!(
        oldest_first,
        [s.op.clone(), newer[0].0.clone(), newer[1].0.clone()]
    );

    let (newest, newest_hash) = &newer[1];
    let status = transfer_status(newest, "confirmed", newest_hash);
    assert_eq!(world.post(&status).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    // With a pass of one, the hinted withdrawal is the one judged, not the oldest.
    let first = stack
        .admin
        .watching(network, 1)
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    assert_eq!(order(&first), [newest.as_str()]);
    assert!(first[0].hinted);
    let all = order(
        &stack
            .admin
            .watching(network, 3)
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?,
    );
    assert_eq!(all, [newest.clone(), s.op.clone(), newer[0].0.clone()]);
    s.world.stop().await
}
