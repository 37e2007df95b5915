//! Amounts stay in their domain: a credit that would take an account beyond the amount range is
//! refused with OUT_OF_RANGE, commits nothing, and the account stays readable and usable.

use opledger_proto::v1::{CreditAccountRequest, GetBalanceRequest};
use opledger_tests::{ALICE, Stack, authed, new_key, reason};
use tonic::Code;

const MAX: u128 = u128::MAX;

fn credit(amount: u128) -> CreditAccountRequest {
    CreditAccountRequest {
        idempotency_key: new_key(),
        account: "treasury".into(),
        asset: "ETH".into(),
        amount: amount.to_string(),
    }
}

#[tokio::test]
async fn a_credit_beyond_the_amount_range_is_refused_and_the_account_stays_usable()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let mut client = stack.client().await?;

    // The reproduction: two credits of u128::MAX under two keys.
    let first = client
        .credit_account(authed(&acme.operator, credit(MAX)))
        .await?
        .into_inner();
    assert_eq!(first.balance.map(|b| b.available), Some(MAX.to_string()));
    let err = client
        .credit_account(authed(&acme.operator, credit(MAX)))
        .await
        .expect_err("a second u128::MAX credit");
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    assert_eq!(reason(&err), "AMOUNT_OUT_OF_RANGE");
    assert!(
        !err.message().contains("treasury"),
        "no identifier in clear"
    );
    // Nothing of the refused credit was committed, and the balance still reads.
    assert_eq!(stack.count("ledger_credits", acme.id).await?, 1);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (MAX, 0));
    let read = client
        .get_balance(authed(
            &acme.client,
            GetBalanceRequest {
                account: "treasury".into(),
                asset: "ETH".into(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(read.available, MAX.to_string());

    // Even a credit of 1 is refused at the bound, and a hold placed at the bound moves money
    // between the buckets without leaving the range: the total stays MAX.
    let err = client
        .credit_account(authed(&acme.operator, credit(1)))
        .await
        .expect_err("one unit beyond the bound");
    assert_eq!(reason(&err), "AMOUNT_OUT_OF_RANGE");
    stack.withdraw(&acme, "1000", ALICE).await?;
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (MAX - 1000, 1000)
    );
    let err = client
        .credit_account(authed(&acme.operator, credit(1)))
        .await
        .expect_err("available + held is bounded, not each alone");
    assert_eq!(reason(&err), "AMOUNT_OUT_OF_RANGE");
    stack.assert_invariants().await?;

    // Another account of the tenant can take the whole range as well.
    let other = client
        .credit_account(authed(
            &acme.operator,
            CreditAccountRequest {
                account: "hot".into(),
                ..credit(MAX)
            },
        ))
        .await?
        .into_inner();
    assert_eq!(other.balance.map(|b| b.available), Some(MAX.to_string()));
    Ok(())
}

#[tokio::test]
async fn the_database_refuses_an_out_of_range_balance_whoever_writes_it() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", &(MAX - 5).to_string())
        .await?;
    // Even the owner role that runs migrations cannot store a total beyond the range.
    let err = sqlx::query(
        "UPDATE ledger_accounts SET held = 6 WHERE tenant_id = $1 AND account = 'treasury'",
    )
    .bind(acme.id.as_uuid())
    .execute(stack.admin.pool())
    .await
    .expect_err("available + held beyond u128::MAX");
    let db = err
        .as_database_error()
        .map(|d| d.constraint().map(str::to_owned));
    assert_eq!(db, Some(Some("ledger_accounts_amount_range".to_owned())));
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (MAX - 5, 0)
    );
    Ok(())
}
