//! Control 2: the approved payload hash is bound to what is signed. A field changed behind the
//! service's back after approval is caught by the signer's recomputation: nothing is signed.

use opledger_proto::v1::GetWithdrawalRequest;
use opledger_tests::signer::{InProcessSigner, approve, attempts, client, sign_request};
use opledger_tests::{ALICE, BOB, Stack, authed, reason};

async fn tamper_then_sign(column: &'static str, value: &'static str) -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    approve(&stack, &acme, &w).await?;
    // Privileged SQL that bypasses the application and the immutability trigger.
    let admin = stack.db.admin_pool().await?;
    let mut tx = admin.begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    let sql = format!("UPDATE withdrawal_payloads SET {column} = {value} WHERE op_id = $1");
    let changed = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    assert_eq!(changed, 1, "the tampering took effect");

    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    // The refusal is evidence of tampering: it ends the withdrawal (owned by security), so a
    // retry finds nothing signable and records nothing more.
    for want in ["PAYLOAD_HASH_MISMATCH", "NOT_SIGNABLE"] {
        let err = client
            .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert_eq!(reason(&err), want);
        assert!(!err.message().contains(BOB) && !err.message().contains(ALICE));
    }
    assert_eq!(
        attempts(&stack, &w.withdrawal_id).await?,
        0,
        "nothing was signed"
    );
    let (events,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM security_events WHERE tenant_id = $1 AND kind = 'SIGNER_HASH_MISMATCH'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(events, 1, "the refusal is recorded");
    let (nonces,): (i64,) = sqlx::query_as("SELECT count(*) FROM signer_nonces")
        .fetch_one(stack.admin.pool())
        .await?;
    assert_eq!(nonces, 0, "no nonce was taken");
    let mut ops = stack.client().await?;
    let now = ops
        .get_withdrawal(authed(
            &acme.client,
            GetWithdrawalRequest {
                withdrawal_id: w.withdrawal_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(
        now.state,
        opledger_proto::v1::WithdrawalState::FailedTerminal as i32,
        "ended for an owner"
    );
    let (owner, code): (String, String) =
        sqlx::query_as("SELECT owner, reason_code FROM escalations WHERE op_id = $1")
            .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(
        (owner.as_str(), code.as_str()),
        ("security", "SIGNER_HASH_MISMATCH")
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (1_000_000 - 1000, 1000),
        "hold kept"
    );
    Ok(())
}

#[tokio::test]
async fn control_02_destination_changed_after_approval_is_refused() -> anyhow::Result<()> {
    tamper_then_sign(
        "destination",
        "'0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc'",
    )
    .await
}

#[tokio::test]
async fn control_02_amount_changed_after_approval_is_refused() -> anyhow::Result<()> {
    tamper_then_sign("amount", "1000000").await
}

#[tokio::test]
async fn control_02_a_withdrawal_without_approval_is_never_signed() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    let err = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .expect_err("not approved");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        reason(&err),
        "NOT_SIGNABLE",
        "a REQUESTED withdrawal is not signable"
    );
    // Forcing the state to APPROVED without an approval record does not help either.
    let admin = stack.db.admin_pool().await?;
    sqlx::query(
        "UPDATE withdrawal_ops SET state = 'APPROVED', version = version + 1 WHERE op_id = $1",
    )
    .bind(w.withdrawal_id.parse::<uuid::Uuid>()?)
    .execute(&admin)
    .await?;
    let err = client
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await
        .expect_err("no approval");
    assert_eq!(reason(&err), "PAYLOAD_HASH_MISMATCH");
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 0);
    Ok(())
}
