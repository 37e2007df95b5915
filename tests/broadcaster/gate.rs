//! The signed-bytes gate (docs/serialization.md): bytes whose signing commit the signer did not
//! see acknowledged by the synchronous standby are never submitted, however visible they are on
//! the primary.
//!
//! The test cluster has no standby, so one is made to be missing: `synchronous_standby_names`
//! names a standby that never connects and the test database commits with
//! `synchronous_commit = on`, so every commit of a session opened on it waits, as on a primary
//! whose synchronous standby is gone. The test then plays what Patroni documents: the signer's
//! backend is terminated while its signing commit waits. Its changes are visible on the primary
//! but not replicated (a failover would lose them), and the signer saw no acknowledgement.
//! Other tests are not affected: the cluster runs with `synchronous_commit = off`, so only
//! sessions of this test's database wait.

use opledger_broadcaster::worker::{DeferralClass, Outcome};
use opledger_chain::SubmitClass;
use opledger_domain::state::OperationState;
use opledger_store::broadcast::Due;
use opledger_tests::chain::{Chain, broadcaster_config};
use opledger_tests::signer::{
    HOT_WALLET, InProcessSigner, NETWORK, approve, client, hold_back_release, sign_request,
};
use opledger_tests::{BOB, Stack};
use sqlx::PgPool;
use std::time::{Duration, Instant};

/// The standby that is never there.
const ABSENT_STANDBY: &str = "opledger_gate_test_absent_standby";

async fn set_standby(cluster: &PgPool, names: Option<&str>) -> anyhow::Result<()> {
    match names {
        Some(names) => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "ALTER SYSTEM SET synchronous_standby_names = '{names}'"
            )))
            .execute(cluster)
            .await?;
        }
        None => {
            sqlx::query("ALTER SYSTEM RESET synchronous_standby_names")
                .execute(cluster)
                .await?;
        }
    }
    sqlx::query("SELECT pg_reload_conf()")
        .execute(cluster)
        .await?;
    Ok(())
}

/// The backend of `database` waiting for the synchronous standby, if any.
async fn sync_waiter(cluster: &PgPool, database: &str) -> anyhow::Result<Option<i32>> {
    let pid: Option<(i32,)> = sqlx::query_as(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event = 'SyncRep' \
         ORDER BY backend_start LIMIT 1",
    )
    .bind(database)
    .fetch_optional(cluster)
    .await?;
    Ok(pid.map(|(pid,)| pid))
}

#[tokio::test]
async fn bytes_whose_signing_commit_was_not_acknowledged_are_never_submitted() -> anyhow::Result<()>
{
    // The chain's own signer connected before the database waits for the standby, and is not
    // used: the test starts its own below.
    let Chain {
        stack, acme, node, ..
    } = Chain::start().await?;
    let w = stack.withdraw(&acme, "2500000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    let cluster_url = std::env::var(opledger_testkit::TEST_DATABASE_URL_ENV)?;
    let cluster = PgPool::connect(&cluster_url).await?;
    // Every session opened on this database from now on waits for the standby at commit.
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE \"{}\" SET synchronous_commit = on",
        stack.db.name
    )))
    .execute(&cluster)
    .await?;
    let outcome = tokio::time::timeout(
        Duration::from_secs(90),
        gate(&stack, &acme, &node, &w, &cluster),
    )
    .await
    .unwrap_or_else(|_| Err(anyhow::anyhow!("the gate test did not finish within 90 s")));
    // Whatever happened, the standby "comes back" for the rest of the suite.
    set_standby(&cluster, None).await?;
    outcome
}

async fn gate(
    stack: &Stack,
    acme: &opledger_tests::Tenant,
    node: &opledger_testkit::Anvil,
    w: &opledger_proto::v1::Withdrawal,
    cluster: &PgPool,
) -> anyhow::Result<()> {
    let op_id: uuid::Uuid = w.withdrawal_id.parse()?;
    let signer = InProcessSigner::start_configured(&stack.db, acme.id, None, |c| {
        c.release_sweep_ms = 200;
    })
    .await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(stack, &signer, &node.rpc_url()),
        stack.admin.broadcaster(),
    )?;
    let before = node.balance(BOB).await?;
    let mut signer_client = client(signer.addr).await?;
    // From here on, the standby is missing.
    set_standby(cluster, Some(ABSENT_STANDBY)).await?;
    let request = sign_request(acme.id, &w.withdrawal_id);
    let signing = tokio::spawn(async move { signer_client.sign_withdrawal(request).await });

    // Each commit of the signer waits for the standby. The claim (APPROVED -> SIGNING) is let
    // through by cancelling its wait (PostgreSQL then reports it committed); the next wait is the
    // commit persisting the signed attempt, and its backend is terminated: the signer sees no
    // acknowledgement, and the attempt is visible on the primary all the same.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut cancelled = 0;
    loop {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the signing commit never waited for the standby (cancelled {cancelled} waits)"
        );
        let Some(pid) = sync_waiter(cluster, &stack.db.name).await? else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let (state,): (String,) =
            sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
                .bind(op_id)
                .fetch_one(stack.admin.pool())
                .await?;
        if state == "SIGNING" {
            sqlx::query("SELECT pg_terminate_backend($1)")
                .bind(pid)
                .execute(cluster)
                .await?;
            break;
        }
        sqlx::query("SELECT pg_cancel_backend($1)")
            .bind(pid)
            .execute(cluster)
            .await?;
        cancelled += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let answer = tokio::time::timeout(Duration::from_secs(10), signing).await??;
    anyhow::ensure!(
        answer.is_err(),
        "the signer must not answer success for a commit it did not see acknowledged"
    );

    let visible = || async {
        let row: Option<(String, Option<chrono::DateTime<chrono::Utc>>)> = sqlx::query_as(
            "SELECT o.state, r.released_at FROM withdrawal_ops o \
             JOIN attempt_releases r USING (tenant_id, op_id) WHERE o.op_id = $1",
        )
        .bind(op_id)
        .fetch_optional(stack.admin.pool())
        .await?;
        anyhow::Ok(row)
    };
    let due = Due {
        tenant_id: acme.id,
        op_id: w.withdrawal_id.parse()?,
        state: OperationState::Signed,
        network: NETWORK.into(),
    };
    // For 2 s (ten sweeps of the signer): SIGNED and visible, never released, never submitted.
    let held_until = Instant::now() + Duration::from_secs(2);
    let mut passes = 0;
    while Instant::now() < held_until {
        let row = visible().await?;
        anyhow::ensure!(
            matches!(&row, Some((state, None)) if state == "SIGNED"),
            "the unacknowledged attempt is visible and held back: {row:?}"
        );
        let outcome = broadcaster.handle(&due).await?;
        anyhow::ensure!(
            outcome
                == Outcome::Deferred(opledger_broadcaster::worker::Deferral::of(
                    DeferralClass::NotReleased
                )),
            "held-back bytes are not submitted: {outcome:?}"
        );
        passes += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::ensure!(
        node.nonce(HOT_WALLET, "latest").await? == 0
            && node.nonce(HOT_WALLET, "pending").await? == 0,
        "nothing reached the node"
    );
    println!("gate: {passes} broadcaster passes held back, nothing submitted");

    // The standby is back: the sweep's probe commit is acknowledged, the attempt released, and
    // its bytes submitted once.
    set_standby(cluster, None).await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some((_, Some(_))) = visible().await? {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "never released after the standby returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let outcome = broadcaster.handle(&due).await?;
    anyhow::ensure!(
        outcome == Outcome::Submitted(SubmitClass::Accepted, OperationState::Broadcast),
        "released bytes are submitted: {outcome:?}"
    );
    let (hash, probed): (String, bool) = sqlx::query_as(
        "SELECT a.tx_hash, r.probed_at IS NOT NULL FROM tx_attempts a \
         JOIN attempt_releases r USING (tenant_id, op_id, attempt) WHERE a.op_id = $1",
    )
    .bind(op_id)
    .fetch_one(stack.admin.pool())
    .await?;
    anyhow::ensure!(
        probed,
        "released by the sweep's probe, not by the lost answer"
    );
    let receipt = node.wait_receipt(&hash, Duration::from_secs(10)).await?;
    anyhow::ensure!(receipt["status"] == "0x1", "mined");
    anyhow::ensure!(node.balance(BOB).await? - before == 2_500_000_000_000_000);
    anyhow::ensure!(
        node.nonce(HOT_WALLET, "latest").await? == 1,
        "one transaction"
    );
    stack.assert_invariants().await?;
    // Its sweep would probe (and lock) the row the check below holds back.
    drop(signer);
    release_waits_for_no_standby(stack, acme, op_id, cluster).await
}

/// The release itself commits asynchronously (docs/serialization.md): with the standby missing
/// again, an ordinary commit of this database waits, and a release of a held-back attempt by the
/// signer's own login does not.
async fn release_waits_for_no_standby(
    stack: &Stack,
    acme: &opledger_tests::Tenant,
    op_id: uuid::Uuid,
    cluster: &PgPool,
) -> anyhow::Result<()> {
    use sqlx::Connection as _;
    // Held back again (only the owner, bypassing triggers, can; its own commit asynchronous).
    let mut owner = sqlx::PgConnection::connect(&stack.db.url).await?;
    hold_back_release(&mut owner, op_id).await?;
    set_standby(cluster, Some(ABSENT_STANDBY)).await?;
    let signer = opledger_store::Store::connect(
        &opledger_tests::signer::signer_url(&stack.db).await?,
        opledger_store::StoreConfig::default(),
    )
    .await
    .map_err(|e| anyhow::anyhow!("signer login: {}", e.log_safe()))?;
    // An ordinary commit on a new session waits for the standby that is not there.
    let mut plain = sqlx::PgConnection::connect(&stack.db.url).await?;
    let waited = tokio::time::timeout(
        Duration::from_millis(500),
        sqlx::query("CREATE TEMP TABLE gate_probe (x int)").execute(&mut plain),
    )
    .await;
    anyhow::ensure!(
        waited.is_err(),
        "a synchronous commit did not wait: {waited:?}"
    );
    let key = (
        acme.id,
        opledger_domain::ids::OperationId::from_uuid(op_id),
        1,
    );
    let released = tokio::time::timeout(Duration::from_secs(5), signer.release(&[key])).await;
    set_standby(cluster, None).await?;
    anyhow::ensure!(
        matches!(released, Ok(Ok(()))),
        "the release waited for the standby: {released:?}"
    );
    let (at,): (Option<chrono::DateTime<chrono::Utc>>,) =
        sqlx::query_as("SELECT released_at FROM attempt_releases WHERE op_id = $1")
            .bind(op_id)
            .fetch_one(stack.admin.pool())
            .await?;
    anyhow::ensure!(at.is_some(), "released");
    Ok(())
}
