//! The amount overflow cases: a second u128::MAX credit of one account is OUT_OF_RANGE with
//! `AMOUNT_OUT_OF_RANGE` and the balance still reads; a second signed u128::MAX deposit becomes a
//! dead letter `AMOUNT_OUT_OF_RANGE`; one unit beyond u128::MAX is refused as a value.

use crate::harness::{Suite, Tally, rng_for};
use crate::values::{U128_MAX, U128_MAX_PLUS_ONE};
use crate::wire::code_name;
use opledger_proto::v1::{CreditAccountRequest, GetBalanceRequest};
use opledger_tests::inbox::deposit;
use opledger_tests::{authed, new_key, reason};
use tonic::Code;

const ACCOUNT: &str = "overflow";

fn credit(amount: &str) -> CreditAccountRequest {
    CreditAccountRequest {
        idempotency_key: new_key(),
        account: ACCOUNT.into(),
        asset: "ETH".into(),
        amount: amount.into(),
    }
}

/// The class of a gRPC result.
fn class<T>(result: &Result<T, tonic::Status>) -> &'static str {
    match result {
        Ok(_) => "OK",
        Err(status) => code_name(status.code()),
    }
}

#[tokio::test]
async fn hostile_amount_overflow() -> anyhow::Result<()> {
    const TEST: &str = "hostile_amount_overflow";
    let (_, seed) = rng_for(TEST)?;
    let suite = Suite::start().await?;
    let mut tally = Tally::new(TEST, seed);
    let (world, acme) = (&suite.world, suite.acme());

    // Two signed deposits of u128::MAX for one account, before any other webhook of the tenant:
    // the first is credited, the second (applied after it) is a dead letter.
    for (n, settled) in [(1, "AND status = 'DONE'"), (2, "AND status = 'DEAD'")] {
        let case = format!("deposit.confirmed u128::MAX #{n}");
        let body = deposit(
            &format!("0xhostile-max-{n}"),
            "hook-overflow",
            "ETH",
            U128_MAX,
        );
        let answer = world.post(&body).await?;
        tally.record(&case, &answer.to_string());
        tally.check(answer == 200, &case, || format!("answered {answer}"));
        let applied = world.wait_rows("inbox_work", settled, 1).await;
        tally.check(applied.is_ok(), &case, || format!("{applied:?}"));
    }
    let outcomes = world.outcomes().await?;
    tally.check(
        outcomes == ["DONE:CREDITED", "DEAD:AMOUNT_OUT_OF_RANGE"],
        "second u128::MAX deposit",
        || {
            format!(
                "outcomes {outcomes:?}, expected a credit then a dead letter AMOUNT_OUT_OF_RANGE"
            )
        },
    );

    // Two credits of u128::MAX under two idempotency keys.
    let mut ops = world.stack.client().await?;
    let first = ops
        .credit_account(authed(&acme.operator, credit(U128_MAX)))
        .await;
    tally.record("CreditAccount u128::MAX #1", class(&first));
    tally.check(first.is_ok(), "CreditAccount u128::MAX #1", || {
        format!("{:?}", first.as_ref().err())
    });
    let second = ops
        .credit_account(authed(&acme.operator, credit(U128_MAX)))
        .await;
    tally.record("CreditAccount u128::MAX #2", class(&second));
    let refused = second
        .as_ref()
        .err()
        .is_some_and(|e| e.code() == Code::OutOfRange && reason(e) == "AMOUNT_OUT_OF_RANGE");
    tally.check(refused, "CreditAccount u128::MAX #2", || {
        format!(
            "expected OUT_OF_RANGE AMOUNT_OUT_OF_RANGE, got {:?}",
            second.as_ref().err()
        )
    });
    for amount in ["1", U128_MAX_PLUS_ONE] {
        let case = format!("CreditAccount {amount} at the bound");
        let answer = ops
            .credit_account(authed(&acme.operator, credit(amount)))
            .await;
        tally.record(&case, class(&answer));
        let typed = answer.as_ref().err().is_some_and(|e| {
            matches!(e.code(), Code::OutOfRange | Code::InvalidArgument) && !reason(e).is_empty()
        });
        tally.check(typed, &case, || {
            format!("answered {:?}", answer.as_ref().err())
        });
    }
    let balance = ops
        .get_balance(authed(
            &acme.client,
            GetBalanceRequest {
                account: ACCOUNT.into(),
                asset: "ETH".into(),
            },
        ))
        .await;
    tally.record("GetBalance after overflow", class(&balance));
    let available = balance.as_ref().ok().map(|b| b.get_ref().available.clone());
    tally.check(
        available.as_deref() == Some(U128_MAX),
        "GetBalance after overflow",
        || format!("read {available:?}, expected u128::MAX"),
    );
    tally.check(
        world.stack.assert_invariants().await.is_ok(),
        "invariants",
        || "violated".to_owned(),
    );
    suite.check_alive(&mut tally, "the overflow cases").await;
    tally.finish()
}
