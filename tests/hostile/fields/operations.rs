//! Hostile values for the operations service: every payload field, idempotency keys, ids, page
//! tokens and sizes, states, accounts and assets, and the fields of operators' signed credit
//! statements.

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

/// A CreditAccount request carrying operator 0's statement over exactly its fields when they are
/// a credit (so a hostile value the domain accepts is accepted), else a statement of valid shape
/// over placeholders (the field is refused before the statement is read).
fn credit_request(
    suite: &Suite,
    key: String,
    account: String,
    asset: String,
    amount: String,
) -> anyhow::Result<pb::CreditAccountRequest> {
    let credit_id = domain::IdempotencyKey::parse(&key).map_or([0; 32], |k| k.digest());
    let signed_account =
        domain::AccountName::parse(&account).map_or("hostile-credit", |_| account.as_str());
    let signed_asset = domain::AssetCode::parse(&asset).map_or("ETH", |_| asset.as_str());
    // Zero is refused before the statement is read, and no statement signs it.
    let signed_amount = domain::Amount::parse(&amount).map_or(1, |a| a.get().max(1));
    let statement = suite.statement(&credit_id, signed_account, signed_asset, signed_amount)?;
    Ok(pb::CreditAccountRequest {
        idempotency_key: key,
        account,
        asset,
        amount,
        statement: Some(statement),
    })
}

fn credit_cases(
    suite: &Suite,
    texts: &[(String, String)],
) -> anyhow::Result<Vec<Case<pb::CreditAccountRequest>>> {
    let base =
        |key: Option<&str>, account: Option<&str>, asset: Option<&str>, amount: Option<&str>| {
            credit_request(
                suite,
                key.map_or_else(new_key, str::to_owned),
                account.unwrap_or("hostile-credit").to_owned(),
                asset.unwrap_or("ETH").to_owned(),
                amount.unwrap_or("1").to_owned(),
            )
        };
    let mut cases = Vec::new();
    for (label, text) in texts {
        let t = Some(text.as_str());
        cases.push((
            format!("idempotency_key={label}"),
            base(t, None, None, None)?,
            accepts(domain::IdempotencyKey::parse, text),
        ));
        cases.push((
            format!("account={label}"),
            base(None, t, None, None)?,
            accepts(domain::AccountName::parse, text),
        ));
        cases.push((
            format!("asset={label}"),
            base(None, None, t, None)?,
            accepts(domain::AssetCode::parse, text),
        ));
        cases.push((
            format!("amount={label}"),
            base(None, None, None, t)?,
            accepts(domain::Amount::parse, text),
        ));
        // An operator key id is never a hostile text: at best a well-formed id that the tenant's
        // trust statement does not register.
        let mut request = base(None, None, None, None)?;
        if let Some(statement) = request.statement.as_mut() {
            statement.operator_key_id = text.clone();
        }
        cases.push((format!("statement.operator_key_id={label}"), request, false));
    }
    for version in [0, 2, 9999, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
        let mut request = base(None, None, None, None)?;
        if let Some(statement) = request.statement.as_mut() {
            statement.policy_version = version;
        }
        cases.push((
            format!("statement.policy_version={version}"),
            request,
            false,
        ));
    }
    for len in [0, 1, 63, 65, 10_000] {
        let mut request = base(None, None, None, None)?;
        if let Some(statement) = request.statement.as_mut() {
            statement.signature = vec![0xa5; len];
        }
        cases.push((format!("statement.signature_len={len}"), request, false));
    }
    // A signature of the right length that signs nothing.
    let mut request = base(None, None, None, None)?;
    if let Some(statement) = request.statement.as_mut() {
        statement.signature = vec![0; 64];
    }
    cases.push(("statement.signature=zeros".into(), request, false));
    cases.push((
        "no_statement".into(),
        pb::CreditAccountRequest {
            statement: None,
            ..base(None, None, None, None)?
        },
        false,
    ));
    cases.push((
        "everything_empty".into(),
        pb::CreditAccountRequest::default(),
        false,
    ));
    Ok(cases)
}

/// Makes one field of a CreditAccount request malformed.
type Malform = fn(&mut pb::CreditAccountRequest);

/// The statement fields of a CreditAccount request, each malformed alone: a typed INVALID_ARGUMENT
/// (INVALID_FIELD) and nothing recorded.
async fn malformed_statements(suite: &Suite, tally: &mut Tally) -> anyhow::Result<()> {
    let acme = suite.acme();
    let stack = &suite.world.stack;
    let mut ops = stack.client().await?;
    let malformations: [(&str, Malform); 7] = [
        ("missing statement", |r| r.statement = None),
        ("key id in uppercase", |r| {
            if let Some(s) = r.statement.as_mut() {
                s.operator_key_id = s.operator_key_id.to_uppercase();
            }
        }),
        ("key id of 31 characters", |r| {
            if let Some(s) = r.statement.as_mut() {
                s.operator_key_id.pop();
            }
        }),
        ("key id not hex", |r| {
            if let Some(s) = r.statement.as_mut() {
                s.operator_key_id = "g".repeat(32);
            }
        }),
        ("63-byte signature", |r| {
            if let Some(s) = r.statement.as_mut() {
                s.signature.pop();
            }
        }),
        ("policy version 0", |r| {
            if let Some(s) = r.statement.as_mut() {
                s.policy_version = 0;
            }
        }),
        ("policy version beyond i64", |r| {
            if let Some(s) = r.statement.as_mut() {
                s.policy_version = u64::MAX;
            }
        }),
    ];
    let mut ids = Vec::new();
    for (label, malform) in malformations {
        let case = format!("CreditAccount {label}");
        let key = new_key();
        ids.push(domain::IdempotencyKey::parse(&key)?.digest().to_vec());
        let mut request = credit_request(
            suite,
            key,
            "hostile-credit".into(),
            "ETH".into(),
            "5".into(),
        )?;
        malform(&mut request);
        let answer = ops.credit_account(authed(&acme.operator, request)).await;
        let class = answer
            .as_ref()
            .map_or_else(|e| crate::wire::code_name(e.code()), |_| "OK");
        tally.record(&case, class);
        let refused = answer.as_ref().err().is_some_and(|e| {
            e.code() == tonic::Code::InvalidArgument && opledger_tests::reason(e) == "INVALID_FIELD"
        });
        tally.check(refused, &case, || {
            format!("expected INVALID_ARGUMENT INVALID_FIELD, answered {class}")
        });
    }
    let (recorded,): (i64,) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM credit_proposals WHERE credit_id = ANY($1)) \
              + (SELECT count(*) FROM credit_statements WHERE credit_id = ANY($1))",
    )
    .bind(&ids)
    .fetch_one(stack.admin.pool())
    .await?;
    tally.check(recorded == 0, "CreditAccount malformed statements", || {
        format!("{recorded} rows recorded, expected none")
    });
    Ok(())
}

/// SignCredit, GetCredit and ListPendingCredits with hostile values: never a statement added,
/// never a credit shown that is not the tenant's.
async fn credit_reads_and_signatures(
    suite: &Suite,
    tally: &mut Tally,
    texts: &[(String, String)],
) -> anyhow::Result<()> {
    let acme = suite.acme();
    let ops = suite.world.stack.client().await?;
    let operator = acme.operator.clone();
    // A pending credit that hostile statements try to sign.
    let key = new_key();
    let pending_id = domain::IdempotencyKey::parse(&key)?.digest();
    ops.clone()
        .credit_account(authed(
            &operator,
            credit_request(
                suite,
                key,
                "hostile-credit".into(),
                "ETH".into(),
                "7".into(),
            )?,
        ))
        .await?;
    let valid_statement = suite.statement(&pending_id, "hostile-credit", "ETH", 7)?;
    let mut signs: Vec<Case<pb::SignCreditRequest>> = Vec::new();
    for (label, text) in texts {
        signs.push((
            format!("credit_id={label}"),
            pb::SignCreditRequest {
                credit_id: text.clone(),
                statement: Some(valid_statement.clone()),
            },
            false,
        ));
        let mut statement = valid_statement.clone();
        statement.operator_key_id = text.clone();
        signs.push((
            format!("statement.operator_key_id={label}"),
            pb::SignCreditRequest {
                credit_id: hex::encode(pending_id),
                statement: Some(statement),
            },
            false,
        ));
    }
    for version in [0, 2, u64::MAX] {
        let mut statement = valid_statement.clone();
        statement.policy_version = version;
        signs.push((
            format!("statement.policy_version={version}"),
            pb::SignCreditRequest {
                credit_id: hex::encode(pending_id),
                statement: Some(statement),
            },
            false,
        ));
    }
    for len in [0, 63, 65] {
        let mut statement = valid_statement.clone();
        statement.signature = vec![0x5a; len];
        signs.push((
            format!("statement.signature_len={len}"),
            pb::SignCreditRequest {
                credit_id: hex::encode(pending_id),
                statement: Some(statement),
            },
            false,
        ));
    }
    // Operator 0's statement over another amount: well formed, never valid for this credit.
    signs.push((
        "statement.other_amount".into(),
        pb::SignCreditRequest {
            credit_id: hex::encode(pending_id),
            statement: Some(suite.statement(&pending_id, "hostile-credit", "ETH", 8)?),
        },
        false,
    ));
    signs.push((
        "no_statement".into(),
        pb::SignCreditRequest {
            credit_id: hex::encode(pending_id),
            statement: None,
        },
        false,
    ));
    signs.push((
        "everything_empty".into(),
        pb::SignCreditRequest::default(),
        false,
    ));
    run(tally, "SignCredit", signs, |r| {
        let mut c = ops.clone();
        let r = authed(&operator, r);
        async move { c.sign_credit(r).await }
    })
    .await;
    let gets = texts
        .iter()
        .map(|(l, t)| {
            (
                format!("credit_id={l}"),
                pb::GetCreditRequest {
                    credit_id: t.clone(),
                },
                false,
            )
        })
        .collect();
    run(tally, "GetCredit", gets, |r| {
        let mut c = ops.clone();
        let r = authed(&operator, r);
        async move { c.get_credit(r).await }
    })
    .await;
    let lists = I32S
        .iter()
        .map(|n| {
            (
                format!("page_size={n}"),
                pb::ListPendingCreditsRequest { page_size: *n },
                (0..=500).contains(n),
            )
        })
        .collect();
    run(tally, "ListPendingCredits", lists, |r| {
        let mut c = ops.clone();
        let r = authed(&operator, r);
        async move { c.list_pending_credits(r).await }
    })
    .await;
    // The pending credit took no statement beyond the one it was proposed with.
    let credit = ops
        .clone()
        .get_credit(authed(
            &operator,
            pb::GetCreditRequest {
                credit_id: hex::encode(pending_id),
            },
        ))
        .await?
        .into_inner();
    tally.check(
        credit.operator_statements == 1 && credit.state() == pb::CreditState::Pending,
        "SignCredit hostile statements",
        || {
            format!(
                "{} statements, state {:?}: a hostile statement was recorded",
                credit.operator_statements,
                credit.state()
            )
        },
    );
    Ok(())
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
    run(tally, "CreditAccount", credit_cases(suite, texts)?, |r| {
        let mut c = ops.clone();
        let r = authed(&operator, r);
        async move { c.credit_account(r).await }
    })
    .await;
    malformed_statements(suite, tally).await?;
    credit_reads_and_signatures(suite, tally, texts).await?;
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
