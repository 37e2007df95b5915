//! Pass locks and watcher leases against real PostgreSQL: one pass of an operation at a time, the
//! state read after the lock (never from before it), and only the worker roles may take them.

use opledger_domain::ids::OperationId;
use opledger_domain::state::{Actor, OperationState as S};
use opledger_store::StoreError;
use opledger_store::transition::TransitionRequest;
use opledger_testkit::ServiceRole;
use opledger_tests::{ALICE, Stack};
use std::time::Duration;

#[tokio::test]
async fn one_pass_at_a_time_and_the_next_one_reads_what_the_last_one_committed()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let (first, second) = (stack.admin.pass_locks(4), stack.admin.pass_locks(4));

    let held = first.try_lock(acme.id, op).await?.expect("free");
    assert_eq!(held.state, S::Requested);
    assert_eq!(held.latest_attempt_age, None, "no attempt yet");
    assert!(second.try_lock(acme.id, op).await?.is_none(), "held");
    assert!(
        first.try_lock(acme.id, op).await?.is_none(),
        "held, by any session"
    );
    // The holder's pass moves the operation and commits, then gives the lock back.
    stack
        .admin
        .transition(&TransitionRequest::new(
            acme.id,
            op,
            S::Requested,
            S::Rejected,
            Actor::Approvals,
            "ap",
            "no",
        ))
        .await?;
    held.release().await;
    // The unlock lands in the background; the next pass reads the state after its own lock.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let next = loop {
        if let Some(next) = second.try_lock(acme.id, op).await? {
            break next;
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "never released");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(next.state, S::Rejected, "the state the last pass committed");
    // Dropped without release (a failed or cancelled pass): its session ends, and the lock.
    drop(next);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while first.try_lock(acme.id, op).await?.is_none() {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "a dropped lock stayed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // No such operation: an error, and no lock left behind on its key.
    // Asked again at once, from either pool, many times: a lock left behind even for a moment
    // (ended only by closing its session, which lands in the background) answers "held".
    let missing = OperationId::from_uuid(uuid::Uuid::new_v4());
    for round in 0..20 {
        for locks in [&first, &second] {
            let found = locks.try_lock(acme.id, missing).await;
            assert!(
                matches!(found, Err(StoreError::NotFound { .. })),
                "round {round}: {found:?}"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn only_the_worker_roles_may_take_a_pass_lock() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let op: uuid::Uuid = w.withdrawal_id.parse()?;
    for (role, allowed) in [
        (ServiceRole::Broadcaster, true),
        (ServiceRole::Reconciler, true),
        (ServiceRole::Operations, false),
        (ServiceRole::Approvals, false),
        (ServiceRole::Inbox, false),
    ] {
        let pool = stack.db.pool_as(role).await?;
        let taken: Result<(bool,), sqlx::Error> =
            sqlx::query_as("SELECT locked FROM opledger_pass_lock($1, $2)")
                .bind(acme.id.as_uuid())
                .bind(op)
                .fetch_one(&pool)
                .await;
        assert_eq!(taken.is_ok(), allowed, "{role:?}: {taken:?}");
        pool.close().await;
    }
    Ok(())
}

#[tokio::test]
async fn one_watcher_lease_per_network_until_its_session_ends() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (first, second) = (
        stack.admin.watch_lease("anvil"),
        stack.admin.watch_lease("anvil"),
    );
    let other = stack.admin.watch_lease("sepolia");
    assert!(first.hold().await, "free: taken");
    assert!(first.hold().await, "kept");
    assert!(!second.hold().await, "held by the first");
    assert!(other.hold().await, "another network's lease is its own");
    // The holder's session is cut (a failover, a proxy): it knows at its next pass, and the
    // standby takes the lease.
    let (killed,): (i64,) = sqlx::query_as(
        "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l \
         WHERE l.locktype = 'advisory' AND l.classid = x'77617463'::int::oid \
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(killed, 2, "both leases' sessions");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !second.hold().await {
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "never taken over");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!first.hold().await, "the first found its session gone");
    assert!(!first.hold().await, "and the second holds it now");
    drop(second);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !first.hold().await {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "a dropped lease stayed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}
