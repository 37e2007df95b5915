//! Every state change goes through one function that checks the table, the actor and the row.

use futures::future::join_all;
use opledger_domain::ids::OperationId;
use opledger_domain::state::{Actor, OperationState as S, TransitionError};
use opledger_store::StoreError;
use opledger_store::broadcast::Inclusion;
use opledger_store::transition::{LeaseGuard, TransitionRequest};
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

#[tokio::test]
async fn a_batch_of_confirmations_settles_each_once_and_skips_what_another_worker_moved()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut ops = Vec::new();
    for _ in 0..3 {
        let w = stack.withdraw(&acme, "100", ALICE).await?;
        let op: OperationId = w.withdrawal_id.parse()?;
        walk(&stack, &acme, op, &TO_CONFIRMED[..4]).await?;
        ops.push(op);
    }
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
