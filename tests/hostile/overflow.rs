//! The amount overflow cases. A credit is proposed first and applied only when the witness
//! attests it (issue 25), so the overflow is found where the credit would be applied: a second
//! u128::MAX credit of one account, an operator's or a signed deposit's, is refused by the witness
//! with `CREDIT_OUT_OF_RANGE`, nothing of it is committed and the balance still reads; one unit
//! beyond u128::MAX is refused as a value.

use crate::harness::{Suite, Tally, rng_for};
use crate::values::{U128_MAX, U128_MAX_PLUS_ONE};
use crate::wire::code_name;
use opledger_domain::idempotency::IdempotencyKey;
use opledger_proto::v1::{
    CreditAccountRequest, CreditState, GetBalanceRequest, GetCreditRequest,
    ListPendingCreditsRequest, SignCreditRequest,
};
use opledger_tests::inbox::deposit;
use opledger_tests::{authed, new_key, reason};
use opledger_witness::Outcome;
use tonic::Code;

const ACCOUNT: &str = "overflow";
const DEPOSIT_ACCOUNT: &str = "hook-overflow";

/// A credit of `amount` to [`ACCOUNT`] under a fresh key, signed by operator 0 over its fields
/// (over 1 when `amount` is no u128: the amount is refused before the statement is read).
fn credit(suite: &Suite, amount: &str) -> anyhow::Result<CreditAccountRequest> {
    let key = new_key();
    let credit_id = IdempotencyKey::parse(&key)?.digest();
    let signed = amount.parse().unwrap_or(1);
    Ok(CreditAccountRequest {
        idempotency_key: key,
        account: ACCOUNT.into(),
        asset: "ETH".into(),
        amount: amount.into(),
        statement: Some(suite.statement(&credit_id, ACCOUNT, "ETH", signed)?),
    })
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
    let witness = suite.credit_witness().await?;
    let u128_max: u128 = U128_MAX.parse()?;
    let mut ops = world.stack.client().await?;

    // Two signed deposits of u128::MAX for one account: both are proposals (a proposal moves no
    // balance, so neither can overflow one).
    for n in 1..=2 {
        let case = format!("deposit.confirmed u128::MAX #{n}");
        let body = deposit(
            &format!("0xhostile-max-{n}"),
            DEPOSIT_ACCOUNT,
            "ETH",
            U128_MAX,
        );
        let answer = world.post(&body).await?;
        tally.record(&case, &answer.to_string());
        tally.check(answer == 200, &case, || format!("answered {answer}"));
        let proposed = world
            .wait_rows("inbox_work", "AND status = 'DONE'", n)
            .await;
        tally.check(proposed.is_ok(), &case, || format!("{proposed:?}"));
    }
    let outcomes = world.outcomes().await?;
    tally.check(
        outcomes == ["DONE:CREDIT_PROPOSED", "DONE:CREDIT_PROPOSED"],
        "second u128::MAX deposit",
        || format!("outcomes {outcomes:?}, expected two proposals"),
    );
    // They carry no chain evidence: an operator witnesses both, so the witness tries to apply
    // both. The first is credited, the second would leave the range and is refused for good.
    let pending = ops
        .list_pending_credits(authed(&acme.operator, ListPendingCreditsRequest::default()))
        .await?
        .into_inner()
        .credits;
    let deposits: Vec<String> = pending
        .iter()
        .filter(|c| c.account == DEPOSIT_ACCOUNT)
        .map(|c| c.credit_id.clone())
        .collect();
    tally.check(deposits.len() == 2, "pending u128::MAX deposits", || {
        format!("{} pending, expected 2", deposits.len())
    });
    for id in &deposits {
        let credit_id: [u8; 32] = hex::decode(id)?
            .try_into()
            .map_err(|_| anyhow::anyhow!("credit id"))?;
        let signed = ops
            .sign_credit(authed(
                &acme.operator,
                SignCreditRequest {
                    credit_id: id.clone(),
                    statement: Some(suite.statement(
                        &credit_id,
                        DEPOSIT_ACCOUNT,
                        "ETH",
                        u128_max,
                    )?),
                },
            ))
            .await;
        tally.record("SignCredit u128::MAX deposit", class(&signed));
        tally.check(signed.is_ok(), "SignCredit u128::MAX deposit", || {
            format!("{:?}", signed.as_ref().err())
        });
    }
    let mut outcomes = witness.tick(64).await;
    outcomes.sort_by_key(|o| format!("{o:?}"));
    tally.check(
        outcomes == [Outcome::Attested, Outcome::Refused("CREDIT_OUT_OF_RANGE")],
        "witness of two u128::MAX deposits",
        || format!("outcomes {outcomes:?}, expected one credit and one CREDIT_OUT_OF_RANGE"),
    );
    let mut states = Vec::new();
    for id in &deposits {
        let got = ops
            .get_credit(authed(
                &acme.operator,
                GetCreditRequest {
                    credit_id: id.clone(),
                },
            ))
            .await?
            .into_inner();
        states.push((got.state(), got.refusal_reason));
    }
    states.sort();
    tally.check(
        states
            == [
                (CreditState::Credited, String::new()),
                (CreditState::Refused, "CREDIT_OUT_OF_RANGE".to_owned()),
            ],
        "u128::MAX deposits after the witness",
        || format!("states {states:?}"),
    );
    check_balance(
        &mut tally,
        &mut ops,
        &acme.client,
        DEPOSIT_ACCOUNT,
        U128_MAX,
    )
    .await;

    // Two operator credits of u128::MAX under two idempotency keys.
    let first = ops
        .credit_account(authed(&acme.operator, credit(&suite, U128_MAX)?))
        .await;
    tally.record("CreditAccount u128::MAX #1", class(&first));
    tally.check(first.is_ok(), "CreditAccount u128::MAX #1", || {
        format!("{:?}", first.as_ref().err())
    });
    let outcomes = witness.tick(64).await;
    tally.check(
        outcomes == [Outcome::Attested],
        "witness of CreditAccount u128::MAX #1",
        || format!("outcomes {outcomes:?}"),
    );
    let second = ops
        .credit_account(authed(&acme.operator, credit(&suite, U128_MAX)?))
        .await;
    tally.record("CreditAccount u128::MAX #2", class(&second));
    tally.check(second.is_ok(), "CreditAccount u128::MAX #2", || {
        format!("proposed: {:?}", second.as_ref().err())
    });
    let outcomes = witness.tick(64).await;
    tally.check(
        outcomes == [Outcome::Refused("CREDIT_OUT_OF_RANGE")],
        "witness of CreditAccount u128::MAX #2",
        || format!("outcomes {outcomes:?}, expected CREDIT_OUT_OF_RANGE"),
    );
    // One unit at the bound is proposed and refused the same way.
    let case = "CreditAccount 1 at the bound";
    let answer = ops
        .credit_account(authed(&acme.operator, credit(&suite, "1")?))
        .await;
    tally.record(case, class(&answer));
    tally.check(answer.is_ok(), case, || {
        format!("proposed: {:?}", answer.as_ref().err())
    });
    let outcomes = witness.tick(64).await;
    tally.check(
        outcomes == [Outcome::Refused("CREDIT_OUT_OF_RANGE")],
        case,
        || format!("outcomes {outcomes:?}, expected CREDIT_OUT_OF_RANGE"),
    );
    // One beyond u128::MAX is not an amount at all.
    let case = format!("CreditAccount {U128_MAX_PLUS_ONE}");
    let answer = ops
        .credit_account(authed(&acme.operator, credit(&suite, U128_MAX_PLUS_ONE)?))
        .await;
    tally.record(&case, class(&answer));
    let typed = answer.as_ref().err().is_some_and(|e| {
        matches!(e.code(), Code::OutOfRange | Code::InvalidArgument) && !reason(e).is_empty()
    });
    tally.check(typed, &case, || {
        format!("answered {:?}", answer.as_ref().err())
    });
    check_balance(&mut tally, &mut ops, &acme.client, ACCOUNT, U128_MAX).await;
    let refusals = world.rows("credit_refusals", "").await?;
    tally.check(refusals == 3, "refused credits", || {
        format!("{refusals} refusals, expected 3 (one deposit, two operator credits)")
    });
    tally.check(
        world.stack.assert_invariants().await.is_ok(),
        "invariants",
        || "violated".to_owned(),
    );
    suite.check_alive(&mut tally, "the overflow cases").await;
    tally.finish()
}

/// GetBalance of `account` reads `available` with nothing held or pending.
async fn check_balance(
    tally: &mut Tally,
    ops: &mut opledger_proto::v1::operations_service_client::OperationsServiceClient<
        tonic::transport::Channel,
    >,
    token: &str,
    account: &str,
    available: &str,
) {
    let case = format!("GetBalance {account} after overflow");
    let balance = ops
        .get_balance(authed(
            token,
            GetBalanceRequest {
                account: account.into(),
                asset: "ETH".into(),
            },
        ))
        .await;
    tally.record(&case, class(&balance));
    let read = balance.as_ref().ok().map(|b| {
        let b = b.get_ref();
        (b.available.clone(), b.held.clone(), b.pending.clone())
    });
    tally.check(
        read == Some((available.to_owned(), "0".to_owned(), "0".to_owned())),
        &case,
        || format!("read {read:?}, expected ({available}, 0, 0)"),
    );
}
