//! Amounts stay in their domain: a credit that would take an account beyond the amount range is
//! refused (the witness refuses it with CREDIT_OUT_OF_RANGE when it would apply it: issue 25),
//! commits nothing, and the account stays readable and usable.

use crate::ledger::{signed, witness};
use opledger_proto::v1::{CreditAccountRequest, CreditState, GetBalanceRequest, GetCreditRequest};
use opledger_tests::{ALICE, Stack, Tenant, authed, new_key};
use opledger_witness::Outcome;

const MAX: u128 = u128::MAX;

fn credit(tenant: &Tenant, account: &str, amount: u128) -> anyhow::Result<CreditAccountRequest> {
    signed(tenant, &new_key(), account, "ETH", amount)
}

#[tokio::test]
async fn a_credit_beyond_the_amount_range_is_refused_and_the_account_stays_usable()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let witness = witness(&stack, &acme).await?;
    let mut client = stack.client().await?;

    // The reproduction: two credits of u128::MAX under two keys.
    client
        .credit_account(authed(&acme.operator, credit(&acme, "treasury", MAX)?))
        .await?;
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (MAX, 0));
    let second = client
        .credit_account(authed(&acme.operator, credit(&acme, "treasury", MAX)?))
        .await?
        .into_inner();
    // A proposal is not a balance: pending shows it (capped at the range), available is intact.
    let shown = second.balance.unwrap_or_default();
    assert_eq!(
        (shown.available, shown.pending),
        (MAX.to_string(), MAX.to_string())
    );
    assert_eq!(
        witness.tick(16).await,
        [Outcome::Refused("CREDIT_OUT_OF_RANGE")]
    );
    let refused = client
        .get_credit(authed(
            &acme.operator,
            GetCreditRequest {
                credit_id: second.credit.unwrap_or_default().credit_id,
            },
        ))
        .await?
        .into_inner();
    assert_eq!(refused.state(), CreditState::Refused);
    assert_eq!(refused.refusal_reason, "CREDIT_OUT_OF_RANGE");
    // Nothing of the refused credit was committed, nothing is left pending, the balance reads.
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
    assert_eq!(
        (read.available, read.held, read.pending),
        (MAX.to_string(), "0".to_owned(), "0".to_owned())
    );

    // Even a credit of 1 is refused at the bound, and a hold placed at the bound moves money
    // between the buckets without leaving the range: the total stays MAX.
    client
        .credit_account(authed(&acme.operator, credit(&acme, "treasury", 1)?))
        .await?;
    assert_eq!(
        witness.tick(16).await,
        [Outcome::Refused("CREDIT_OUT_OF_RANGE")]
    );
    stack.withdraw(&acme, "1000", ALICE).await?;
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (MAX - 1000, 1000)
    );
    client
        .credit_account(authed(&acme.operator, credit(&acme, "treasury", 1)?))
        .await?;
    assert_eq!(
        witness.tick(16).await,
        [Outcome::Refused("CREDIT_OUT_OF_RANGE")],
        "available + held is bounded, not each alone"
    );
    assert_eq!(stack.count("ledger_credits", acme.id).await?, 1);
    assert_eq!(stack.count("credit_refusals", acme.id).await?, 3);
    stack.assert_invariants().await?;

    // Another account of the tenant can take the whole range as well.
    client
        .credit_account(authed(&acme.operator, credit(&acme, "hot", MAX)?))
        .await?;
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(stack.balance(acme.id, "hot", "ETH").await?, (MAX, 0));
    stack.assert_invariants().await
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
