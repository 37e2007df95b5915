//! Immutability and grants are enforced by PostgreSQL, not only by Rust.

use opledger_tests::{ALICE, Stack, authed, new_key, payload};
use sqlx::PgPool;

async fn one_op(stack: &Stack) -> anyhow::Result<uuid::Uuid> {
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
    Ok(created.withdrawal.expect("w").withdrawal_id.parse()?)
}

async fn refused(pool: &PgPool, sql: &'static str, op: uuid::Uuid) -> bool {
    sqlx::query(sql).bind(op).execute(pool).await.is_err()
}

#[tokio::test]
async fn no_service_role_can_rewrite_history_or_payloads() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let op = one_op(&stack).await?;
    let mut services = Vec::new();
    for role in opledger_testkit::ServiceRole::ALL {
        services.push((role, stack.db.pool_as(role).await?));
    }
    let owner = stack.db.admin_pool().await?;
    let statements: [&'static str; 8] = [
        "UPDATE withdrawal_ops SET payload_hash = '\\x00' WHERE op_id = $1",
        "UPDATE withdrawal_payloads SET amount = 1 WHERE op_id = $1",
        "UPDATE withdrawal_payloads SET destination = '0x0000000000000000000000000000000000000000' WHERE op_id = $1",
        "DELETE FROM withdrawal_ops WHERE op_id = $1",
        "DELETE FROM ledger_holds WHERE op_id = $1",
        "UPDATE operation_transitions SET reason = 'x' WHERE op_id = $1",
        "DELETE FROM operation_transitions WHERE op_id = $1",
        "UPDATE ledger_holds SET amount = 1 WHERE op_id = $1",
    ];
    for sql in statements {
        for (role, pool) in &services {
            assert!(refused(pool, sql, op).await, "{role:?} role: {sql}");
        }
        // Even the owner is stopped by the triggers.
        assert!(refused(&owner, sql, op).await, "owner: {sql}");
    }
    // A state change that skips the version discipline is refused too.
    assert!(
        refused(
            &owner,
            "UPDATE withdrawal_ops SET state = 'APPROVED' WHERE op_id = $1",
            op
        )
        .await
    );
    // Balances cannot go negative, whatever writes them.
    assert!(
        refused(
            &owner,
            "UPDATE ledger_accounts SET available = -1 WHERE $1::uuid IS NOT NULL",
            op
        )
        .await
    );
    // A hold resolves at most once.
    sqlx::query("UPDATE ledger_holds SET status = 'RELEASED' WHERE op_id = $1")
        .bind(op)
        .execute(&owner)
        .await?;
    assert!(
        refused(
            &owner,
            "UPDATE ledger_holds SET status = 'SETTLED' WHERE op_id = $1",
            op
        )
        .await
    );
    Ok(())
}
