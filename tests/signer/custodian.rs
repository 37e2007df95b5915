//! The signer never signs a withdrawal a custodian executes: asked (by a compromised
//! broadcaster, say) it refuses with `NOT_SIGNABLE` naming the executor, records a security
//! event, takes no nonce and leaves the withdrawal to its executor (APPROVED, not ended).

use opledger_tests::signer::{InProcessSigner, approve, attempts, client, sign_request};
use opledger_tests::{ALICE, Stack, reason};
use tonic_types::StatusExt;

#[tokio::test]
async fn a_broadcaster_asking_to_sign_a_custodians_withdrawal_gets_nothing_signed()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    let op: uuid::Uuid = w.withdrawal_id.parse()?;
    // Routed to a custodian at create (as the operations service does for a routed network).
    sqlx::query(
        "UPDATE withdrawal_ops SET executor = 'custodian', version = version + 1 WHERE op_id = $1",
    )
    .bind(op)
    .execute(stack.admin.pool())
    .await?;
    approve(&stack, &acme, &w).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut client = client(signer.addr).await?;
    for _ in 0..2 {
        let err = client
            .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
            .await
            .expect_err("refused");
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert_eq!(reason(&err), "NOT_SIGNABLE");
        let info = err.get_details_error_info().expect("error info");
        assert_eq!(
            info.metadata.get("executor").map(String::as_str),
            Some("custodian")
        );
    }
    assert_eq!(attempts(&stack, &w.withdrawal_id).await?, 0);
    let (events,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM security_events WHERE op_id = $1 \
         AND kind = 'SIGNER_CUSTODIAN_WITHDRAWAL'",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(events, 2, "every request is recorded");
    let (state, nonces): (String, i64) = sqlx::query_as(
        "SELECT o.state, (SELECT count(*) FROM signer_nonces) FROM withdrawal_ops o \
         WHERE o.op_id = $1",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!((state.as_str(), nonces), ("APPROVED", 0));
    Ok(())
}
