//! Adversary: a compromised worker service (its own database login; THREAT-MODEL "a service's
//! database credentials"). The signed-bytes gate rests on `attempt_releases`: a worker that could
//! release an attempt itself could broadcast bytes whose commit was never acknowledged. Every
//! non-signer role tries to release, insert, remove and take back a release, and the signer tries
//! to take one back or remove it: each is refused and the row is unchanged.

use opledger_testkit::ServiceRole;
use opledger_tests::signer::{InProcessSigner, approve, client, sign_request};
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
    let mut tx = stack.admin.pool().begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE attempt_releases SET released_at = NULL WHERE op_id = $1")
        .bind(op)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;

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
