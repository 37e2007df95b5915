//! Funding accounts: idempotent credits.

use opledger_proto::v1::CreditAccountRequest;
use opledger_tests::{Stack, authed, new_key, reason};

#[tokio::test]
async fn credits_are_idempotent_by_key_and_refuse_changed_content() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let mut client = stack.client().await?;
    let request = CreditAccountRequest {
        idempotency_key: new_key(),
        account: "treasury".into(),
        asset: "ETH".into(),
        amount: "500".into(),
    };
    let first = client
        .credit_account(authed(&acme.operator, request.clone()))
        .await?
        .into_inner();
    let again = client
        .credit_account(authed(&acme.operator, request.clone()))
        .await?
        .into_inner();
    assert!(!first.replayed && again.replayed);
    assert_eq!(again.balance.map(|b| b.available), Some("500".to_owned()));
    let err = client
        .credit_account(authed(
            &acme.operator,
            CreditAccountRequest {
                amount: "501".into(),
                ..request
            },
        ))
        .await
        .expect_err("changed amount");
    assert_eq!(reason(&err), "IDEMPOTENCY_KEY_REUSED");
    let err = client
        .credit_account(authed(
            &acme.operator,
            CreditAccountRequest {
                idempotency_key: new_key(),
                account: "treasury".into(),
                asset: "ETH".into(),
                amount: "0".into(),
            },
        ))
        .await
        .expect_err("zero");
    assert_eq!(reason(&err), "INVALID_FIELD");
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (500, 0));
    assert_eq!(stack.count("ledger_credits", acme.id).await?, 1);
    stack.assert_invariants().await
}
