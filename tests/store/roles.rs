//! One least-privilege role per service, enforced by the database: each adversary holds one
//! service's login and tries what that role's grants might allow.

use opledger_domain::state::{HoldEffect, TRANSITIONS};
use opledger_testkit::ServiceRole;
use opledger_tests::{ALICE, Stack};
use sqlx::PgPool;
use std::collections::BTreeSet;

const SERVICES: [ServiceRole; 5] = [
    ServiceRole::Operations,
    ServiceRole::Approvals,
    ServiceRole::Broadcaster,
    ServiceRole::Reconciler,
    ServiceRole::Inbox,
];

async fn fails(pool: &PgPool, sql: &str, op: uuid::Uuid, tenant: uuid::Uuid) -> bool {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(op)
        .bind(tenant)
        .execute(pool)
        .await
        .is_err()
}

/// True when a ledger function call is refused: an error, or `false` (nothing changed).
async fn refused_call(pool: &PgPool, sql: &str, op: uuid::Uuid, tenant: uuid::Uuid) -> bool {
    match sqlx::query_as::<_, (Option<bool>,)>(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(op)
        .bind(tenant)
        .fetch_one(pool)
        .await
    {
        Err(_) => true,
        Ok((placed,)) => placed != Some(true),
    }
}

async fn world() -> anyhow::Result<(Stack, uuid::Uuid, uuid::Uuid)> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    Ok((stack, w.withdrawal_id.parse()?, acme.id.as_uuid()))
}

async fn balances(stack: &Stack, tenant: uuid::Uuid) -> anyhow::Result<(String, String)> {
    Ok(sqlx::query_as(
        "SELECT available::text, held::text FROM ledger_accounts WHERE tenant_id = $1",
    )
    .bind(tenant)
    .fetch_one(stack.admin.pool())
    .await?)
}

#[tokio::test]
async fn no_service_login_can_raise_a_balance_or_write_the_journal() -> anyhow::Result<()> {
    let (stack, op, tenant) = world().await?;
    let before = balances(&stack, tenant).await?;
    for role in SERVICES {
        let pool = stack.db.pool_as(role).await?;
        for sql in [
            "UPDATE ledger_accounts SET available = available + 1000000 WHERE tenant_id = $2 AND $1::uuid IS NOT NULL",
            "UPDATE ledger_accounts SET held = 0 WHERE tenant_id = $2 AND $1::uuid IS NOT NULL",
            "INSERT INTO ledger_entries (tenant_id, kind, op_id) VALUES ($2, 'CREDIT', $1)",
            "INSERT INTO ledger_holds (tenant_id, op_id, account, asset, amount, status) \
             VALUES ($2, $1, 'treasury', 'ETH', 1, 'OPEN')",
            "UPDATE ledger_holds SET status = 'RELEASED' WHERE op_id = $1 AND tenant_id = $2",
        ] {
            assert!(fails(&pool, sql, op, tenant).await, "{role:?}: {sql}");
        }
        // Releasing or settling the hold of a REQUESTED withdrawal through the ledger function:
        // its state calls for neither.
        for sql in [
            "SELECT opledger_resolve_hold($2, $1, 'RELEASE')",
            "SELECT opledger_resolve_hold($2, $1, 'SETTLE')",
            "SELECT opledger_resolve_hold($2, $1, 'REOPEN')",
            // The batch form, the operation named twice as well.
            "SELECT opledger_resolve_holds($2, ARRAY[$1, $1], ARRAY['RELEASE', 'RELEASE']) > 0",
            "SELECT opledger_resolve_holds($2, ARRAY[$1], ARRAY['SETTLE']) > 0",
            "SELECT opledger_resolve_holds($2, ARRAY[$1, $1], ARRAY['REOPEN', 'SETTLE']) > 0",
        ] {
            assert!(
                refused_call(&pool, sql, op, tenant).await,
                "{role:?}: {sql}"
            );
        }
        pool.close().await;
    }
    // Only the operations service (operator credits) and the inbox (deposits) may credit, and
    // then only through the idempotent credit function.
    for role in [
        ServiceRole::Approvals,
        ServiceRole::Broadcaster,
        ServiceRole::Reconciler,
    ] {
        let pool = stack.db.pool_as(role).await?;
        assert!(
            fails(&pool, "SELECT opledger_credit($2, '\\x01', 'treasury', 'ETH', 5) WHERE $1::uuid IS NOT NULL", op, tenant).await,
            "{role:?} credits"
        );
    }
    assert_eq!(
        balances(&stack, tenant).await?,
        before,
        "balances unchanged"
    );
    Ok(())
}

#[tokio::test]
async fn a_withdrawal_is_created_only_in_requested_and_only_with_its_hold() -> anyhow::Result<()> {
    let (stack, op, tenant) = world().await?;
    let ops = stack.db.pool_as(ServiceRole::Operations).await?;
    let insert = |state: &'static str| {
        format!(
            "WITH o AS (INSERT INTO withdrawal_ops (tenant_id, op_id, idempotency_key_hash, payload_hash, state) \
               VALUES ($2, gen_random_uuid(), sha256(gen_random_uuid()::text::bytea), \
                 (SELECT payload_hash FROM withdrawal_ops WHERE op_id = $1), '{state}') RETURNING tenant_id, op_id) \
             INSERT INTO withdrawal_payloads (tenant_id, op_id, source_account, asset, network, destination, \
               amount, fee_cap, policy_version) \
             SELECT tenant_id, op_id, 'treasury', 'ETH', 'anvil', '0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc', \
               5000000, 1, 1 FROM o"
        )
    };
    for state in ["APPROVED", "SIGNED", "BROADCAST"] {
        assert!(
            fails(&ops, &insert(state), op, tenant).await,
            "created in {state}"
        );
    }
    // REQUESTED without its hold: refused when the transaction commits.
    assert!(
        fails(&ops, &insert("REQUESTED"), op, tenant).await,
        "created without a hold"
    );
    // A hold for an operation that is not REQUESTED with that payload is refused too.
    for amount in ["999", "1000"] {
        let sql = format!("SELECT opledger_place_hold($2, $1, 'treasury', 'ETH', {amount})");
        assert!(
            refused_call(&ops, &sql, op, tenant).await,
            "a second hold of {amount}"
        );
    }
    for role in [
        ServiceRole::Approvals,
        ServiceRole::Broadcaster,
        ServiceRole::Reconciler,
        ServiceRole::Inbox,
    ] {
        let pool = stack.db.pool_as(role).await?;
        assert!(
            fails(&pool, &insert("REQUESTED"), op, tenant).await,
            "{role:?} creates"
        );
    }
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM withdrawal_ops WHERE tenant_id = $1")
        .bind(tenant)
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!(n, 1, "only the withdrawal created through the API exists");
    Ok(())
}

#[tokio::test]
async fn a_service_login_moves_an_operation_only_as_its_own_actors() -> anyhow::Result<()> {
    let (stack, op, tenant) = world().await?;
    let mv = |to: &str, actor: &str| {
        format!(
            "UPDATE withdrawal_ops SET state = '{to}', last_actor = '{actor}', version = version + 1 \
             WHERE op_id = $1 AND tenant_id = $2"
        )
    };
    // Posing as the approvals service, or as the webhook processor, to approve or reject.
    for (role, actor) in [
        (ServiceRole::Broadcaster, "approvals"),
        (ServiceRole::Reconciler, "approvals"),
        (ServiceRole::Inbox, "approvals"),
        (ServiceRole::Operations, "approvals"),
        (ServiceRole::Approvals, "signer"),
        (ServiceRole::Broadcaster, "broadcaster"),
    ] {
        let pool = stack.db.pool_as(role).await?;
        assert!(
            fails(&pool, &mv("APPROVED", actor), op, tenant).await,
            "{role:?} as {actor}"
        );
        // A move the table does not have, by the role's own actor.
        assert!(
            fails(&pool, &mv("CONFIRMED", actor), op, tenant).await,
            "{role:?} to CONFIRMED"
        );
    }
    // Without naming an actor at all.
    let approvals = stack.db.pool_as(ServiceRole::Approvals).await?;
    assert!(
        fails(&approvals, "UPDATE withdrawal_ops SET state = 'APPROVED', version = version + 1 WHERE op_id = $1 AND tenant_id = $2", op, tenant).await
    );
    // Only the approvals role writes approval rows.
    for role in [
        ServiceRole::Operations,
        ServiceRole::Broadcaster,
        ServiceRole::Reconciler,
        ServiceRole::Inbox,
        ServiceRole::Signer,
    ] {
        let pool = stack.db.pool_as(role).await?;
        assert!(
            fails(
                &pool,
                "INSERT INTO approvals (tenant_id, op_id, approver_id, payload_hash) \
                 SELECT $2, $1, 'x', payload_hash FROM withdrawal_ops WHERE op_id = $1",
                op,
                tenant
            )
            .await,
            "{role:?} writes an approval"
        );
        assert!(
            fails(
                &pool,
                "INSERT INTO trust_statements (tenant_id, version, statement, signature) \
                 VALUES ($2, 9, '\\x00', decode(repeat('00', 64), 'hex')) RETURNING $1::uuid",
                op,
                tenant
            )
            .await,
            "{role:?} publishes a trust statement"
        );
    }
    let (state,): (String,) = sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
        .bind(op)
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!(state, "REQUESTED");
    Ok(())
}

#[tokio::test]
async fn the_databases_transition_table_is_the_domains() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT from_state, to_state, actor, hold_effect FROM opledger_transition_rules",
    )
    .fetch_all(stack.admin.pool())
    .await?;
    let in_db: BTreeSet<_> = rows.into_iter().collect();
    let mut in_domain = BTreeSet::new();
    for t in TRANSITIONS {
        let effect = match t.hold {
            HoldEffect::Keep => "KEEP",
            HoldEffect::Release => "RELEASE",
            HoldEffect::Settle => "SETTLE",
            HoldEffect::Reopen => "REOPEN",
        };
        for actor in t.actors {
            in_domain.insert((
                t.from.as_str().to_owned(),
                t.to.as_str().to_owned(),
                actor.as_str().to_owned(),
                effect.to_owned(),
            ));
        }
    }
    assert_eq!(in_db, in_domain);
    Ok(())
}
