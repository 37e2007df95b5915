//! Hostile values for the operations service: every payload field, idempotency keys, ids, page
//! tokens and sizes, states, accounts and assets.

use super::{Case, accepts, run};
use crate::harness::{Suite, Tally};
use crate::values::{I32S, U32S};
use opledger_domain as domain;
use opledger_proto::v1 as pb;
use opledger_tests::{ALICE, BOB, authed, new_key, payload};

/// A payload field: its name, how to set it, and whether the domain accepts a value for it.
type PayloadField = (
    &'static str,
    fn(&mut pb::WithdrawalPayload, String),
    fn(&str) -> bool,
);

fn create_cases(texts: &[(String, String)]) -> Vec<Case<pb::CreateWithdrawalRequest>> {
    let fields: [PayloadField; 7] = [
        (
            "source_account",
            |p, v| p.source_account = v,
            |t| accepts(domain::AccountName::parse, t),
        ),
        (
            "asset",
            |p, v| p.asset = v,
            |t| accepts(domain::AssetCode::parse, t),
        ),
        (
            "network",
            |p, v| p.network = v,
            |t| accepts(domain::NetworkId::parse, t),
        ),
        (
            "destination",
            |p, v| p.destination = v,
            |t| accepts(domain::Destination::parse, t),
        ),
        (
            "memo",
            |p, v| p.memo = Some(v),
            |t| accepts(domain::Memo::parse, t),
        ),
        (
            "amount",
            |p, v| p.amount = v,
            |t| accepts(domain::Amount::parse, t),
        ),
        (
            "fee_cap",
            |p, v| p.fee_cap = v,
            |t| accepts(domain::Amount::parse, t),
        ),
    ];
    let mut cases = Vec::new();
    for (label, text) in texts {
        cases.push((
            format!("idempotency_key={label}"),
            pb::CreateWithdrawalRequest {
                idempotency_key: text.clone(),
                payload: Some(payload("1", ALICE)),
            },
            accepts(domain::IdempotencyKey::parse, text),
        ));
        for (field, set, valid) in &fields {
            let mut p = payload("1", BOB);
            set(&mut p, text.clone());
            cases.push((
                format!("{field}={label}"),
                pb::CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(p),
                },
                valid(text),
            ));
        }
    }
    for version in U32S {
        cases.push((
            format!("policy_version={version}"),
            pb::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(pb::WithdrawalPayload {
                    policy_version: version,
                    ..payload("1", ALICE)
                }),
            },
            true,
        ));
    }
    cases.push((
        "no_payload".into(),
        pb::CreateWithdrawalRequest {
            idempotency_key: new_key(),
            payload: None,
        },
        false,
    ));
    cases.push((
        "everything_empty".into(),
        pb::CreateWithdrawalRequest::default(),
        false,
    ));
    cases
}

fn credit_cases(texts: &[(String, String)]) -> Vec<Case<pb::CreditAccountRequest>> {
    let base = || pb::CreditAccountRequest {
        idempotency_key: new_key(),
        account: "hostile-credit".into(),
        asset: "ETH".into(),
        amount: "1".into(),
    };
    let mut cases = Vec::new();
    for (label, text) in texts {
        let t = text.clone();
        cases.push((
            format!("idempotency_key={label}"),
            pb::CreditAccountRequest {
                idempotency_key: t.clone(),
                ..base()
            },
            accepts(domain::IdempotencyKey::parse, text),
        ));
        cases.push((
            format!("account={label}"),
            pb::CreditAccountRequest {
                account: t.clone(),
                ..base()
            },
            accepts(domain::AccountName::parse, text),
        ));
        cases.push((
            format!("asset={label}"),
            pb::CreditAccountRequest {
                asset: t.clone(),
                ..base()
            },
            accepts(domain::AssetCode::parse, text),
        ));
        cases.push((
            format!("amount={label}"),
            pb::CreditAccountRequest {
                amount: t,
                ..base()
            },
            accepts(domain::Amount::parse, text),
        ));
    }
    cases.push((
        "everything_empty".into(),
        pb::CreditAccountRequest::default(),
        false,
    ));
    cases
}

/// Every operations method with hostile values.
pub async fn batch(
    suite: &Suite,
    tally: &mut Tally,
    texts: &[(String, String)],
) -> anyhow::Result<()> {
    let acme = suite.acme();
    let stack = &suite.world.stack;
    let ops = stack.client().await?;
    let (client, operator) = (acme.client.clone(), acme.operator.clone());
    run(tally, "CreateWithdrawal", create_cases(texts), |r| {
        let mut c = ops.clone();
        let r = authed(&client, r);
        async move { c.create_withdrawal(r).await }
    })
    .await;
    run(tally, "CreditAccount", credit_cases(texts), |r| {
        let mut c = ops.clone();
        let r = authed(&operator, r);
        async move { c.credit_account(r).await }
    })
    .await;
    let ids = texts
        .iter()
        .map(|(l, t)| {
            (
                format!("withdrawal_id={l}"),
                pb::GetWithdrawalRequest {
                    withdrawal_id: t.clone(),
                },
                false,
            )
        })
        .collect();
    run(tally, "GetWithdrawal", ids, |r| {
        let mut c = ops.clone();
        let r = authed(&client, r);
        async move { c.get_withdrawal(r).await }
    })
    .await;
    let mut lists: Vec<Case<pb::ListWithdrawalsRequest>> = texts
        .iter()
        .map(|(l, t)| {
            (
                format!("page_token={l}"),
                pb::ListWithdrawalsRequest {
                    page_token: t.clone(),
                    ..Default::default()
                },
                true,
            )
        })
        .collect();
    for n in I32S {
        lists.push((
            format!("page_size={n}"),
            pb::ListWithdrawalsRequest {
                page_size: n,
                ..Default::default()
            },
            true,
        ));
        lists.push((
            format!("states=[{n}]"),
            pb::ListWithdrawalsRequest {
                states: vec![n],
                ..Default::default()
            },
            true,
        ));
    }
    lists.push((
        "states_x10000".into(),
        pb::ListWithdrawalsRequest {
            states: vec![1; 10_000],
            ..Default::default()
        },
        true,
    ));
    run(tally, "ListWithdrawals", lists, |r| {
        let mut c = ops.clone();
        let r = authed(&client, r);
        async move { c.list_withdrawals(r).await }
    })
    .await;
    let mut balances = Vec::new();
    for (l, t) in texts {
        balances.push((
            format!("account={l}"),
            pb::GetBalanceRequest {
                account: t.clone(),
                asset: "ETH".into(),
            },
            accepts(domain::AccountName::parse, t),
        ));
        balances.push((
            format!("asset={l}"),
            pb::GetBalanceRequest {
                account: "treasury".into(),
                asset: t.clone(),
            },
            accepts(domain::AssetCode::parse, t),
        ));
    }
    run(tally, "GetBalance", balances, |r| {
        let mut c = ops.clone();
        let r = authed(&client, r);
        async move { c.get_balance(r).await }
    })
    .await;
    Ok(())
}
