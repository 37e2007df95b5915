//! Funding accounts: idempotent operator credits. The operations API only proposes a credit (it
//! stays pending, not spendable); the account moves once the witness attests it (issue 25,
//! `credits.rs`). Idempotency by key stays the API's.

use opledger_domain::idempotency::IdempotencyKey;
use opledger_proto::v1::{CreditAccountRequest, SignedCreditStatement};
use opledger_testkit::trust::{key_id, operator_key, signed_credit};
use opledger_tests::chain::credit_witness;
use opledger_tests::{Stack, Tenant, authed, new_key, reason};
use opledger_witness::{CreditWitness, Outcome};

/// Operator credits read no chain, so the credit witness's evidence endpoint is never called: a
/// loopback port nobody listens on (the discard port) is enough to build it.
const UNUSED_EVIDENCE_URL: &str = "http://127.0.0.1:9";

/// A credit witness of the stack that verifies `tenant`'s operators' statements.
pub(crate) async fn witness(stack: &Stack, tenant: &Tenant) -> anyhow::Result<CreditWitness> {
    credit_witness(stack, &[UNUSED_EVIDENCE_URL], 1, &[tenant.id]).await
}

/// Operator 0's statement (trust statement version 1) over the credit of exactly these fields
/// under `key`.
pub(crate) fn statement(
    tenant: &Tenant,
    key: &str,
    account: &str,
    asset: &str,
    amount: u128,
) -> anyhow::Result<SignedCreditStatement> {
    let signer = operator_key(tenant.id, 0);
    let credit_id = IdempotencyKey::parse(key)?.digest();
    Ok(SignedCreditStatement {
        operator_key_id: key_id(&signer).to_hex(),
        policy_version: 1,
        signature: signed_credit(tenant.id, &credit_id, account, asset, amount, &signer, 1)?,
    })
}

/// A CreditAccount request under `key`, signed by operator 0 over exactly its fields.
pub(crate) fn signed(
    tenant: &Tenant,
    key: &str,
    account: &str,
    asset: &str,
    amount: u128,
) -> anyhow::Result<CreditAccountRequest> {
    Ok(CreditAccountRequest {
        idempotency_key: key.to_owned(),
        account: account.to_owned(),
        asset: asset.to_owned(),
        amount: amount.to_string(),
        statement: Some(statement(tenant, key, account, asset, amount)?),
    })
}

#[tokio::test]
async fn credits_are_idempotent_by_key_and_refuse_changed_content() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let witness = witness(&stack, &acme).await?;
    let mut client = stack.client().await?;
    let key = new_key();
    let request = signed(&acme, &key, "treasury", "ETH", 500)?;
    let first = client
        .credit_account(authed(&acme.operator, request.clone()))
        .await?
        .into_inner();
    let again = client
        .credit_account(authed(&acme.operator, request.clone()))
        .await?
        .into_inner();
    assert!(!first.replayed && again.replayed);
    // One proposal, pending: the replay proposed nothing more.
    let shown = again.balance.unwrap_or_default();
    assert_eq!(
        (shown.available.as_str(), shown.pending.as_str()),
        ("0", "500")
    );
    assert_eq!(stack.count("credit_proposals", acme.id).await?, 1);
    let err = client
        .credit_account(authed(
            &acme.operator,
            signed(&acme, &key, "treasury", "ETH", 501)?,
        ))
        .await
        .expect_err("changed amount");
    assert_eq!(reason(&err), "IDEMPOTENCY_KEY_REUSED");
    let zero_key = new_key();
    let err = client
        .credit_account(authed(
            &acme.operator,
            CreditAccountRequest {
                amount: "0".into(),
                ..signed(&acme, &zero_key, "treasury", "ETH", 1)?
            },
        ))
        .await
        .expect_err("zero");
    assert_eq!(reason(&err), "INVALID_FIELD");
    assert_eq!(stack.count("credit_proposals", acme.id).await?, 1);
    assert_eq!(stack.count("ledger_credits", acme.id).await?, 0);

    // The witness credits the one proposal once; a replay after it credits nothing again.
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    let replayed = client
        .credit_account(authed(&acme.operator, request))
        .await?
        .into_inner();
    assert!(replayed.replayed);
    assert_eq!(witness.tick(16).await, []);
    let shown = replayed.balance.unwrap_or_default();
    assert_eq!(
        (shown.available.as_str(), shown.pending.as_str()),
        ("500", "0")
    );
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (500, 0));
    assert_eq!(stack.count("ledger_credits", acme.id).await?, 1);
    stack.assert_invariants().await
}
