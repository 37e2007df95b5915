//! Adversary: a compromised worker service (its own database login; THREAT-MODEL "a service's
//! database credentials"). The signed-bytes gate rests on `attempt_releases`: a worker that could
//! release an attempt itself could broadcast bytes whose commit was never acknowledged. Every
//! non-signer role tries to release, insert, remove and take back a release, and the signer tries
//! to take one back or remove it: each is refused and the row is unchanged.

use opledger_testkit::ServiceRole;
use opledger_tests::signer::{InProcessSigner, approve, client, hold_back_release, sign_request};
use opledger_tests::{ALICE, Stack};

/// The attempt's release time, as stored.
async fn released(
    stack: &Stack,
    op: uuid::Uuid,
) -> anyhow::Result<Option<chrono::DateTime<chrono::Utc>>> {
    let (at,): (Option<chrono::DateTime<chrono::Utc>>,) =
        sqlx::query_as("SELECT released_at FROM attempt_releases WHERE op_id = $1 AND attempt = 1")
            .bind(op)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(at)
}

/// Runs `sql` with the operation and tenant bound as $1 and $2.
async fn run(
    pool: &sqlx::PgPool,
    sql: &str,
    op: uuid::Uuid,
    tenant: uuid::Uuid,
) -> sqlx::Result<()> {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(op)
        .bind(tenant)
        .execute(pool)
        .await
        .map(|_| ())
}

#[tokio::test]
async fn redteam_no_worker_role_can_release_signed_bytes_and_no_release_is_taken_back()
-> anyhow::Result<()> {
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
    // No sweep may release it behind the test's back from here on.
    drop(signer);
    let op: uuid::Uuid = w.withdrawal_id.parse()?;
    let tenant = acme.id.as_uuid();
    anyhow::ensure!(
        released(&stack, op).await?.is_some(),
        "the signer released it"
    );
    // Held back, as after a lost commit answer (only the owner, bypassing triggers, can do this).
    hold_back_release(&mut *stack.admin.pool().acquire().await?, op).await?;

    let attacks = [
        "UPDATE attempt_releases SET released_at = now() WHERE op_id = $1 AND tenant_id = $2",
        "UPDATE attempt_releases SET probed_at = now() WHERE op_id = $1 AND tenant_id = $2",
        "INSERT INTO attempt_releases (tenant_id, op_id, attempt, released_at) \
         VALUES ($2, $1, 2, now())",
        "DELETE FROM attempt_releases WHERE op_id = $1 AND tenant_id = $2",
        "UPDATE tx_attempts SET attempt = attempt WHERE op_id = $1 AND tenant_id = $2",
    ];
    let mut tried = 0;
    for role in [
        ServiceRole::Operations,
        ServiceRole::Approvals,
        ServiceRole::Broadcaster,
        ServiceRole::Reconciler,
        ServiceRole::Inbox,
    ] {
        let pool = stack.db.pool_as(role).await?;
        for sql in attacks {
            let done = run(&pool, sql, op, tenant).await;
            assert!(done.is_err(), "{role:?} may run: {sql}");
            tried += 1;
        }
        pool.close().await;
        assert_eq!(released(&stack, op).await?, None, "{role:?} released it");
    }

    // The signer may release (after its acknowledged commit), never take a release back.
    let signer = stack.db.pool_as(ServiceRole::Signer).await?;
    run(&signer, attacks[0], op, tenant).await?;
    let at = released(&stack, op).await?;
    assert!(at.is_some(), "released by the signer");
    for sql in [
        "UPDATE attempt_releases SET released_at = NULL WHERE op_id = $1 AND tenant_id = $2",
        "UPDATE attempt_releases SET released_at = now() - interval '1 day' \
         WHERE op_id = $1 AND tenant_id = $2",
        "DELETE FROM attempt_releases WHERE op_id = $1 AND tenant_id = $2",
    ] {
        let done = run(&signer, sql, op, tenant).await;
        assert!(done.is_err(), "the signer may run: {sql}");
        tried += 1;
    }
    assert_eq!(released(&stack, op).await?, at, "the release is unchanged");
    println!("redteam gate: {tried} writes to the release gate tried, {tried} refused");
    Ok(())
}

/// A row that lies: an attempt planted by the database owner (bypassing the triggers) on a
/// withdrawal that is still APPROVED, which the transition table never produces. The signer
/// reads attempts only once an operation is past SIGNING, so it goes on to sign; persisting that
/// signature as attempt 1 collides with the planted row and the whole transaction rolls back: no
/// second attempt, no nonce taken, the withdrawal not SIGNED, nothing to broadcast.
#[tokio::test]
async fn redteam_an_attempt_planted_on_an_approved_withdrawal_never_gets_a_signature_stored()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let genuine = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &genuine).await?;
    let target = stack.withdraw(&acme, "2000", ALICE).await?;
    approve(&stack, &acme, &target).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut calls = client(signer.addr).await?;
    calls
        .sign_withdrawal(sign_request(acme.id, &genuine.withdrawal_id))
        .await?;
    let (genuine_op, target_op): (uuid::Uuid, uuid::Uuid) = (
        genuine.withdrawal_id.parse()?,
        target.withdrawal_id.parse()?,
    );
    // A copy of the genuine attempt under the target, at a nonce and hash of its own.
    let mut tx = stack.admin.pool().begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO tx_attempts (tenant_id, op_id, attempt, kind, network, chain_id, sender, \
           nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, max_priority_fee_per_gas) \
         SELECT tenant_id, $2, attempt, kind, network, chain_id, sender, nonce + 1000, \
           '0x' || repeat('ab', 32), raw_tx, gas_limit, max_fee_per_gas, max_priority_fee_per_gas \
         FROM tx_attempts WHERE op_id = $1",
    )
    .bind(genuine_op)
    .bind(target_op)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let nonces = || async {
        let rows: Vec<(i64,)> = sqlx::query_as("SELECT next_nonce FROM signer_nonces")
            .fetch_all(stack.admin.pool())
            .await?;
        anyhow::Ok(rows)
    };
    let nonces_before = nonces().await?;

    let answer = calls
        .sign_withdrawal(sign_request(acme.id, &target.withdrawal_id))
        .await;
    anyhow::ensure!(answer.is_err(), "the signer answered {answer:?}");
    let (attempts,): (i64,) = sqlx::query_as("SELECT count(*) FROM tx_attempts WHERE op_id = $1")
        .bind(target_op)
        .fetch_one(stack.admin.pool())
        .await?;
    anyhow::ensure!(
        attempts == 1,
        "{attempts} attempts: only the planted one may stand"
    );
    let (state,): (String,) = sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
        .bind(target_op)
        .fetch_one(stack.admin.pool())
        .await?;
    anyhow::ensure!(
        state == "APPROVED" || state == "SIGNING",
        "the withdrawal moved to {state}"
    );
    anyhow::ensure!(
        nonces().await? == nonces_before,
        "a nonce was taken for the rolled-back signature"
    );
    Ok(())
}
