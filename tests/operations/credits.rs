//! Operator credits need two principals (issue 25): the operations API records a proposal with an
//! operator's signed credit statement (pending, not spendable), and the witness credits it once
//! enough distinct OPERATOR keys of the tenant's trust statement (signed by a pinned
//! administrator key) signed exactly its fields. Real services, real witness pass.

use opledger_domain::amount::Amount;
use opledger_domain::approval::CreditRule;
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::payload::AssetCode;
use opledger_proto::v1 as pb;
use opledger_testkit::trust::{
    approver_key, default_parts, key_id, operator_key, publish, signed_credit,
};
use opledger_tests::chain::credit_witness;
use opledger_tests::{Stack, Tenant, authed, new_key, reason};
use opledger_witness::Outcome;

/// A CreditAccount request for `amount` ETH to the treasury under `key`, signed by `signer`.
fn request(
    tenant: &Tenant,
    key: &str,
    amount: u128,
    signer: &opledger_domain::approval::SigningKey,
    version: u64,
) -> anyhow::Result<pb::CreditAccountRequest> {
    let credit_id = IdempotencyKey::parse(key)?.digest();
    Ok(pb::CreditAccountRequest {
        idempotency_key: key.to_owned(),
        account: "treasury".into(),
        asset: "ETH".into(),
        amount: amount.to_string(),
        statement: Some(statement(tenant, &credit_id, amount, signer, version)?),
    })
}

fn statement(
    tenant: &Tenant,
    credit_id: &[u8; 32],
    amount: u128,
    signer: &opledger_domain::approval::SigningKey,
    version: u64,
) -> anyhow::Result<pb::SignedCreditStatement> {
    Ok(pb::SignedCreditStatement {
        operator_key_id: key_id(signer).to_hex(),
        policy_version: version,
        signature: signed_credit(
            tenant.id, credit_id, "treasury", "ETH", amount, signer, version,
        )?,
    })
}

async fn balance(stack: &Stack, tenant: &Tenant) -> anyhow::Result<(String, String)> {
    let b = stack
        .client()
        .await?
        .get_balance(authed(
            &tenant.operator,
            pb::GetBalanceRequest {
                account: "treasury".into(),
                asset: "ETH".into(),
            },
        ))
        .await?
        .into_inner();
    Ok((b.available, b.pending))
}

async fn witness_for(
    stack: &Stack,
    tenant: &Tenant,
) -> anyhow::Result<(opledger_witness::CreditWitness, opledger_testkit::Anvil)> {
    // Operator credits read no chain; the witness still needs a network to start.
    let node = opledger_testkit::Anvil::start().await?;
    let witness = credit_witness(stack, &[&node.rpc_url()], 1, &[tenant.id]).await?;
    Ok((witness, node))
}

#[tokio::test]
async fn an_operator_credit_is_pending_until_the_witness_verifies_it_then_credited_once()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let (witness, _node) = witness_for(&stack, &acme).await?;
    let mut client = stack.client().await?;
    let key = new_key();
    let op0 = operator_key(acme.id, 0);
    let first = client
        .credit_account(authed(&acme.operator, request(&acme, &key, 500, &op0, 1)?))
        .await?
        .into_inner();
    let credit = first.credit.clone().unwrap_or_default();
    assert!(!first.replayed);
    assert_eq!(credit.state(), pb::CreditState::Pending);
    assert_eq!(credit.kind(), pb::CreditKind::Operator);
    assert_eq!(credit.operator_statements, 1);
    let shown = first.balance.unwrap_or_default();
    assert_eq!(
        (shown.available, shown.pending),
        ("1000".into(), "500".into())
    );
    // Pending money is not spendable: a withdrawal of 1001 is refused.
    let err = stack
        .withdraw(&acme, "1001", opledger_tests::ALICE)
        .await
        .expect_err("pending is not available");
    let status = err
        .downcast_ref::<tonic::Status>()
        .ok_or_else(|| anyhow::anyhow!("not a gRPC status: {err:#}"))?;
    assert_eq!(reason(status), "INSUFFICIENT_FUNDS");

    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(balance(&stack, &acme).await?, ("1500".into(), "0".into()));
    let got = client
        .get_credit(authed(
            &acme.operator,
            pb::GetCreditRequest {
                credit_id: credit.credit_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(got.state(), pb::CreditState::Credited);

    // Replays change nothing: the API answers the credited credit, the witness has nothing left.
    let again = client
        .credit_account(authed(&acme.operator, request(&acme, &key, 500, &op0, 1)?))
        .await?
        .into_inner();
    assert!(again.replayed);
    assert_eq!(
        again.credit.map(|c| c.state()),
        Some(pb::CreditState::Credited)
    );
    assert_eq!(witness.tick(16).await, []);
    assert_eq!(balance(&stack, &acme).await?, ("1500".into(), "0".into()));
    // The same key with another amount is another payload.
    let err = client
        .credit_account(authed(&acme.operator, request(&acme, &key, 501, &op0, 1)?))
        .await
        .expect_err("changed amount");
    assert_eq!(reason(&err), "IDEMPOTENCY_KEY_REUSED");
    // A credited credit takes no more statements.
    let op1 = operator_key(acme.id, 1);
    let credit_id = IdempotencyKey::parse(&key)?.digest();
    let err = client
        .sign_credit(authed(
            &acme.operator,
            pb::SignCreditRequest {
                credit_id: credit.credit_id,
                statement: Some(statement(&acme, &credit_id, 500, &op1, 1)?),
            },
        ))
        .await
        .expect_err("not pending");
    assert_eq!(reason(&err), "CREDIT_NOT_PENDING");
    assert_eq!(stack.count("ledger_credits", acme.id).await?, 2);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_credit_above_the_tenants_threshold_needs_a_second_operator() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let mut parts = default_parts(acme.id);
    let eth = AssetCode::parse("ETH")?;
    for (min_amount, required_operators) in [(0, 1), (1000, 2)] {
        parts.credit_rules.push((
            eth.clone(),
            CreditRule {
                min_amount: Amount::new(min_amount),
                required_operators,
            },
        ));
    }
    publish(&stack.admin, acme.id, 2, parts).await?;
    let (witness, _node) = witness_for(&stack, &acme).await?;
    let mut client = stack.client().await?;
    let (small, large) = (new_key(), new_key());
    let (op0, op1) = (operator_key(acme.id, 0), operator_key(acme.id, 1));
    client
        .credit_account(authed(
            &acme.operator,
            request(&acme, &small, 999, &op0, 2)?,
        ))
        .await?;
    let large_credit = client
        .credit_account(authed(
            &acme.operator,
            request(&acme, &large, 1000, &op0, 2)?,
        ))
        .await?
        .into_inner()
        .credit
        .unwrap_or_default();
    // Below the threshold one operator is enough; at it, the credit waits for a second.
    let mut outcomes = witness.tick(16).await;
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, [Outcome::Attested, Outcome::NoVerdict]);
    assert_eq!(balance(&stack, &acme).await?, ("999".into(), "1000".into()));
    // The same operator signing twice is still one operator.
    let large_id = IdempotencyKey::parse(&large)?.digest();
    client
        .credit_account(authed(
            &acme.operator,
            request(&acme, &large, 1000, &op0, 2)?,
        ))
        .await?;
    assert_eq!(witness.tick(16).await, [Outcome::NoVerdict]);
    let signed = client
        .sign_credit(authed(
            &acme.operator,
            pb::SignCreditRequest {
                credit_id: large_credit.credit_id,
                statement: Some(statement(&acme, &large_id, 1000, &op1, 2)?),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(signed.operator_statements, 2);
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(balance(&stack, &acme).await?, ("1999".into(), "0".into()));
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_statement_that_does_not_verify_is_refused_at_the_edge_and_nothing_is_recorded()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let mut client = stack.client().await?;
    let key = new_key();
    let credit_id = IdempotencyKey::parse(&key)?.digest();
    let op0 = operator_key(acme.id, 0);
    let cases: Vec<(&str, pb::SignedCreditStatement)> = vec![
        // An approver's key: it approves withdrawals, it never credits.
        (
            "approver key",
            statement(&acme, &credit_id, 500, &approver_key(acme.id, 0), 1)?,
        ),
        // The operator signed another amount than the request's.
        ("other amount", statement(&acme, &credit_id, 5, &op0, 1)?),
        // Another credit's statement.
        ("other credit", statement(&acme, &[7; 32], 500, &op0, 1)?),
        // A version the tenant never published.
        (
            "future version",
            statement(&acme, &credit_id, 500, &op0, 9)?,
        ),
    ];
    for (case, signed) in cases {
        let err = client
            .credit_account(authed(
                &acme.operator,
                pb::CreditAccountRequest {
                    idempotency_key: key.clone(),
                    account: "treasury".into(),
                    asset: "ETH".into(),
                    amount: "500".into(),
                    statement: Some(signed),
                },
            ))
            .await
            .expect_err(case);
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{case}: {err:?}");
        assert_eq!(reason(&err), "CREDIT_STATEMENT_INVALID", "{case}");
    }
    let err = client
        .credit_account(authed(
            &acme.operator,
            pb::CreditAccountRequest {
                idempotency_key: key.clone(),
                account: "treasury".into(),
                asset: "ETH".into(),
                amount: "500".into(),
                statement: None,
            },
        ))
        .await
        .expect_err("no statement");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert_eq!(stack.count("credit_proposals", acme.id).await?, 0);
    assert_eq!(stack.count("credit_statements", acme.id).await?, 0);
    Ok(())
}

#[tokio::test]
async fn a_deposit_without_chain_evidence_is_credited_only_by_operators_statements()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let (witness, _node) = witness_for(&stack, &acme).await?;
    // The inbox's login proposes a deposit whose provider sent no chain evidence.
    let inbox = stack
        .db
        .pool_as(opledger_testkit::ServiceRole::Inbox)
        .await?;
    let credit_id = [42_u8; 32];
    sqlx::query(
        "INSERT INTO credit_proposals (tenant_id, credit_id, kind, account, asset, amount) \
         VALUES ($1, $2, 'DEPOSIT', 'treasury', 'ETH', 700)",
    )
    .bind(acme.id.as_uuid())
    .bind(credit_id.as_slice())
    .execute(&inbox)
    .await?;
    assert_eq!(witness.tick(16).await, [Outcome::NoVerdict]);
    let mut client = stack.client().await?;
    let pending = client
        .list_pending_credits(authed(
            &acme.operator,
            pb::ListPendingCreditsRequest::default(),
        ))
        .await?
        .into_inner()
        .credits;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].kind(), pb::CreditKind::Deposit);
    assert!(!pending[0].chain_evidence);
    assert_eq!(pending[0].credit_id, hex::encode(credit_id));
    client
        .sign_credit(authed(
            &acme.operator,
            pb::SignCreditRequest {
                credit_id: hex::encode(credit_id),
                statement: Some(statement(
                    &acme,
                    &credit_id,
                    700,
                    &operator_key(acme.id, 1),
                    1,
                )?),
            },
        ))
        .await?;
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(balance(&stack, &acme).await?, ("700".into(), "0".into()));
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_forged_statement_row_refuses_the_credit_for_good() -> anyhow::Result<()> {
    // Adversary: the operations login writes a statement row the edge never checked (a key id of
    // the registry, a signature over another amount). The witness verifies every row and refuses
    // the credit: a forged row is never ignored silently.
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let (witness, _node) = witness_for(&stack, &acme).await?;
    let operations = stack
        .db
        .pool_as(opledger_testkit::ServiceRole::Operations)
        .await?;
    let credit_id = [9_u8; 32];
    let op0 = operator_key(acme.id, 0);
    let forged = signed_credit(acme.id, &credit_id, "treasury", "ETH", 1, &op0, 1)?;
    sqlx::query(
        "INSERT INTO credit_proposals (tenant_id, credit_id, kind, account, asset, amount) \
         VALUES ($1, $2, 'OPERATOR', 'treasury', 'ETH', 1000000)",
    )
    .bind(acme.id.as_uuid())
    .bind(credit_id.as_slice())
    .execute(&operations)
    .await?;
    sqlx::query(
        "INSERT INTO credit_statements (tenant_id, credit_id, operator_key_id, policy_version, \
           signature) VALUES ($1, $2, $3, 1, $4)",
    )
    .bind(acme.id.as_uuid())
    .bind(credit_id.as_slice())
    .bind(key_id(&op0).to_hex())
    .bind(forged)
    .execute(&operations)
    .await?;
    assert_eq!(
        witness.tick(16).await,
        [Outcome::Refused("CREDIT_SIGNATURE_INVALID")]
    );
    assert_eq!(stack.count("ledger_credits", acme.id).await?, 0);
    assert_eq!(witness.tick(16).await, []);
    Ok(())
}

#[tokio::test]
async fn credits_the_witness_cannot_decide_never_starve_the_ones_behind_them() -> anyhow::Result<()>
{
    // Adversary: the inbox login (or a faulty provider) fills the head of the witness's queue with
    // deposits nobody can witness (no chain evidence, no statements). The witness reads its queue
    // a page per pass, round robin: an operator credit proposed after them is still credited.
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let (witness, _node) = witness_for(&stack, &acme).await?;
    let inbox = stack
        .db
        .pool_as(opledger_testkit::ServiceRole::Inbox)
        .await?;
    for n in 1..=5_u8 {
        sqlx::query(
            "INSERT INTO credit_proposals (tenant_id, credit_id, kind, account, asset, amount) \
             VALUES ($1, $2, 'DEPOSIT', 'treasury', 'ETH', 1)",
        )
        .bind(acme.id.as_uuid())
        .bind(vec![n; 32])
        .execute(&inbox)
        .await?;
    }
    let key = new_key();
    stack
        .client()
        .await?
        .credit_account(authed(
            &acme.operator,
            request(&acme, &key, 300, &operator_key(acme.id, 0), 1)?,
        ))
        .await?;
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.extend(witness.tick(2).await);
    }
    // Pages of two: [junk, junk], [junk, junk], [junk, the credit].
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(
        seen.iter().filter(|o| **o == Outcome::Attested).count(),
        1,
        "{seen:?}"
    );
    assert_eq!(balance(&stack, &acme).await?, ("300".into(), "5".into()));
    // And round again: the five stay pending, examined in turn.
    assert_eq!(
        witness.tick(2).await,
        [Outcome::NoVerdict, Outcome::NoVerdict]
    );
    Ok(())
}

#[tokio::test]
async fn a_forged_statement_on_another_logins_deposit_is_left_out_and_never_kills_it()
-> anyhow::Result<()> {
    // Adversary: the operations login writes a statement row that does not verify onto a deposit
    // the inbox's login proposed (without chain evidence). Refusing the deposit for good would
    // let one login kill another's credit: the row is left out (logged as a security signal),
    // the deposit stays pending, and a verified operator's statement still credits it.
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let (witness, _node) = witness_for(&stack, &acme).await?;
    let inbox = stack
        .db
        .pool_as(opledger_testkit::ServiceRole::Inbox)
        .await?;
    let operations = stack
        .db
        .pool_as(opledger_testkit::ServiceRole::Operations)
        .await?;
    let credit_id = [43_u8; 32];
    sqlx::query(
        "INSERT INTO credit_proposals (tenant_id, credit_id, kind, account, asset, amount) \
         VALUES ($1, $2, 'DEPOSIT', 'treasury', 'ETH', 700)",
    )
    .bind(acme.id.as_uuid())
    .bind(credit_id.as_slice())
    .execute(&inbox)
    .await?;
    let op0 = operator_key(acme.id, 0);
    let forged = signed_credit(acme.id, &credit_id, "treasury", "ETH", 1, &op0, 1)?;
    sqlx::query(
        "INSERT INTO credit_statements (tenant_id, credit_id, operator_key_id, policy_version, \
           signature) VALUES ($1, $2, $3, 1, $4)",
    )
    .bind(acme.id.as_uuid())
    .bind(credit_id.as_slice())
    .bind(key_id(&op0).to_hex())
    .bind(forged)
    .execute(&operations)
    .await?;
    assert_eq!(witness.tick(16).await, [Outcome::NoVerdict]);
    assert_eq!(stack.count("credit_refusals", acme.id).await?, 0);
    stack
        .client()
        .await?
        .sign_credit(authed(
            &acme.operator,
            pb::SignCreditRequest {
                credit_id: hex::encode(credit_id),
                statement: Some(statement(
                    &acme,
                    &credit_id,
                    700,
                    &operator_key(acme.id, 1),
                    1,
                )?),
            },
        ))
        .await?;
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(balance(&stack, &acme).await?, ("700".into(), "0".into()));
    stack.assert_invariants().await
}
