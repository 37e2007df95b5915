//! The `no_lookup` profile's operator flow (Coinbase-Prime-like: no lookup by our reference).
//! After an ambiguous answer the withdrawal is UNKNOWN, its funds held, never sent again. An
//! operator lists the provider's transactions with its destination and amount through the
//! executor's `CustodianOperatorService` and binds one, with a reason. The executor then reads
//! that transaction from the provider's list: a hash settles from the chain, terminal without one
//! releases only once the witness attests it from its own listing. The adversary is a careless
//! or hurried operator: a transaction not listed, a second binding, a transaction of another
//! withdrawal, a caller without the operator role; each is refused and changes nothing.

use crate::witness::scalar;
use opledger_custodian_executor::config::AccountRoute;
use opledger_proto::v1 as pb;
use opledger_proto::v1::custodian_operator_service_client::CustodianOperatorServiceClient;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::ServiceRole;
use opledger_tests::custodian::{
    Sim, SimWebhooks, approved_withdrawal, chains, custodian_witness, drive_until, executor, state,
};
use opledger_tests::{Stack, Tenant, authed, reason};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic::transport::Channel;

const AMOUNT: &str = "1000000000000000";
const WITHIN: Duration = Duration::from_secs(30);

/// The double with the Prime profile and `rules` as its schedule.
pub(crate) async fn prime(rules: Value) -> anyhow::Result<Sim> {
    Sim::start_webhooks(SimWebhooks {
        faults: json!({"seed": 11, "rules": rules}),
        authorization_delay_secs: 0,
        fireblocks_webhook_url: None,
        bitgo: None,
        prime: Some((None, "prime-test-signing-secret".to_owned())),
    })
    .await
}

/// The tenant and its Prime account at `sim` (a 1 s consistency window).
pub(crate) async fn funded(stack: &Stack, sim: &Sim) -> anyhow::Result<(Tenant, AccountRoute)> {
    let acme = crate::funded(stack).await?;
    let account = sim.prime_account_within(&acme, 1)?;
    Ok((acme, account))
}

/// The executor's operator API over its own login, served on a free port.
pub(crate) async fn operator_api(
    stack: &Stack,
    account: AccountRoute,
) -> anyhow::Result<CustodianOperatorServiceClient<Channel>> {
    let routes = opledger_tests::custodian::operator_routes(stack, account).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(opledger_server::serve::serve(
        listener,
        opledger_custodian_executor::SERVICE_NAME,
        routes,
        std::future::pending(),
    ));
    Ok(CustodianOperatorServiceClient::connect(format!("http://{addr}")).await?)
}

/// Waits until the double's records of `reference` show `want`, oldest first.
async fn double_shows(sim: &Sim, reference: &str, want: &[&str]) -> anyhow::Result<()> {
    let deadline = Instant::now() + WITHIN;
    loop {
        let ops = sim.get("operations").await?;
        let statuses: Vec<String> = ops
            .as_array()
            .into_iter()
            .flatten()
            .filter(|op| op["reference"].as_str() == Some(reference))
            .flat_map(|op| op["views"].as_array().cloned().unwrap_or_default())
            .filter_map(|v| v["status"].as_str().map(str::to_owned))
            .collect();
        if statuses == want {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "the double shows {statuses:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn entries(stack: &Stack, op: &str, kind: &str) -> anyhow::Result<i64> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM ledger_entries WHERE op_id = $1::uuid AND kind = $2")
            .bind(op)
            .bind(kind)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(n)
}

fn bind(op: &str, provider_id: &str, why: &str) -> pb::BindCustodianCandidateRequest {
    pb::BindCustodianCandidateRequest {
        withdrawal_id: op.to_owned(),
        provider_id: provider_id.to_owned(),
        reason: why.to_owned(),
    }
}

fn list(op: &str) -> pb::ListCustodianCandidatesRequest {
    pb::ListCustodianCandidatesRequest {
        withdrawal_id: op.to_owned(),
    }
}

#[tokio::test]
async fn an_operator_binds_the_listed_transaction_that_paid_and_it_settles_from_the_chain_once()
-> anyhow::Result<()> {
    // The answer is lost and the double recreates the transaction: the first ends
    // TRANSACTION_RETRIED, the second pays.
    let sim = prime(json!([
        {"kind": "drop_response", "nth": 1, "profile": "prime"},
        {"kind": "retried", "profile": "prime"}
    ]))
    .await?;
    let stack = Stack::start().await?;
    let (acme, account) = funded(&stack, &sim).await?;
    let executor = executor(&stack, "executor-1", vec![account.clone()])
        .await?
        .with_chains(chains(&sim)?);
    let (w, destination) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let op = w.withdrawal_id;
    executor.pass(16, 4).await;
    assert_eq!(state(&stack, &op).await?, "UNKNOWN");
    double_shows(&sim, &op, &["TRANSACTION_RETRIED", "TRANSACTION_DONE"]).await?;

    let mut api = operator_api(&stack, account).await?;
    let listed = api
        .list_custodian_candidates(authed(&acme.operator, list(&op)))
        .await?
        .into_inner();
    assert_eq!(listed.state, pb::WithdrawalState::Unknown as i32);
    assert!(listed.bound_provider_id.is_empty());
    let statuses: Vec<&str> = listed
        .candidates
        .iter()
        .map(|c| c.status.as_str())
        .collect();
    assert_eq!(statuses.len(), 2, "{statuses:?}");
    let paid = listed
        .candidates
        .iter()
        .find(|c| c.status == "TRANSACTION_DONE")
        .ok_or_else(|| anyhow::anyhow!("no paid candidate: {statuses:?}"))?;
    let retried = listed
        .candidates
        .iter()
        .find(|c| c.status == "TRANSACTION_RETRIED")
        .ok_or_else(|| anyhow::anyhow!("no retried candidate: {statuses:?}"))?;
    assert_eq!(paid.tx_hashes.len(), 1);

    // Refused, changing nothing: another role, no reason, a transaction not listed.
    let err = api
        .bind_custodian_candidate(authed(&acme.client, bind(&op, &paid.provider_id, "x")))
        .await
        .expect_err("client role");
    assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");
    let err = api
        .bind_custodian_candidate(authed(&acme.operator, bind(&op, &paid.provider_id, " ")))
        .await
        .expect_err("no reason");
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = api
        .bind_custodian_candidate(authed(&acme.operator, bind(&op, "not-listed", "guess")))
        .await
        .expect_err("not listed");
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::FailedPrecondition, "CANDIDATE_NOT_LISTED")
    );
    let bindings = "SELECT count(*) FROM custodian_bindings WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, bindings, &op).await?, 0);

    let why = "Prime console: the retried transfer completed, same destination and amount";
    let bound = api
        .bind_custodian_candidate(authed(&acme.operator, bind(&op, &paid.provider_id, why)))
        .await?
        .into_inner();
    assert_eq!(bound.bound_provider_id, paid.provider_id);
    // The same binding again is its answer; another one is refused.
    api.bind_custodian_candidate(authed(&acme.operator, bind(&op, &paid.provider_id, why)))
        .await?;
    let err = api
        .bind_custodian_candidate(authed(&acme.operator, bind(&op, &retried.provider_id, why)))
        .await
        .expect_err("second binding");
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::AlreadyExists, "CANDIDATE_TAKEN")
    );
    // The binding is audited: the operator's key id (never the secret), the reason, the digest
    // of the list answer.
    let (key_id, kept, digest): (String, String, Vec<u8>) = sqlx::query_as(
        "SELECT operator_key_id, reason, answer_sha256 FROM custodian_bindings \
         WHERE op_id = $1::uuid",
    )
    .bind(&op)
    .fetch_one(stack.admin.pool())
    .await?;
    assert!(!key_id.is_empty() && acme.operator.contains(&key_id) && key_id != acme.operator);
    assert_eq!((kept.as_str(), digest.len()), (why, 32));

    // The executor follows the bound transaction: the chain settles it at final depth.
    sim.anvil()?.mine(3).await?;
    drive_until(&stack, &[&executor], &op, &["CONFIRMED"], WITHIN).await?;
    let (included,): (String,) = sqlx::query_as(
        "SELECT tx_hash FROM inclusions WHERE op_id = $1::uuid AND reorged_at IS NULL",
    )
    .bind(&op)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(included, paid.tx_hashes[0]);
    sim.paid_once(&op, &destination, AMOUNT).await?;
    assert_eq!(
        (
            entries(&stack, &op, "SETTLE").await?,
            entries(&stack, &op, "RELEASE").await?
        ),
        (1, 0)
    );
    let sends = "SELECT count(*) FROM custodian_sends WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, sends, &op).await?, 1, "never sent again");
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_bound_rejection_is_released_only_once_the_witness_lists_it_with_its_own_account()
-> anyhow::Result<()> {
    let sim = prime(json!([
        {"kind": "drop_response", "nth": 1, "profile": "prime"},
        {"kind": "reject", "profile": "prime"}
    ]))
    .await?;
    let stack = Stack::start().await?;
    let (acme, account) = funded(&stack, &sim).await?;
    let executor = executor(&stack, "executor-1", vec![account.clone()]).await?;
    let (w, destination) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let op = w.withdrawal_id;
    executor.pass(16, 4).await;
    assert_eq!(state(&stack, &op).await?, "UNKNOWN");
    double_shows(&sim, &op, &["TRANSACTION_REJECTED"]).await?;

    // Before any binding the executor concludes nothing, however often it passes.
    for _ in 0..3 {
        executor.pass(16, 4).await;
    }
    let proposals = "SELECT count(*) FROM custodian_release_proposals WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, proposals, &op).await?, 0);

    let mut api = operator_api(&stack, account.clone()).await?;
    let listed = api
        .list_custodian_candidates(authed(&acme.operator, list(&op)))
        .await?
        .into_inner();
    let [rejected] = listed.candidates.as_slice() else {
        anyhow::bail!("candidates: {:?}", listed.candidates);
    };
    assert!(rejected.tx_hashes.is_empty());
    // A transaction that says nothing was broadcast is bound only once the provider's list has
    // settled: the account's consistency window (1 s) since the send.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let why = "Prime console: rejected by the approver, nothing broadcast";
    api.bind_custodian_candidate(authed(
        &acme.operator,
        bind(&op, &rejected.provider_id, why),
    ))
    .await?;

    // Proposed, not released: the executor's word alone releases nothing.
    let deadline = Instant::now() + WITHIN;
    while scalar(&stack, proposals, &op).await? == 0 {
        anyhow::ensure!(Instant::now() < deadline, "never proposed");
        executor.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    executor.pass(16, 4).await;
    assert_eq!(scalar(&stack, proposals, &op).await?, 1);
    assert_eq!(state(&stack, &op).await?, "UNKNOWN");
    assert_eq!(entries(&stack, &op, "RELEASE").await?, 0);

    // The witness lists the bound transaction with its own account and attests it.
    let mut own = sim.prime_account_within(&acme, 1)?;
    own.name = "prime-witness".to_owned();
    let witness = custodian_witness(&stack, &sim, vec![own]).await?;
    let outcomes = witness.tick(16).await;
    assert_eq!(
        outcomes,
        vec![opledger_witness::CustodianOutcome::Attested],
        "{outcomes:?}"
    );
    drive_until(&stack, &[&executor], &op, &["VERIFIED_NOT_SENT"], WITHIN).await?;
    assert_eq!(
        (
            entries(&stack, &op, "RELEASE").await?,
            entries(&stack, &op, "SETTLE").await?
        ),
        (1, 0)
    );
    assert_eq!(sim.anvil()?.balance(&destination).await?, 0);
    assert!(sim.transfers_of(&op).await?.is_empty());
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_provider_transaction_is_bound_to_one_withdrawal_once() -> anyhow::Result<()> {
    // Both answers are lost: two UNKNOWN withdrawals. Once the first is bound to its transaction,
    // neither a second binding of the first nor a binding of the same transaction to the second
    // (even by the executor's own login, bypassing the API's checks) is recorded.
    let sim = prime(json!([{"kind": "drop_response", "nth": 1, "profile": "prime"}])).await?;
    let stack = Stack::start().await?;
    let (acme, account) = funded(&stack, &sim).await?;
    let executor = executor(&stack, "executor-1", vec![account.clone()]).await?;
    let (first, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let (second, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    executor.pass(16, 4).await;
    assert_eq!(state(&stack, &first.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(state(&stack, &second.withdrawal_id).await?, "UNKNOWN");
    let mut api = operator_api(&stack, account).await?;
    let listed = api
        .list_custodian_candidates(authed(&acme.operator, list(&first.withdrawal_id)))
        .await?
        .into_inner();
    let [candidate] = listed.candidates.as_slice() else {
        anyhow::bail!("candidates: {:?}", listed.candidates);
    };
    let why = "the first withdrawal's transaction";
    api.bind_custodian_candidate(authed(
        &acme.operator,
        bind(&first.withdrawal_id, &candidate.provider_id, why),
    ))
    .await?;
    let err = api
        .bind_custodian_candidate(authed(&acme.operator, bind(&first.withdrawal_id, "x", why)))
        .await
        .expect_err("rebinding");
    assert_eq!(reason(&err), "CANDIDATE_TAKEN");

    let binding = opledger_store::custodian_bindings::NewBinding {
        provider_id: &candidate.provider_id,
        status: "TRANSACTION_DONE",
        tx_hashes: &[],
        answer_sha256: [0; 32],
        operator_key_id: "key",
        reason: why,
        executor_id: "executor-1",
        record: None,
    };
    let store = Store::connect(&stack.url(ServiceRole::Custodian), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    let recorded = store
        .custodian()
        .bind_custodian_transaction(acme.id, second.withdrawal_id.parse()?, &binding)
        .await?;
    assert_eq!(
        recorded,
        opledger_store::custodian_bindings::Bound::Taken,
        "one provider transaction, one withdrawal"
    );
    let bindings = "SELECT count(*) FROM custodian_bindings WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, bindings, &second.withdrawal_id).await?, 0);
    stack.assert_invariants().await
}
