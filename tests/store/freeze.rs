//! No login can freeze another (issue 25, findings 3 to 5), against the real migrations: each
//! adversary holds one service's login and tries what its grants allow to stop the watcher, every
//! pass, every state change, or to make the signer drop a key a withdrawal may still need.

use anyhow::Context as _;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState as S};
use opledger_store::transition::TransitionRequest;
use opledger_store::wallets::{Registration, RetireAfter, WalletStatus};
use opledger_store::{Store, StoreConfig};
use opledger_testkit::ServiceRole;
use opledger_tests::signer::{
    HOT_WALLET, InProcessSigner, NETWORK, ROTATED_WALLET, approve, client, sign_request,
};
use opledger_tests::{ALICE, Stack};
use sqlx::{Connection as _, PgConnection};
use std::time::Duration;

/// The advisory class of the watcher lease ('watc') and of the former pass locks ('opld').
const WATCH_CLASS: i32 = 0x7761_7463;
const PASS_CLASS: i32 = 0x6f70_6c64;

async fn store_as(stack: &Stack, role: ServiceRole) -> anyhow::Result<Store> {
    Store::connect(&stack.db.url_as(role), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!("{role:?}: {}", e.log_safe()))
}

async fn login(stack: &Stack, role: ServiceRole) -> anyhow::Result<PgConnection> {
    Ok(PgConnection::connect(&stack.db.url_as(role)).await?)
}

/// True when `sql` fails on `conn` (each statement on its own, outside a transaction block).
async fn refused(conn: &mut PgConnection, sql: &str) -> bool {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut *conn)
        .await
        .is_err()
}

/// The key of the watcher lease held on this database, as any login reads it in `pg_locks`.
async fn visible_lease_key(conn: &mut PgConnection) -> anyhow::Result<Option<i32>> {
    let key: Option<i64> = sqlx::query_scalar(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted \
           AND classid = $1::int::oid AND objsubid = 2 \
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .bind(WATCH_CLASS)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(key.map(|k| i32::from_ne_bytes((k as u32).to_ne_bytes())))
}

/// Ends the session that holds `network`'s lease (as a failover or a crash would).
async fn end_lease_holder(stack: &Stack, network: &str) -> anyhow::Result<()> {
    let (ended,): (i64,) = sqlx::query_as(
        "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l \
         JOIN opledger_watch_leases w ON l.objid = w.lock_key::oid \
         WHERE w.network = $1 AND l.locktype = 'advisory' AND l.granted \
           AND l.classid = $2::int::oid AND l.objsubid = 2 \
           AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .bind(network)
    .bind(WATCH_CLASS)
    .fetch_one(stack.admin.pool())
    .await?;
    anyhow::ensure!(ended == 1, "{ended} lease holders");
    Ok(())
}

async fn current_lease_key(stack: &Stack, network: &str) -> anyhow::Result<i32> {
    Ok(
        sqlx::query_scalar("SELECT lock_key FROM opledger_watch_leases WHERE network = $1")
            .bind(network)
            .fetch_one(stack.admin.pool())
            .await?,
    )
}

async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done().await {
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test]
async fn no_login_but_the_broadcasters_takes_the_watcher_lease_or_holds_its_key_against_it()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let broadcaster = store_as(&stack, ServiceRole::Broadcaster).await?;
    let (mut holder, mut standby) = (
        broadcaster.watch_lease(NETWORK),
        broadcaster.watch_lease(NETWORK),
    );
    assert!(holder.hold().await, "free: the broadcaster takes it");
    assert!(!standby.hold().await, "two broadcasters exclude each other");
    let foreign = ServiceRole::ALL
        .into_iter()
        .filter(|r| *r != ServiceRole::Broadcaster);
    for (round, role) in foreign.enumerate() {
        let mut attacker = login(&stack, role).await?;
        // The lease's function and table are not its own.
        for sql in [
            "SELECT opledger_watch_lease('anvil', NULL)",
            "SELECT * FROM opledger_watch_leases",
            "UPDATE opledger_watch_leases SET lock_key = 1",
            "LOCK TABLE opledger_watch_leases IN ACCESS EXCLUSIVE MODE",
        ] {
            assert!(refused(&mut attacker, sql).await, "{role:?}: {sql}");
        }
        // It reads the held key in pg_locks and takes it the moment the holder's session ends
        // (exclusively, or shared: either blocks an exclusive take).
        let key = visible_lease_key(&mut attacker)
            .await?
            .context("the held key is visible")?;
        end_lease_holder(&stack, NETWORK).await?;
        let take = if round % 2 == 0 {
            "SELECT pg_try_advisory_lock($1, $2)"
        } else {
            "SELECT pg_try_advisory_lock_shared($1, $2)"
        };
        eventually("the attacker holds the old key", async || {
            sqlx::query_scalar::<_, bool>(take)
                .bind(WATCH_CLASS)
                .bind(key)
                .fetch_one(&mut attacker)
                .await
                .unwrap_or(false)
        })
        .await?;
        // The standby takes the lease all the same, under a fresh key held before it is known.
        eventually("the standby takes over", async || standby.hold().await).await?;
        assert_ne!(current_lease_key(&stack, NETWORK).await?, key, "{role:?}");
        assert!(
            !holder.hold().await,
            "{role:?}: the old holder's session is gone"
        );
        assert!(
            !holder.hold().await,
            "{role:?}: and it waits as the standby"
        );
        std::mem::swap(&mut holder, &mut standby);
        attacker.close().await?;
    }
    assert!(holder.hold().await, "kept");
    Ok(())
}

/// The fold of `tenant` and `op` the pass locks used as an advisory key before migration 26.
fn former_pass_key(tenant: TenantId, op: OperationId) -> i32 {
    let folded = tenant.as_uuid().as_u128() ^ op.as_uuid().as_u128();
    let bits = (0..4).fold(0_u32, |acc, i| acc ^ (folded >> (32 * i)) as u32);
    i32::from_ne_bytes(bits.to_ne_bytes())
}

#[tokio::test]
async fn no_login_but_the_workers_takes_a_pass_lock_or_holds_one_against_them() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let broadcaster = store_as(&stack, ServiceRole::Broadcaster).await?;
    let reconciler = store_as(&stack, ServiceRole::Reconciler).await?;
    let (passes, other_broadcaster, reconciler_passes) = (
        broadcaster.pass_locks(2),
        broadcaster.pass_locks(2),
        reconciler.pass_locks(2),
    );
    let call = format!(
        "SELECT * FROM opledger_pass_lock('{}', '{}')",
        acme.id.as_uuid(),
        op.as_uuid()
    );
    for role in [
        ServiceRole::Operations,
        ServiceRole::Approvals,
        ServiceRole::Inbox,
        ServiceRole::Signer,
        ServiceRole::Witness,
    ] {
        let mut attacker = login(&stack, role).await?;
        for sql in [
            call.as_str(),
            // The row the pass lock is taken on, and its table.
            "SELECT 1 FROM withdrawal_payloads FOR NO KEY UPDATE",
            "SELECT 1 FROM withdrawal_payloads FOR SHARE",
            "SELECT 1 FROM withdrawal_payloads FOR KEY SHARE",
            "LOCK TABLE withdrawal_payloads IN EXCLUSIVE MODE",
            "LOCK TABLE withdrawal_payloads IN ACCESS EXCLUSIVE MODE",
        ] {
            assert!(refused(&mut attacker, sql).await, "{role:?}: {sql}");
        }
        // What it can hold: the operation's former advisory key, and (with an UPDATE grant on
        // operations) the operation's row, in a transaction left open.
        let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
            .bind(PASS_CLASS)
            .bind(former_pass_key(acme.id, op))
            .fetch_one(&mut attacker)
            .await?;
        assert!(taken, "{role:?}: advisory locks are open to every login");
        sqlx::raw_sql("BEGIN").execute(&mut attacker).await?;
        let _ = sqlx::query("SELECT 1 FROM withdrawal_ops WHERE op_id = $1 FOR UPDATE")
            .bind(op.as_uuid())
            .execute(&mut attacker)
            .await;
        // The workers' pass lock is unaffected: taken at once, and it still excludes the other
        // broadcaster and the reconciler.
        let held = tokio::time::timeout(Duration::from_secs(5), passes.try_lock(acme.id, op))
            .await
            .context("the pass lock waited")??
            .context("the broadcaster's pass lock is free")?;
        assert_eq!(held.state, S::Requested, "{role:?}");
        assert!(
            other_broadcaster.try_lock(acme.id, op).await?.is_none(),
            "{role:?}: two broadcasters exclude each other"
        );
        assert!(
            reconciler_passes.try_lock(acme.id, op).await?.is_none(),
            "{role:?}: the reconciler's pass waits for the broadcaster's"
        );
        held.release().await;
        let mut next = None;
        eventually("the reconciler takes the released lock", async || {
            next = reconciler_passes.try_lock(acme.id, op).await.ok().flatten();
            next.is_some()
        })
        .await?;
        assert!(
            passes.try_lock(acme.id, op).await?.is_none(),
            "{role:?}: the broadcaster's pass waits for the reconciler's"
        );
        drop(next);
        attacker.close().await?;
    }
    Ok(())
}

type LogRow = (Option<String>, String, String, String, String, i64);

async fn log_of(stack: &Stack, op: OperationId) -> anyhow::Result<Vec<LogRow>> {
    Ok(sqlx::query_as(
        "SELECT from_state, to_state, actor, actor_id, reason, version \
         FROM operation_transitions WHERE op_id = $1 ORDER BY transition_id",
    )
    .bind(op.as_uuid())
    .fetch_all(stack.admin.pool())
    .await?)
}

#[tokio::test]
async fn no_login_writes_the_transition_log_or_chooses_its_ids_and_a_move_logs_one_row()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let before = log_of(&stack, op).await?;
    let [(None, created, creator, key_id, reason, 0)] = before.as_slice() else {
        anyhow::bail!("not one creation row: {before:?}");
    };
    assert_eq!(
        (created.as_str(), creator.as_str(), reason.as_str()),
        ("REQUESTED", "operations", "created")
    );
    assert!(!key_id.is_empty() && key_id != "owner");
    let values = format!(
        "('{}', '{}', 'REQUESTED', 'APPROVED', 'approvals', 'forged', 'forged', 1)",
        acme.id.as_uuid(),
        op.as_uuid()
    );
    for role in ServiceRole::ALL {
        let mut attacker = login(&stack, role).await?;
        for sql in [
            format!(
                "INSERT INTO operation_transitions (tenant_id, op_id, from_state, to_state, \
                 actor, actor_id, reason, version) VALUES {values}"
            ),
            // The next identity values taken ahead of every mover (the 100,000 rows of the
            // finding, a few of them here).
            format!(
                "INSERT INTO operation_transitions (transition_id, tenant_id, op_id, from_state, \
                 to_state, actor, actor_id, reason, version) OVERRIDING SYSTEM VALUE \
                 SELECT n, '{}'::uuid, '{}'::uuid, 'REQUESTED', 'APPROVED', 'approvals', \
                 'forged', 'forged', 1 FROM generate_series(1, 1000) n",
                acme.id.as_uuid(),
                op.as_uuid()
            ),
            "SELECT setval(pg_get_serial_sequence('operation_transitions', 'transition_id'), \
             9223372036854775806)"
                .to_owned(),
        ] {
            assert!(refused(&mut attacker, &sql).await, "{role:?}: {sql}");
        }
        attacker.close().await?;
    }
    assert_eq!(log_of(&stack, op).await?, before, "no row forged");
    // The approvals login's move still works and logs exactly one row, as the mover named it.
    let approvals = store_as(&stack, ServiceRole::Approvals).await?;
    let approve = TransitionRequest::new(
        acme.id,
        op,
        S::Requested,
        S::Approved,
        Actor::Approvals,
        "approvals-1",
        "approved by quorum",
    );
    let moved = approvals
        .transition(&approve)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    // A lost race moves nothing and logs nothing.
    assert!(approvals.transition(&approve).await.is_err());
    let after = log_of(&stack, op).await?;
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[0], before[0]);
    assert_eq!(
        after[1],
        (
            Some("REQUESTED".to_owned()),
            "APPROVED".to_owned(),
            "approvals".to_owned(),
            "approvals-1".to_owned(),
            "approved by quorum".to_owned(),
            moved.version
        )
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn broadcaster_login_faking_settlement_reorganizations_and_floors_does_not_retire_a_wallet_it_signed_with_recently()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    {
        let signer = InProcessSigner::start(&stack.db, acme.id).await?;
        client(signer.addr)
            .await?
            .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
            .await?;
    }
    // Rotated: the wallet that signed it is RETIRING.
    stack
        .admin
        .register_wallets(&[Registration {
            tenant_id: acme.id,
            network: NETWORK.to_owned(),
            sender: ROTATED_WALLET.to_owned(),
            status: WalletStatus::Active,
        }])
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    // Everything the broadcaster's login may write says the withdrawal settled long ago, below
    // a final floor, and its inclusion was reorganized away.
    let op: OperationId = w.withdrawal_id.parse()?;
    let broadcaster = store_as(&stack, ServiceRole::Broadcaster).await?;
    for (from, to, actor) in [
        (S::Signed, S::Broadcast, Actor::Broadcaster),
        (S::Broadcast, S::Confirmed, Actor::ChainWatcher),
    ] {
        broadcaster
            .transition(&TransitionRequest::new(
                acme.id, op, from, to, actor, "liar", "lie",
            ))
            .await
            .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    }
    broadcaster
        .record_reorg_floor(NETWORK, 1 << 40)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    let mut liar = login(&stack, ServiceRole::Broadcaster).await?;
    for sql in [
        "INSERT INTO inclusions (tenant_id, op_id, tx_hash, block_number, block_hash) \
         VALUES ($1, $2, '0x0000000000000000000000000000000000000000000000000000000000000001', \
         10, '0x000000000000000000000000000000000000000000000000000000000000b10c')",
        "UPDATE inclusions SET reorged_at = now() WHERE tenant_id = $1 AND op_id = $2",
        "UPDATE withdrawal_ops SET updated_at = now() - interval '30 days', \
         version = version + 1 WHERE tenant_id = $1 AND op_id = $2",
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(acme.id.as_uuid())
            .bind(op.as_uuid())
            .execute(&mut liar)
            .await
            .with_context(|| sql.to_owned())?;
    }
    let signer = store_as(&stack, ServiceRole::Signer).await?;
    let grace = Duration::from_secs(3600);
    let in_flight = signer
        .in_flight_of_sender(acme.id, NETWORK, HOT_WALLET, grace)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    assert_eq!(in_flight, 0, "the lies hide the withdrawal in flight");
    // The signer's own attempt is minutes old: the wallet is kept, its key with it.
    let kept = signer
        .retire_wallet(
            acme.id,
            NETWORK,
            HOT_WALLET,
            RetireAfter {
                grace,
                quiet: Duration::from_secs(604_800),
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    assert!(!kept, "retired on the broadcaster's word");
    let (status,): (String,) =
        sqlx::query_as("SELECT status FROM signer_wallets WHERE tenant_id = $1 AND sender = $2")
            .bind(acme.id.as_uuid())
            .bind(HOT_WALLET)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(status, "RETIRING");
    Ok(())
}
