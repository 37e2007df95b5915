//! Reopening a release whose proof a reorganization removed (`opledger_reopen_release`,
//! migration 31): only the broadcaster's login may call it; it moves VERIFIED_NOT_SENT -> UNKNOWN
//! with the hold OPEN again and its amount held (available going negative if it must), marks the
//! proof so that it never releases again and records an escalation; twice is a no-op; anything
//! but an applied release of that proof is refused with nothing changed.

use opledger_domain::evidence::{BlockRef, Hash32};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState};
use opledger_domain::witness::ReleaseEvidence;
use opledger_store::broadcast::{AppliedRelease, ReleaseReopened};
use opledger_store::transition::TransitionRequest;
use opledger_store::witness::hash_text;
use opledger_store::{Store, StoreConfig, StoreError};
use opledger_testkit::ServiceRole;
use opledger_tests::signer::NETWORK;
use opledger_tests::signer::{InProcessSigner, approve, client, sign_request};
use opledger_tests::{ALICE, Stack, Tenant};

const OWNER: &str = "payments-operations";

/// A signed withdrawal of 1000 from an account funded with 1,000,000, released (VERIFIED_NOT_SENT)
/// on a proposal and an attestation of its attempt in block 10.
struct Released {
    stack: Stack,
    acme: Tenant,
    tenant: TenantId,
    op: OperationId,
    attempt: Hash32,
    proof: AppliedRelease,
}

fn evidence(tx_hash: Hash32, number: u64, block: u8) -> ReleaseEvidence {
    ReleaseEvidence {
        tx_hash,
        block: BlockRef {
            number,
            hash: [block; 32],
        },
    }
}

fn applied(tenant: TenantId, op: OperationId, e: &ReleaseEvidence) -> AppliedRelease {
    AppliedRelease {
        tenant_id: tenant,
        op_id: op,
        tx_hash: hash_text(&e.tx_hash),
        block_number: e.block.number,
        block_hash: hash_text(&e.block.hash),
    }
}

/// A proposal and the witness's attestation of `e` (as their roles would insert them).
async fn witnessed(stack: &Stack, op: OperationId, e: &ReleaseEvidence) -> anyhow::Result<()> {
    for sql in [
        "INSERT INTO release_proposals \
           (tenant_id, op_id, tx_hash, block_number, block_hash, principal, principal_id) \
         SELECT tenant_id, op_id, $2, $3, $4, 'reconciler', 'test' FROM withdrawal_ops \
         WHERE op_id = $1",
        "INSERT INTO release_attestations \
           (tenant_id, op_id, tx_hash, block_number, block_hash, witness_id) \
         SELECT tenant_id, op_id, $2, $3, $4, 'test' FROM withdrawal_ops WHERE op_id = $1",
    ] {
        sqlx::query(sql)
            .bind(op.as_uuid())
            .bind(hash_text(&e.tx_hash))
            .bind(i64::try_from(e.block.number)?)
            .bind(hash_text(&e.block.hash))
            .execute(stack.admin.pool())
            .await?;
    }
    Ok(())
}

async fn moved(
    stack: &Stack,
    tenant: TenantId,
    op: OperationId,
    from: OperationState,
    to: OperationState,
    actor: Actor,
) -> Result<(), StoreError> {
    let request = TransitionRequest::new(tenant, op, from, to, actor, "test", "test");
    stack.admin.transition(&request).await.map(|_| ())
}

async fn released() -> anyhow::Result<Released> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?;
    let op = OperationId::from_uuid(w.withdrawal_id.parse()?);
    let (hash,): (String,) =
        sqlx::query_as("SELECT tx_hash FROM tx_attempts WHERE op_id = $1 AND attempt = 1")
            .bind(op.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    let mut attempt = [0_u8; 32];
    hex::decode_to_slice(hash.trim_start_matches("0x"), &mut attempt)?;
    let proof = evidence(attempt, 10, 7);
    witnessed(&stack, op, &proof).await?;
    use OperationState as S;
    for (from, to, actor) in [
        (S::Signed, S::Broadcast, Actor::Broadcaster),
        (S::Broadcast, S::Unknown, Actor::Reconciler),
        (S::Unknown, S::VerifiedNotSent, Actor::Reconciler),
    ] {
        moved(&stack, acme.id, op, from, to, actor)
            .await
            .map_err(|e| anyhow::anyhow!("{from} -> {to}: {}", e.log_safe()))?;
    }
    assert_eq!(balances(&stack, acme.id).await?, (1_000_000, 0), "released");
    Ok(Released {
        tenant: acme.id,
        proof: applied(acme.id, op, &proof),
        acme,
        op,
        attempt,
        stack,
    })
}

/// (available, held) of the tenant's one account, signed (available may be negative).
async fn balances(stack: &Stack, tenant: TenantId) -> anyhow::Result<(i128, i128)> {
    let (available, held): (String, String) = sqlx::query_as(
        "SELECT available::text, held::text FROM ledger_accounts WHERE tenant_id = $1",
    )
    .bind(tenant.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    Ok((available.parse()?, held.parse()?))
}

/// State, hold status, escalation reason codes and marked proofs of the operation.
async fn situation(
    stack: &Stack,
    op: OperationId,
) -> anyhow::Result<(String, String, Vec<String>, i64)> {
    Ok(sqlx::query_as(
        "SELECT o.state, h.status, \
           ARRAY(SELECT reason_code FROM escalations e WHERE e.op_id = o.op_id \
                 ORDER BY escalation_id), \
           (SELECT count(*) FROM release_reorgs r WHERE r.op_id = o.op_id) \
         FROM withdrawal_ops o JOIN ledger_holds h USING (tenant_id, op_id) WHERE o.op_id = $1",
    )
    .bind(op.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?)
}

async fn broadcaster(stack: &Stack) -> anyhow::Result<Store> {
    Ok(Store::from_pool(
        stack.db.pool_as(ServiceRole::Broadcaster).await?,
        StoreConfig::default(),
    ))
}

/// Every invariant but the count of hold resolutions, which the one in
/// crates/store/src/invariants.rs still bounds at one release per hold.
async fn invariants_but_resolution_count(stack: &Stack) -> anyhow::Result<()> {
    let violations: Vec<_> = stack
        .admin
        .check_invariants()
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?
        .into_iter()
        .filter(|v| v.invariant != "each hold was resolved at most once")
        .collect();
    anyhow::ensure!(violations.is_empty(), "invariants violated: {violations:?}");
    Ok(())
}

#[tokio::test]
async fn only_the_broadcasters_login_reopens_a_release_and_twice_is_once() -> anyhow::Result<()> {
    let r = released().await?;
    let stack = &r.stack;
    let call = "SELECT opledger_reopen_release($1, $2, $3, $4, $5, 'rogue', 'payments-operations')";
    for role in ServiceRole::ALL {
        if role == ServiceRole::Broadcaster {
            continue;
        }
        let pool = stack.db.pool_as(role).await?;
        let refused = sqlx::query(call)
            .bind(r.tenant.as_uuid())
            .bind(r.op.as_uuid())
            .bind(&r.proof.tx_hash)
            .bind(10_i64)
            .bind(&r.proof.block_hash)
            .execute(&pool)
            .await
            .expect_err("only the broadcaster's role may reopen a release");
        let code = refused
            .as_database_error()
            .and_then(|db| db.code())
            .map(|c| c.into_owned());
        assert_eq!(code.as_deref(), Some("42501"), "{role:?}");
    }
    // The broadcaster's login cannot make the move by hand either (it would leave the funds
    // available with the operation UNKNOWN): only the function moves it, with the hold.
    let pool = stack.db.pool_as(ServiceRole::Broadcaster).await?;
    let by_hand = sqlx::query(
        "UPDATE withdrawal_ops SET state = 'UNKNOWN', last_actor = 'chain_watcher', \
           version = version + 1 WHERE op_id = $1",
    )
    .bind(r.op.as_uuid())
    .execute(&pool)
    .await;
    assert!(by_hand.is_err(), "a plain update reopened a release");
    assert_eq!(
        situation(stack, r.op).await?,
        (
            "VERIFIED_NOT_SENT".to_owned(),
            "RELEASED".to_owned(),
            vec![],
            0
        )
    );
    assert_eq!(balances(stack, r.tenant).await?, (1_000_000, 0));

    let watcher = broadcaster(stack).await?;
    assert_eq!(
        watcher.reopen_release(&r.proof, "watcher-1", OWNER).await?,
        ReleaseReopened::Reopened
    );
    assert_eq!(
        situation(stack, r.op).await?,
        (
            "UNKNOWN".to_owned(),
            "OPEN".to_owned(),
            vec!["RELEASE_REORGANIZED".to_owned()],
            1
        )
    );
    assert_eq!(
        balances(stack, r.tenant).await?,
        (999_000, 1000),
        "held again"
    );
    let (owner, actor, actor_id): (String, String, String) = sqlx::query_as(
        "SELECT (SELECT owner FROM escalations WHERE op_id = $1), t.actor, t.actor_id \
         FROM operation_transitions t WHERE t.op_id = $1 ORDER BY transition_id DESC LIMIT 1",
    )
    .bind(r.op.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(
        (owner.as_str(), actor.as_str(), actor_id.as_str()),
        (OWNER, "chain_watcher", "watcher-1")
    );
    // A second watcher instance (or a retry after a lost answer): nothing more.
    let other = broadcaster(stack).await?;
    assert_eq!(
        other.reopen_release(&r.proof, "watcher-2", OWNER).await?,
        ReleaseReopened::Already
    );
    assert_eq!(balances(stack, r.tenant).await?, (999_000, 1000));
    assert_eq!(stack.entries(r.tenant, "REOPEN").await?, 1);
    assert_eq!(stack.count("escalations", r.tenant).await?, 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_marked_proof_never_releases_again_and_a_new_pair_does() -> anyhow::Result<()> {
    let r = released().await?;
    let stack = &r.stack;
    let watcher = broadcaster(stack).await?;
    // Refused, nothing changed: a proof that is no witnessed release of the operation (another
    // block, never attested), and an operation whose release is not applied.
    let foreign = applied(r.tenant, r.op, &evidence(r.attempt, 11, 8));
    assert!(matches!(
        watcher.reopen_release(&foreign, "watcher-1", OWNER).await,
        Err(StoreError::Conflict {
            current: Some(OperationState::VerifiedNotSent)
        })
    ));
    assert_eq!(
        situation(stack, r.op).await?,
        (
            "VERIFIED_NOT_SENT".to_owned(),
            "RELEASED".to_owned(),
            vec![],
            0
        )
    );
    assert_eq!(
        watcher.reopen_release(&r.proof, "watcher-1", OWNER).await?,
        ReleaseReopened::Reopened
    );
    // The same evidence proposed and attested again changes nothing: the marked proof stays
    // marked, and the release is refused with the hold kept.
    let old = evidence(r.attempt, 10, 7);
    let again = stack
        .admin
        .propose_release(
            r.tenant,
            r.op,
            opledger_domain::witness::Principal::Reconciler,
            "test",
            &old,
        )
        .await;
    assert!(again.is_ok(), "{again:?}");
    assert!(!stack.admin.release_witnessed(r.tenant, r.op).await?);
    let refused = moved(
        stack,
        r.tenant,
        r.op,
        OperationState::Unknown,
        OperationState::VerifiedNotSent,
        Actor::Reconciler,
    )
    .await;
    assert!(
        matches!(refused, Err(StoreError::HoldMismatch { .. })),
        "{refused:?}"
    );
    assert_eq!(balances(stack, r.tenant).await?, (999_000, 1000));
    // The operation is UNKNOWN now: a reopen of any proof is refused.
    assert!(matches!(
        watcher.reopen_release(&foreign, "watcher-1", OWNER).await,
        Err(StoreError::Conflict {
            current: Some(OperationState::Unknown)
        })
    ));
    // New evidence (the cancel mined again elsewhere), proposed and attested: released again.
    let fresh = evidence(r.attempt, 12, 9);
    witnessed(stack, r.op, &fresh).await?;
    assert!(stack.admin.release_witnessed(r.tenant, r.op).await?);
    moved(
        stack,
        r.tenant,
        r.op,
        OperationState::Unknown,
        OperationState::VerifiedNotSent,
        Actor::Reconciler,
    )
    .await?;
    assert_eq!(balances(stack, r.tenant).await?, (1_000_000, 0));
    assert_eq!(
        (
            stack.entries(r.tenant, "RELEASE").await?,
            stack.entries(r.tenant, "REOPEN").await?
        ),
        (2, 1)
    );
    invariants_but_resolution_count(stack).await
}

#[tokio::test]
async fn a_release_standing_on_another_witnessed_proof_stands() -> anyhow::Result<()> {
    let r = released().await?;
    let stack = &r.stack;
    let second = evidence(r.attempt, 10, 5);
    witnessed(stack, r.op, &second).await?;
    let watcher = broadcaster(stack).await?;
    assert_eq!(
        watcher.applied_releases(NETWORK, 10, 10).await?.len(),
        2,
        "both proofs are re-checked"
    );
    assert_eq!(
        watcher.reopen_release(&r.proof, "watcher-1", OWNER).await?,
        ReleaseReopened::ProofMarked
    );
    assert_eq!(
        situation(stack, r.op).await?,
        (
            "VERIFIED_NOT_SENT".to_owned(),
            "RELEASED".to_owned(),
            vec![],
            1
        )
    );
    let listed = watcher.applied_releases(NETWORK, 0, 100).await?;
    assert_eq!(listed, vec![applied(r.tenant, r.op, &second)]);
    assert_eq!(
        watcher
            .reopen_release(&applied(r.tenant, r.op, &second), "watcher-1", OWNER)
            .await?,
        ReleaseReopened::Reopened
    );
    assert_eq!(balances(stack, r.tenant).await?, (999_000, 1000));
    assert!(watcher.applied_releases(NETWORK, 0, 100).await?.is_empty());
    stack.assert_invariants().await
}

#[tokio::test]
async fn funds_spent_after_the_release_leave_available_negative_and_block_new_holds()
-> anyhow::Result<()> {
    let r = released().await?;
    let stack = &r.stack;
    // The released funds are spent: a new withdrawal holds all but 1 of them.
    stack.withdraw(&r.acme, "999999", ALICE).await?;
    assert_eq!(balances(stack, r.tenant).await?, (1, 999_999));
    // Nothing else lowers available below zero, not even the owner's hand.
    let by_hand = sqlx::query("UPDATE ledger_accounts SET available = -1 WHERE tenant_id = $1")
        .bind(r.tenant.as_uuid())
        .execute(stack.admin.pool())
        .await;
    assert!(by_hand.is_err(), "available went negative by hand");
    // The reopened release holds its whole amount again: available is short by 999.
    let watcher = broadcaster(stack).await?;
    assert_eq!(
        watcher.reopen_release(&r.proof, "watcher-1", OWNER).await?,
        ReleaseReopened::Reopened
    );
    assert_eq!(balances(stack, r.tenant).await?, (-999, 1_000_999));
    // A debt: no new hold until the account is funded again.
    let refused = stack.withdraw(&r.acme, "1", ALICE).await;
    assert!(refused.is_err(), "a hold placed on a negative balance");
    assert_eq!(balances(stack, r.tenant).await?, (-999, 1_000_999));
    stack.fund(&r.acme, "treasury", "ETH", "1000").await?;
    assert_eq!(balances(stack, r.tenant).await?, (1, 1_000_999));
    stack.withdraw(&r.acme, "1", ALICE).await?;
    assert_eq!(balances(stack, r.tenant).await?, (0, 1_001_000));
    stack.assert_invariants().await
}
