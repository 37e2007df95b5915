//! Control 3: a reused key with a changed payload is refused with a defined error.

use opledger_proto::v1::{CreateWithdrawalRequest, GetWithdrawalRequest};
use opledger_tests::{ALICE, BOB, Stack, authed, new_key, payload, reason};
use tonic_types::StatusExt;

#[tokio::test]
async fn control_03_same_key_different_amount_then_destination_is_refused() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut client = stack.client().await?;
    let key = new_key();
    let original = client
        .create_withdrawal(authed(
            &acme.client,
            CreateWithdrawalRequest {
                idempotency_key: key.clone(),
                payload: Some(payload("100", ALICE)),
            },
        ))
        .await?
        .into_inner()
        .withdrawal
        .expect("created");

    for (changed, field) in [
        (payload("101", ALICE), "payload.amount"),
        (payload("100", BOB), "payload.destination"),
    ] {
        let err = client
            .create_withdrawal(authed(
                &acme.client,
                CreateWithdrawalRequest {
                    idempotency_key: key.clone(),
                    payload: Some(changed),
                },
            ))
            .await
            .expect_err("a changed payload under the same key must be refused");
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert_eq!(reason(&err), "IDEMPOTENCY_KEY_REUSED");
        let details = err.get_error_details();
        let violations: Vec<String> = details
            .precondition_failure()
            .map(|p| p.violations.iter().map(|v| v.subject.clone()).collect())
            .unwrap_or_default();
        assert_eq!(
            violations,
            vec![field.to_owned()],
            "names exactly the differing field"
        );
        // The refusal never echoes the key or the addresses.
        assert!(!err.message().contains(&key));
        assert!(!err.message().contains(ALICE) && !err.message().contains(BOB));
    }

    // The stored operation is unchanged: same payload, hash, state and version; one hold of 100.
    let stored = client
        .get_withdrawal(authed(
            &acme.client,
            GetWithdrawalRequest {
                withdrawal_id: original.withdrawal_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(stored, original);
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 1);
    assert_eq!(stack.count("ledger_holds", acme.id).await?, 1);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    stack.assert_invariants().await
}
