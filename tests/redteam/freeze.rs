//! Adversaries who try to freeze another service rather than move money (issue 25, findings 3 to
//! 5): each holds one service's login and uses everything its grants allow to stop the watcher
//! and the workers' passes, to stop every state change, or to make the signer drop a key a
//! withdrawal may still need. Refused when the victim carries on. The same attacks, each login in
//! turn, are `tests/store/freeze.rs`.

use crate::forge::Outcome;
use anyhow::Context as _;
use opledger_domain::ids::OperationId;
use opledger_domain::state::{Actor, OperationState as S};
use opledger_proto::v1::Withdrawal;
use opledger_store::transition::TransitionRequest;
use opledger_store::wallets::{Registration, RetireAfter, WalletStatus};
use opledger_store::{Store, StoreConfig};
use opledger_testkit::ServiceRole;
use opledger_tests::signer::{
    HOT_WALLET, InProcessSigner, NETWORK, ROTATED_WALLET, approve, client, sign_request,
};
use opledger_tests::{ALICE, Stack, Tenant};
use sqlx::{Connection as _, PgConnection};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

type Scenario = Pin<Box<dyn Future<Output = anyhow::Result<Outcome>> + Send>>;

/// Every scenario, named after its adversary.
pub fn scenarios() -> Vec<(&'static str, Scenario)> {
    vec![
        (
            "inbox_login_holding_the_watcher_lease_and_pass_lock_keys_is_refused",
            Box::pin(inbox_login_holding_lock_keys()),
        ),
        (
            "inbox_login_prefilling_transition_log_ids_is_refused",
            Box::pin(inbox_login_prefilling_log_ids()),
        ),
        (
            "broadcaster_login_faking_settlement_and_reorganization_floors_is_refused_a_wallet_retirement",
            Box::pin(broadcaster_login_hastening_retirement()),
        ),
    ]
}

const WATCH_CLASS: i32 = 0x7761_7463;
const PASS_CLASS: i32 = 0x6f70_6c64;

async fn store_as(stack: &Stack, role: ServiceRole) -> anyhow::Result<Store> {
    Store::connect(&stack.db.url_as(role), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!("{role:?}: {}", e.log_safe()))
}

/// Tenant `acme`, funded, with a REQUESTED withdrawal of 500.
async fn world() -> anyhow::Result<(Stack, Tenant, Withdrawal, OperationId)> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "500", ALICE).await?;
    let op = w.withdrawal_id.parse()?;
    Ok((stack, acme, w, op))
}

/// Finding 3: the inbox's login takes the lease function (refused), then reads the held lease
/// key in pg_locks and takes it the moment the holder's session ends, and holds the advisory key
/// the pass locks used: the standby broadcaster still leads, and a pass still takes its lock.
async fn inbox_login_holding_lock_keys() -> anyhow::Result<Outcome> {
    let (stack, acme, _, op) = world().await?;
    let broadcaster = store_as(&stack, ServiceRole::Broadcaster).await?;
    let (holder, standby) = (
        broadcaster.watch_lease(NETWORK),
        broadcaster.watch_lease(NETWORK),
    );
    anyhow::ensure!(holder.hold().await && !standby.hold().await, "no lease");
    let mut inbox = PgConnection::connect(&stack.db.url_as(ServiceRole::Inbox)).await?;
    if sqlx::query("SELECT opledger_watch_lease('anvil', NULL)")
        .execute(&mut inbox)
        .await
        .is_ok()
    {
        anyhow::bail!("the inbox's login called the lease function");
    }
    let key: i64 = sqlx::query_scalar(
        "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted \
           AND classid = $1::int::oid AND objsubid = 2 \
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .bind(WATCH_CLASS)
    .fetch_one(&mut inbox)
    .await
    .context("the held key in pg_locks")?;
    let key = i32::from_ne_bytes((key as u32).to_ne_bytes());
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted \
           AND classid = $1::int::oid AND objid = $2::oid AND objsubid = 2 \
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .bind(WATCH_CLASS)
    .bind(key)
    .execute(stack.admin.pool())
    .await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
            .bind(WATCH_CLASS)
            .bind(key)
            .fetch_one(&mut inbox)
            .await?;
        if taken {
            break;
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "never squatted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The former pass-lock key of the withdrawal, held too.
    let folded = acme.id.as_uuid().as_u128() ^ op.as_uuid().as_u128();
    let bits = (0..4).fold(0_u32, |acc, i| acc ^ (folded >> (32 * i)) as u32);
    sqlx::query("SELECT pg_advisory_lock($1, $2)")
        .bind(PASS_CLASS)
        .bind(i32::from_ne_bytes(bits.to_ne_bytes()))
        .execute(&mut inbox)
        .await?;
    let mut leads = false;
    for _ in 0..50 {
        if standby.hold().await {
            leads = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::ensure!(leads, "frozen: no broadcaster watches the network");
    let pass = tokio::time::timeout(
        Duration::from_secs(5),
        broadcaster.pass_locks(1).try_lock(acme.id, op),
    )
    .await
    .context("frozen: the pass lock waited")?
    .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    anyhow::ensure!(pass.is_some(), "frozen: the pass lock is held");
    Ok(Outcome::Refused)
}

/// Finding 4: the inbox's login inserts 100,000 transition rows with the next identity values
/// (refused), then the approvals login's move of the withdrawal still works and logs one row.
async fn inbox_login_prefilling_log_ids() -> anyhow::Result<Outcome> {
    let (stack, acme, _, op) = world().await?;
    let mut inbox = PgConnection::connect(&stack.db.url_as(ServiceRole::Inbox)).await?;
    let prefilled = sqlx::query(
        "INSERT INTO operation_transitions (transition_id, tenant_id, op_id, from_state, \
           to_state, actor, actor_id, reason, version) OVERRIDING SYSTEM VALUE \
         SELECT n, $1, $2, 'REQUESTED', 'APPROVED', 'approvals', 'forged', 'forged', 1 \
         FROM generate_series(1, 100000) n",
    )
    .bind(acme.id.as_uuid())
    .bind(op.as_uuid())
    .execute(&mut inbox)
    .await;
    anyhow::ensure!(prefilled.is_err(), "the inbox's login wrote log rows");
    let approvals = store_as(&stack, ServiceRole::Approvals).await?;
    approvals
        .transition(&TransitionRequest::new(
            acme.id,
            op,
            S::Requested,
            S::Approved,
            Actor::Approvals,
            "approvals-1",
            "approved",
        ))
        .await
        .map_err(|e| anyhow::anyhow!("frozen: the move failed: {}", e.log_safe()))?;
    let (rows,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM operation_transitions WHERE op_id = $1")
            .bind(op.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    anyhow::ensure!(rows == 2, "{rows} log rows, not the creation and the move");
    Ok(Outcome::Refused)
}

/// Finding 5: after a rotation, the broadcaster's login makes the old wallet's withdrawal look
/// settled long ago below a final floor, its inclusion reorganized away; the signer still keeps
/// the wallet, which signed it minutes ago.
async fn broadcaster_login_hastening_retirement() -> anyhow::Result<Outcome> {
    let (stack, acme, w, op) = world().await?;
    approve(&stack, &acme, &w).await?;
    {
        let signer = InProcessSigner::start(&stack.db, acme.id).await?;
        client(signer.addr)
            .await?
            .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
            .await?;
    }
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
    let mut liar = PgConnection::connect(&stack.db.url_as(ServiceRole::Broadcaster)).await?;
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
            .await?;
    }
    let retired = store_as(&stack, ServiceRole::Signer)
        .await?
        .retire_wallet(
            acme.id,
            NETWORK,
            HOT_WALLET,
            RetireAfter {
                grace: Duration::from_secs(3600),
                quiet: Duration::from_secs(604_800),
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    Ok(if retired {
        Outcome::Released
    } else {
        Outcome::Refused
    })
}
