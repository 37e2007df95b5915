//! Every state change goes through one function that checks the table, the actor and the row.

use futures::future::join_all;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState as S, TransitionError};
use opledger_store::StoreError;
use opledger_store::broadcast::Inclusion;
use opledger_store::transition::{LeaseGuard, TransitionRequest};
use opledger_testkit::ServiceRole;
use opledger_tests::{ALICE, Stack, authed, new_key, payload};
use std::time::Duration;

async fn requested_op(stack: &Stack) -> anyhow::Result<(opledger_tests::Tenant, OperationId)> {
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let created = client
        .create_withdrawal(authed(
            &acme.client,
            opledger_proto::v1::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(payload("100", ALICE)),
            },
        ))
        .await?
        .into_inner();
    let id = created.withdrawal.expect("w").withdrawal_id.parse()?;
    Ok((acme, id))
}

#[tokio::test]
async fn illegal_moves_and_wrong_actors_are_refused_before_the_database() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, op) = requested_op(&stack).await?;
    let illegal = TransitionRequest::new(
        acme.id,
        op,
        S::Requested,
        S::Signed,
        Actor::Signer,
        "w1",
        "skip",
    );
    assert!(matches!(
        stack.admin.transition(&illegal).await,
        Err(StoreError::Transition(TransitionError::Illegal { .. }))
    ));
    let wrong_actor = TransitionRequest::new(
        acme.id,
        op,
        S::Requested,
        S::Approved,
        Actor::Signer,
        "w1",
        "no",
    );
    assert!(matches!(
        stack.admin.transition(&wrong_actor).await,
        Err(StoreError::Transition(
            TransitionError::ActorNotAllowed { .. }
        ))
    ));
    // The right actor from the wrong state: the conditional update matches nothing.
    let stale = TransitionRequest::new(
        acme.id,
        op,
        S::Approved,
        S::Signing,
        Actor::Signer,
        "w1",
        "claim",
    );
    assert!(matches!(
        stack.admin.transition(&stale).await,
        Err(StoreError::Conflict {
            current: Some(S::Requested)
        })
    ));
    // A wrong payload hash predicate matches nothing either.
    let mut hashed = TransitionRequest::new(
        acme.id,
        op,
        S::Requested,
        S::Approved,
        Actor::Approvals,
        "a1",
        "ok",
    );
    hashed.expected_hash = Some(opledger_domain::payload::PayloadHash::from_bytes([7; 32]));
    assert!(matches!(
        stack.admin.transition(&hashed).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(
        stack.count("operation_transitions", acme.id).await?,
        1,
        "only the creation is logged"
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn sixteen_concurrent_claims_exactly_one_wins() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, op) = requested_op(&stack).await?;
    stack
        .admin
        .transition(&TransitionRequest::new(
            acme.id,
            op,
            S::Requested,
            S::Approved,
            Actor::Approvals,
            "a1",
            "approved",
        ))
        .await?;
    let workers: Vec<String> = (0..16).map(|i| format!("worker-{i}")).collect();
    let claims = workers.iter().map(|w| {
        let store = stack.admin.clone();
        async move {
            let mut claim = TransitionRequest::new(
                acme.id,
                op,
                S::Approved,
                S::Signing,
                Actor::Signer,
                w,
                "claim",
            );
            claim.lease_for = Some(Duration::from_secs(60));
            store.transition(&claim).await
        }
    });
    let results = join_all(claims).await;
    let winners = results.iter().filter(|r| r.is_ok()).count();
    let conflicts = results
        .iter()
        .filter(|r| {
            matches!(
                r,
                Err(StoreError::Conflict {
                    current: Some(S::Signing)
                })
            )
        })
        .count();
    assert_eq!((winners, conflicts), (1, 15));
    // Only the lease holder may finish the step.
    let winner = workers
        .iter()
        .zip(&results)
        .find_map(|(w, r)| r.is_ok().then_some(w.clone()))
        .expect("one winner");
    let loser = workers
        .iter()
        .find(|w| **w != winner)
        .expect("a loser")
        .clone();
    let mut by_loser = TransitionRequest::new(
        acme.id,
        op,
        S::Signing,
        S::Signed,
        Actor::Signer,
        &loser,
        "signed",
    );
    by_loser.lease_guard = LeaseGuard::HeldBy(&loser);
    assert!(matches!(
        stack.admin.transition(&by_loser).await,
        Err(StoreError::Conflict { .. })
    ));
    let mut by_winner = TransitionRequest::new(
        acme.id,
        op,
        S::Signing,
        S::Signed,
        Actor::Signer,
        &winner,
        "signed",
    );
    by_winner.lease_guard = LeaseGuard::HeldBy(&winner);
    let done = stack.admin.transition(&by_winner).await?;
    assert_eq!(done.version, 3);
    stack.assert_invariants().await
}

#[tokio::test]
async fn rejection_releases_the_hold_exactly_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, op) = requested_op(&stack).await?;
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    let reject = TransitionRequest::new(
        acme.id,
        op,
        S::Requested,
        S::Rejected,
        Actor::Approvals,
        "a1",
        "policy",
    );
    let results = join_all((0..8).map(|_| stack.admin.transition(&reject))).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (1000, 0));
    stack.assert_invariants().await
}

/// From REQUESTED to CONFIRMED, each move by its actor.
const TO_CONFIRMED: [(S, S, Actor); 5] = [
    (S::Requested, S::Approved, Actor::Approvals),
    (S::Approved, S::Signing, Actor::Signer),
    (S::Signing, S::Signed, Actor::Signer),
    (S::Signed, S::Broadcast, Actor::Broadcaster),
    (S::Broadcast, S::Confirmed, Actor::ChainWatcher),
];

/// Moves `op` along `path` through the store's transition function.
async fn walk(
    stack: &Stack,
    acme: &opledger_tests::Tenant,
    op: OperationId,
    path: &[(S, S, Actor)],
) -> anyhow::Result<()> {
    for &(from, to, actor) in path {
        stack
            .admin
            .transition(&TransitionRequest::new(
                acme.id, op, from, to, actor, "w", "step",
            ))
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn settle_and_reorg_reopen_keep_the_ledger_balanced() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, op) = requested_op(&stack).await?;
    walk(&stack, &acme, op, &TO_CONFIRMED).await?;
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (900, 0),
        "settled: the money left"
    );
    stack
        .admin
        .transition(&TransitionRequest::new(
            acme.id,
            op,
            S::Confirmed,
            S::Broadcast,
            Actor::ChainWatcher,
            "w",
            "reorg",
        ))
        .await?;
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (900, 100),
        "reorged: held again, never payable"
    );
    stack.assert_invariants().await?;
    stack
        .admin
        .transition(&TransitionRequest::new(
            acme.id,
            op,
            S::Broadcast,
            S::Confirmed,
            Actor::ChainWatcher,
            "w",
            "re-confirmed",
        ))
        .await?;
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 0));
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_reorged_payment_proven_unsent_is_released_once_without_breaking_invariants()
-> anyhow::Result<()> {
    // Found by the fault harness's soak: settled, reorganized away (reopened), the transfer gone
    // from the chain, its nonce consumed by a cancel: VERIFIED_NOT_SENT releases the hold.
    let stack = Stack::start().await?;
    let (acme, op) = requested_op(&stack).await?;
    walk(&stack, &acme, op, &TO_CONFIRMED).await?;
    let proven_unsent = [
        (S::Confirmed, S::Broadcast, Actor::ChainWatcher),
        (S::Broadcast, S::Unknown, Actor::Reconciler),
        (S::Unknown, S::VerifiedNotSent, Actor::Reconciler),
    ];
    walk(&stack, &acme, op, &proven_unsent).await?;
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (1000, 0),
        "nothing left: the money is available again"
    );
    stack.assert_invariants().await
}

/// The watcher's BROADCAST -> CONFIRMED of `op_id`, included as `tx` in block (`number`, `block`);
/// hashes are `0x` and 64 hex digits of the numbers.
fn confirmation(
    tenant_id: TenantId,
    op_id: OperationId,
    tx: u32,
    number: u64,
    block: u32,
) -> (TransitionRequest<'static>, Inclusion) {
    (
        TransitionRequest::new(
            tenant_id,
            op_id,
            S::Broadcast,
            S::Confirmed,
            Actor::ChainWatcher,
            "w",
            "included",
        ),
        Inclusion {
            tenant_id,
            op_id,
            tx_hash: format!("0x{tx:064x}"),
            block_number: number,
            block_hash: format!("0x{block:064x}"),
        },
    )
}

/// A funded tenant with `n` withdrawals of `amount` walked to BROADCAST.
async fn broadcast_ops(
    stack: &Stack,
    n: usize,
    amount: &str,
) -> anyhow::Result<(opledger_tests::Tenant, Vec<OperationId>)> {
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut ops = Vec::new();
    for _ in 0..n {
        let w = stack.withdraw(&acme, amount, ALICE).await?;
        let op: OperationId = w.withdrawal_id.parse()?;
        walk(stack, &acme, op, &TO_CONFIRMED[..4]).await?;
        ops.push(op);
    }
    Ok((acme, ops))
}

#[tokio::test]
async fn a_batch_of_confirmations_settles_each_once_and_skips_what_another_worker_moved()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, ops) = broadcast_ops(&stack, 3, "100").await?;
    let confirm = |op: OperationId| {
        TransitionRequest::new(
            acme.id,
            op,
            S::Broadcast,
            S::Confirmed,
            Actor::ChainWatcher,
            "w",
            "included",
        )
    };
    let inclusion = |op: OperationId, n: u8| Inclusion {
        tenant_id: acme.id,
        op_id: op,
        tx_hash: format!("0x{:064x}", n),
        block_number: 7,
        block_hash: format!("0x{:064x}", 0xb10c),
    };
    // A batch with a refused move, a missing operation or one operation twice writes nothing.
    let refused = TransitionRequest::new(
        acme.id,
        ops[2],
        S::Broadcast,
        S::Confirmed,
        Actor::Signer,
        "w",
        "included",
    );
    let missing = OperationId::from_uuid(uuid::Uuid::new_v4());
    let bad_batches = [
        vec![
            (confirm(ops[0]), inclusion(ops[0], 0)),
            (refused, inclusion(ops[2], 2)),
        ],
        vec![
            (confirm(ops[0]), inclusion(ops[0], 0)),
            (confirm(missing), inclusion(missing, 9)),
        ],
        vec![
            (confirm(ops[0]), inclusion(ops[0], 0)),
            (confirm(ops[0]), inclusion(ops[0], 1)),
        ],
    ];
    for batch in &bad_batches {
        let refused = stack.admin.confirm_many(batch).await;
        assert!(
            matches!(
                refused,
                Err(StoreError::Transition(_)
                    | StoreError::NotFound { .. }
                    | StoreError::Corrupt { .. })
            ),
            "{refused:?}"
        );
        assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 300));
        assert_eq!(stack.count("inclusions", acme.id).await?, 0);
        assert_eq!(
            stack
                .admin
                .get_withdrawal(acme.id, ops[0])
                .await?
                .expect("op")
                .state,
            S::Broadcast
        );
    }
    // Another worker confirms the second one first.
    stack
        .admin
        .confirm(&confirm(ops[1]), &inclusion(ops[1], 1))
        .await?;
    let items: Vec<_> = ops
        .iter()
        .zip(0..)
        .map(|(op, n)| (confirm(*op), inclusion(*op, n)))
        .collect();
    let moved = stack.admin.confirm_many(&items).await?;
    assert_eq!(moved, vec![true, false, true]);
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (700, 0),
        "three settlements, one each"
    );
    // The same batch again moves nothing and settles nothing.
    assert_eq!(
        stack.admin.confirm_many(&items).await?,
        vec![false, false, false]
    );
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 0));
    assert_eq!(stack.count("inclusions", acme.id).await?, 3);
    for op in &ops {
        let state = stack.admin.get_withdrawal(acme.id, *op).await?.expect("op");
        assert_eq!(state.state, S::Confirmed);
    }
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_batch_of_settlements_moves_each_balance_row_once_by_the_sum_of_its_holds()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, bolt) = (stack.tenant("acme").await?, stack.tenant("bolt").await?);
    let mut items = Vec::new();
    for (tenant, amounts) in [(&acme, ["100", "20", "3"]), (&bolt, ["7", "50", "400"])] {
        stack.fund(tenant, "treasury", "ETH", "1000").await?;
        for amount in amounts {
            let w = stack.withdraw(tenant, amount, ALICE).await?;
            let op: OperationId = w.withdrawal_id.parse()?;
            walk(&stack, tenant, op, &TO_CONFIRMED[..4]).await?;
            items.push((tenant.id, op));
        }
    }
    let pool = stack.admin.pool().clone();
    let version = |tenant: TenantId| {
        let pool = pool.clone();
        async move {
            let (v,): (i64,) = sqlx::query_as(
                "SELECT version FROM ledger_accounts WHERE tenant_id = $1 AND account = 'treasury'",
            )
            .bind(tenant.as_uuid())
            .fetch_one(&pool)
            .await?;
            anyhow::Ok(v)
        }
    };
    let before = (version(acme.id).await?, version(bolt.id).await?);
    let batch: Vec<_> = items
        .iter()
        .zip(0_u32..)
        .map(|(&(tenant_id, op_id), n)| confirmation(tenant_id, op_id, n, 9, 0xb10c))
        .collect();
    assert_eq!(stack.admin.confirm_many(&batch).await?, vec![true; 6]);
    // Each tenant's balance row moved once, by the sum; each hold has its entry and postings.
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (877, 0));
    assert_eq!(stack.balance(bolt.id, "treasury", "ETH").await?, (543, 0));
    assert_eq!(
        (version(acme.id).await?, version(bolt.id).await?),
        (before.0 + 1, before.1 + 1),
        "one update of each balance row for the batch"
    );
    for tenant in [&acme, &bolt] {
        assert_eq!(stack.entries(tenant.id, "SETTLE").await?, 3);
        let (postings, external): (i64, String) = sqlx::query_as(
            "SELECT count(*), sum(p.amount) FILTER (WHERE p.bucket = 'external')::text \
               FROM ledger_postings p JOIN ledger_entries e USING (tenant_id, entry_id) \
              WHERE e.tenant_id = $1 AND e.kind = 'SETTLE'",
        )
        .bind(tenant.id.as_uuid())
        .fetch_one(stack.admin.pool())
        .await?;
        let paid = if tenant.id == acme.id { "123" } else { "457" };
        assert_eq!((postings, external.as_str()), (6, paid));
    }
    stack.assert_invariants().await?;

    // Called directly by the broadcaster's role: an effect the operation's state does not call
    // for (SETTLE of a BROADCAST operation), or a hold not in the status the effect starts from
    // (a second SETTLE), moves nothing: the answer counts only what moved.
    let w = stack.withdraw(&acme, "5", ALICE).await?;
    let fresh: OperationId = w.withdrawal_id.parse()?;
    walk(&stack, &acme, fresh, &TO_CONFIRMED[..4]).await?;
    let broadcaster = stack.db.pool_as(ServiceRole::Broadcaster).await?;
    let settled = items[0].1;
    let (moved,): (i32,) = sqlx::query_as("SELECT opledger_resolve_holds($1, $2, $3)")
        .bind(acme.id.as_uuid())
        .bind(vec![fresh.as_uuid(), settled.as_uuid()])
        .bind(vec!["SETTLE", "SETTLE"])
        .fetch_one(&broadcaster)
        .await?;
    assert_eq!(moved, 0);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (872, 5));
    // Arrays of different lengths are refused; a role without the grant may not call it.
    let uneven = sqlx::query("SELECT opledger_resolve_holds($1, $2, $3)")
        .bind(acme.id.as_uuid())
        .bind(vec![fresh.as_uuid()])
        .bind(Vec::<String>::new())
        .execute(&broadcaster)
        .await;
    assert!(uneven.is_err(), "{uneven:?}");
    let operations = stack.db.pool_as(ServiceRole::Operations).await?;
    let denied = sqlx::query("SELECT opledger_resolve_holds($1, $2, $3)")
        .bind(acme.id.as_uuid())
        .bind(vec![fresh.as_uuid()])
        .bind(vec!["SETTLE"])
        .execute(&operations)
        .await;
    assert!(
        denied
            .as_ref()
            .err()
            .and_then(|e| e.as_database_error())
            .and_then(|e| e.code())
            .as_deref()
            == Some("42501"),
        "{denied:?}"
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn the_reorganization_check_reads_each_live_block_of_its_window_once() -> anyhow::Result<()> {
    // The blocks a watcher pass must re-check: distinct (number, hash) pairs of live confirmed
    // inclusions in [from, to], two hashes at one height both named, a reorganized inclusion's
    // block gone, and the same answer as the plain DISTINCT over every inclusion.
    let stack = Stack::start().await?;
    let (acme, ops) = broadcast_ops(&stack, 6, "10").await?;
    let hash = |n: u32| format!("0x{n:064x}");
    // Two transfers in block 10; block 12 recorded at two hashes (a stale record beside the
    // current one); 15 reorganized away below; 30 above every window asked for.
    let placed = [
        (10, 0xa),
        (10, 0xa),
        (12, 0xc2),
        (12, 0xc1),
        (15, 0xf),
        (30, 0x30),
    ];
    let batch: Vec<_> = ops
        .iter()
        .zip(placed)
        .zip(0_u32..)
        .map(|((&op_id, (number, block)), n)| {
            confirmation(acme.id, op_id, 0x1000 + n, number, block)
        })
        .collect();
    assert_eq!(stack.admin.confirm_many(&batch).await?, vec![true; 6]);
    stack.admin.reopen(&batch[4].1, "w").await?;

    let blocks = |from: u64, to: u64| stack.admin.recent_inclusion_blocks("anvil", from, to);
    assert_eq!(
        blocks(0, 20).await?,
        vec![(10, hash(0xa)), (12, hash(0xc1)), (12, hash(0xc2))],
        "each live block once, lowest first, the reorganized one gone"
    );
    assert_eq!(
        blocks(11, 12).await?,
        vec![(12, hash(0xc1)), (12, hash(0xc2))]
    );
    assert_eq!(blocks(10, 10).await?, vec![(10, hash(0xa))]);
    assert_eq!(blocks(13, 29).await?, vec![]);
    assert_eq!(
        blocks(0, u64::MAX).await?.len(),
        4,
        "30 is named once the window reaches it"
    );
    assert_eq!(
        stack
            .admin
            .recent_inclusion_blocks("elsewhere", 0, u64::MAX)
            .await?,
        vec![],
        "another network's window is empty"
    );
    // The plain query the walk replaced gives the same pairs.
    let plain: Vec<(i64, String)> = sqlx::query_as(
        "SELECT DISTINCT i.block_number, i.block_hash FROM inclusions i \
         JOIN withdrawal_ops o USING (tenant_id, op_id) \
         JOIN withdrawal_payloads p USING (tenant_id, op_id) \
         WHERE i.reorged_at IS NULL AND o.state = 'CONFIRMED' AND p.network = 'anvil' \
         ORDER BY 1, 2",
    )
    .fetch_all(stack.admin.pool())
    .await?;
    let walked: Vec<(i64, String)> = blocks(0, u64::MAX)
        .await?
        .into_iter()
        .map(|(n, h)| Ok((i64::try_from(n)?, h)))
        .collect::<anyhow::Result<_>>()?;
    assert_eq!(walked, plain);
    stack.assert_invariants().await
}
