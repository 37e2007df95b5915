//! The `no_lookup` profile when the provider answered: Coinbase Prime's answer to a withdrawal
//! names the transaction it created (`transaction_id`). The executor follows that transaction by
//! its id, without an operator: a hash settles from the chain; terminal without one is proposed
//! and released only once the witness reads the same transaction with its own account; a
//! transaction the provider recreated concludes nothing and is escalated for an operator, who
//! binds the new one. The adversary is an operator (or a stolen operator key) binding another
//! transaction while the one the answer named is live: refused, changing nothing.

use crate::no_lookup::{funded, operator_api, prime};
use crate::witness::scalar;
use opledger_proto::v1 as pb;
use opledger_tests::custodian::{
    Books, approved_withdrawal, books, chains, custodian_witness, drive_until, executor, pass_until,
};
use opledger_tests::{authed, reason};
use serde_json::json;
use std::time::Duration;
use tonic::Code;

const AMOUNT: &str = "1000000000000000";
const WITHIN: Duration = Duration::from_secs(30);

/// A Prime double with `rules`, a funded tenant, its executor settling from the double's chain,
/// and one approved withdrawal.
struct World {
    sim: opledger_tests::custodian::Sim,
    stack: opledger_tests::Stack,
    acme: opledger_tests::Tenant,
    account: opledger_custodian_executor::config::AccountRoute,
    executor: opledger_custodian_executor::executor::Executor,
    op: String,
    destination: String,
}

impl World {
    async fn start(rules: serde_json::Value) -> anyhow::Result<World> {
        let sim = prime(rules).await?;
        let stack = opledger_tests::Stack::start().await?;
        let (acme, account) = funded(&stack, &sim).await?;
        let executor = executor(&stack, "executor-1", vec![account.clone()])
            .await?
            .with_chains(chains(&sim)?);
        let (w, destination) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
        Ok(World {
            sim,
            stack,
            acme,
            account,
            executor,
            op: w.withdrawal_id,
            destination,
        })
    }
}

/// The transaction the withdrawal's accepted answer named, as recorded.
async fn answered(stack: &opledger_tests::Stack, op: &str) -> anyhow::Result<String> {
    let (id,): (Option<String>,) = sqlx::query_as(
        "SELECT provider_id FROM custodian_answers WHERE op_id = $1::uuid AND answer = 'ACCEPTED'",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?;
    id.ok_or_else(|| anyhow::anyhow!("the accepted answer named no transaction"))
}

#[tokio::test]
async fn an_answered_withdrawal_is_followed_by_its_transaction_and_settles_without_an_operator()
-> anyhow::Result<()> {
    let World {
        sim,
        stack,
        acme,
        account,
        executor,
        op,
        destination,
    } = World::start(json!([])).await?;
    executor.pass(16, 4).await;
    let named = answered(&stack, &op).await?;
    // While the transaction the answer named is live, an operator's (or a stolen operator key's)
    // binding of another is refused; naming the followed one again is its answer.
    let mut api = operator_api(&stack, account).await?;
    let bind = |provider_id: &str| pb::BindCustodianCandidateRequest {
        withdrawal_id: op.clone(),
        provider_id: provider_id.to_owned(),
        reason: "the console shows another one".to_owned(),
    };
    let err = api
        .bind_custodian_candidate(authed(&acme.operator, bind("another-transaction")))
        .await
        .expect_err("the answer's transaction is live");
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::FailedPrecondition, "NOT_BINDABLE")
    );
    let same = api
        .bind_custodian_candidate(authed(&acme.operator, bind(&named)))
        .await?
        .into_inner();
    assert_eq!(same.bound_provider_id, named);
    let bindings = "SELECT count(*) FROM custodian_bindings WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, bindings, &op).await?, 0, "nothing recorded");

    let node = sim.anvil()?;
    let done = pass_until(&stack, &executor, &op, Some(node), WITHIN, |b: &Books| {
        b.state == "CONFIRMED"
    })
    .await?;
    assert_eq!(done.hold, "SETTLED");
    assert_eq!((done.settles, done.releases), (1, 0));
    assert_eq!(done.answers, ["ACCEPTED"]);
    assert!(done.escalations.is_empty(), "{:?}", done.escalations);
    let (transfer, _) = sim.paid_once(&op, &destination, AMOUNT).await?;
    // The followed transaction is the one the answer named and the one that paid.
    assert_eq!(transfer["provider_id"].as_str(), Some(named.as_str()));
    let live = done.live_inclusions();
    assert_eq!(live.len(), 1);
    assert_eq!(Some(live[0].tx_hash.as_str()), transfer["hash"].as_str());
    // The executor read it by its id only: the two list reads are the operator's binding
    // attempts; nothing was sent again.
    let reads: Vec<String> = sim
        .requests()
        .await?
        .iter()
        .filter(|r| r["method"] == "GET")
        .filter_map(|r| r["path"].as_str().map(str::to_owned))
        .collect();
    let (lists, by_id): (Vec<&String>, Vec<&String>) =
        reads.iter().partition(|p| p.contains("/transactions?"));
    assert_eq!(lists.len(), 2, "{reads:?}");
    assert!(!by_id.is_empty());
    assert!(
        by_id
            .iter()
            .all(|p| p.ends_with(&format!("/transactions/{named}"))),
        "{reads:?}"
    );
    assert_eq!(sim.creates_of(&op).await?.len(), 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn an_answered_rejection_is_released_only_once_the_witness_reads_it_too() -> anyhow::Result<()>
{
    let World {
        sim,
        stack,
        acme,
        executor,
        op,
        destination,
        ..
    } = World::start(json!([{"kind": "reject", "profile": "prime"}])).await?;
    // Proposed from the executor's reads, never released on them.
    let proposed = pass_until(&stack, &executor, &op, None, WITHIN, |b: &Books| {
        b.proposals > 0
    })
    .await?;
    assert_eq!(
        (proposed.state.as_str(), proposed.hold.as_str()),
        ("UNKNOWN", "OPEN")
    );
    assert!(
        proposed.escalations.is_empty(),
        "{:?}",
        proposed.escalations
    );
    executor.pass(16, 4).await;
    assert_eq!(books(&stack, &op).await?.releases, 0);

    let mut own = sim.prime_account_within(&acme, 1)?;
    own.name = "prime-witness".to_owned();
    let witness = custodian_witness(&stack, &sim, vec![own]).await?;
    assert_eq!(
        witness.tick(16).await,
        vec![opledger_witness::CustodianOutcome::Attested]
    );
    drive_until(&stack, &[&executor], &op, &["VERIFIED_NOT_SENT"], WITHIN).await?;
    let released = books(&stack, &op).await?;
    assert_eq!((released.settles, released.releases), (0, 1));
    assert_eq!(sim.anvil()?.balance(&destination).await?, 0);
    assert!(sim.transfers_of(&op).await?.is_empty());
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_recreated_transaction_is_escalated_and_only_then_may_an_operator_bind_the_new_one()
-> anyhow::Result<()> {
    // The double recreates the transaction: the one its answer named ends TRANSACTION_RETRIED,
    // never broadcast; a second one (new id) pays.
    let World {
        sim,
        stack,
        acme,
        account,
        executor,
        op,
        destination,
    } = World::start(json!([{"kind": "retried", "profile": "prime"}])).await?;
    let mut api = operator_api(&stack, account).await?;
    let list = || pb::ListCustodianCandidatesRequest {
        withdrawal_id: op.clone(),
    };
    let bind = |provider_id: &str| pb::BindCustodianCandidateRequest {
        withdrawal_id: op.clone(),
        provider_id: provider_id.to_owned(),
        reason: "Prime console: the retried transfer carries the execution".to_owned(),
    };
    executor.pass(16, 4).await;
    let named = answered(&stack, &op).await?;

    let listed = api
        .list_custodian_candidates(authed(&acme.operator, list()))
        .await?
        .into_inner();
    assert_eq!(
        listed.bound_provider_id, named,
        "the followed transaction is shown"
    );

    // Recreated: escalated, nothing concluded from the old one, however often it passes.
    let node = sim.anvil()?;
    let escalated = pass_until(&stack, &executor, &op, Some(node), WITHIN, |b: &Books| {
        b.escalations
            .iter()
            .any(|e| e == "CUSTODIAN_TRANSACTION_RECREATED")
    })
    .await?;
    assert_eq!((escalated.settles, escalated.releases), (0, 0));
    assert_eq!(escalated.proposals, 0);
    let bindings = "SELECT count(*) FROM custodian_bindings WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, bindings, &op).await?, 0);

    // The operator binds the new one; the executor follows it and the chain settles it once.
    let listed = api
        .list_custodian_candidates(authed(&acme.operator, list()))
        .await?
        .into_inner();
    let paid = listed
        .candidates
        .iter()
        .find(|c| c.provider_id != named && !c.tx_hashes.is_empty())
        .ok_or_else(|| anyhow::anyhow!("no paid candidate: {:?}", listed.candidates))?;
    api.bind_custodian_candidate(authed(&acme.operator, bind(&paid.provider_id)))
        .await?;
    let done = pass_until(&stack, &executor, &op, Some(node), WITHIN, |b: &Books| {
        b.state == "CONFIRMED"
    })
    .await?;
    assert_eq!((done.settles, done.releases), (1, 0));
    let (transfer, _) = sim.paid_once(&op, &destination, AMOUNT).await?;
    assert_eq!(
        transfer["provider_id"].as_str(),
        Some(paid.provider_id.as_str())
    );
    assert_eq!(sim.creates_of(&op).await?.len(), 1, "never sent again");
    stack.assert_invariants().await
}
