//! The witness attests a custodian release only from its own lookup of the provider's record, as
//! its own login through its own account: a lying executor's proposal (a REJECTED record the
//! provider never wrote) is refused when the provider's record is in flight or names a
//! transaction, and nothing is released; a proposal for a route the witness has no account for is
//! left, unattested.

use opledger_testkit::ServiceRole;
use opledger_tests::custodian::{
    Sim, approved_withdrawal, custodian_witness, drive_until, executor, state,
};
use opledger_tests::{Stack, Tenant};
use opledger_witness::CustodianOutcome;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const AMOUNT: &str = "1000000000000000";
const WITHIN: Duration = Duration::from_secs(30);

fn rules(rules: Value) -> Value {
    json!({"seed": 11, "rules": rules})
}

/// The count `sql` (with `$1` the withdrawal id) returns.
pub(crate) async fn scalar(stack: &Stack, sql: &str, op: &str) -> anyhow::Result<i64> {
    let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(op)
        .fetch_one(stack.admin.pool())
        .await?;
    Ok(n)
}

async fn attestations(stack: &Stack, op: &str) -> anyhow::Result<i64> {
    let sql = "SELECT count(*) FROM custodian_release_attestations WHERE op_id = $1::uuid";
    scalar(stack, sql, op).await
}

async fn hold(stack: &Stack, op: &str) -> anyhow::Result<String> {
    let (status,): (String,) =
        sqlx::query_as("SELECT status FROM ledger_holds WHERE op_id = $1::uuid")
            .bind(op)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(status)
}

/// A lying executor: as the custodian's login, a REJECTED record without a hash that no lookup
/// returned, and a proposal to release on it. Its record id.
async fn lie(stack: &Stack, op: &str) -> anyhow::Result<i64> {
    let custodian = stack.db.pool_as(ServiceRole::Custodian).await?;
    let (record_id,): (i64,) = sqlx::query_as(
        "INSERT INTO custodian_records (tenant_id, op_id, status, answer_sha256, executor_id) \
         SELECT tenant_id, op_id, 'REJECTED', sha256('not an answer'::bytea), 'liar' \
         FROM withdrawal_ops WHERE op_id = $1::uuid RETURNING record_id",
    )
    .bind(op)
    .fetch_one(&custodian)
    .await?;
    sqlx::query(
        "INSERT INTO custodian_release_proposals (tenant_id, op_id, record_id, executor_id) \
         SELECT tenant_id, op_id, $2, 'liar' FROM withdrawal_ops WHERE op_id = $1::uuid",
    )
    .bind(op)
    .bind(record_id)
    .execute(&custodian)
    .await?;
    Ok(record_id)
}

/// The witness refuses the lie for `reason` (recorded by its login, once) and attests nothing;
/// the executor, following on, releases nothing.
async fn refused(
    stack: &Stack,
    sim: &Sim,
    acme: &Tenant,
    op: &str,
    reason: &'static str,
) -> anyhow::Result<()> {
    let record_id = lie(stack, op).await?;
    let witness = custodian_witness(stack, sim, vec![sim.witness_account(acme)?]).await?;
    assert_eq!(witness.tick(16).await, [CustodianOutcome::Refused(reason)]);
    let (refused_record, stored_reason, by_witness): (i64, String, bool) = sqlx::query_as(
        "SELECT record_id, reason, pg_has_role(login, 'opledger_witness', 'MEMBER') \
         FROM custodian_witness_refusals WHERE op_id = $1::uuid",
    )
    .bind(op)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(
        (refused_record, stored_reason.as_str()),
        (record_id, reason)
    );
    assert!(by_witness);
    // Refused for good: not examined again.
    assert!(witness.tick(16).await.is_empty());
    assert_eq!(attestations(stack, op).await?, 0);
    let executor = executor(stack, "executor-2", vec![sim.account(acme, 2)?]).await?;
    for _ in 0..4 {
        executor.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Never released (a transaction the provider broadcast may settle, from its record).
    assert_ne!(state(stack, op).await?, "VERIFIED_NOT_SENT");
    assert_ne!(hold(stack, op).await?, "RELEASED");
    assert_eq!(attestations(stack, op).await?, 0);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_proposal_the_providers_record_in_flight_contradicts_is_refused_and_nothing_released()
-> anyhow::Result<()> {
    // The provider holds the transfer in authorization for an hour: in flight, nothing sent.
    let sim = Sim::start(rules(json!([{"kind": "reject", "hold_secs": 3600}])), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let op = w.withdrawal_id.as_str();
    let honest = executor(&stack, "executor-1", vec![sim.account(&acme, 2)?]).await?;
    drive_until(&stack, &[&honest], op, &["BROADCAST"], WITHIN).await?;
    refused(&stack, &sim, &acme, op, "CUSTODIAN_OWN_RECORD_NOT_TERMINAL").await?;
    assert!(sim.transfers_of(op).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn a_proposal_for_a_withdrawal_the_provider_executed_is_refused_and_nothing_released()
-> anyhow::Result<()> {
    let sim = Sim::start(rules(json!([])), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let op = w.withdrawal_id.as_str();
    let honest = executor(&stack, "executor-1", vec![sim.account(&acme, 2)?]).await?;
    // One pass sends it (accepted: BROADCAST); no lookup yet, so no record of ours names the
    // transaction: the lie is judged on the witness's own lookup alone.
    honest.pass(16, 4).await;
    assert_eq!(state(&stack, op).await?, "BROADCAST");
    let records = "SELECT count(*) FROM custodian_records WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, records, op).await?, 0);
    let deadline = Instant::now() + WITHIN;
    while sim.transfers_of(op).await?.is_empty() {
        anyhow::ensure!(Instant::now() < deadline, "the double never executed it");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The double names the hash in its record as it logs the transfer.
    tokio::time::sleep(Duration::from_millis(300)).await;
    refused(&stack, &sim, &acme, op, "CUSTODIAN_OWN_RECORD_BROADCAST").await?;
    assert_eq!(sim.transfers_of(op).await?.len(), 1, "paid once");
    Ok(())
}

#[tokio::test]
async fn a_proposal_for_a_route_the_witness_has_no_account_for_is_left_unattested()
-> anyhow::Result<()> {
    let sim = Sim::start(rules(json!([{"kind": "reject", "hold_secs": 0}])), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let op = w.withdrawal_id.as_str();
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 2)?]).await?;
    drive_until(&stack, &[&executor], op, &["UNKNOWN"], WITHIN).await?;
    let proposals = "SELECT count(*) FROM custodian_release_proposals WHERE op_id = $1::uuid";
    let deadline = Instant::now() + WITHIN;
    while scalar(&stack, proposals, op).await? == 0 {
        anyhow::ensure!(Instant::now() < deadline, "no proposal");
        executor.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The witness has an account for another tenant only.
    let globex = stack.tenant("globex").await?;
    let witness = custodian_witness(&stack, &sim, vec![sim.witness_account(&globex)?]).await?;
    for _ in 0..3 {
        assert_eq!(witness.tick(16).await, [CustodianOutcome::NoAccount]);
        executor.pass(16, 4).await;
    }
    assert_eq!(attestations(&stack, op).await?, 0);
    let refusals = "SELECT count(*) FROM custodian_witness_refusals WHERE op_id = $1::uuid";
    assert_eq!(scalar(&stack, refusals, op).await?, 0);
    assert_eq!(state(&stack, op).await?, "UNKNOWN");
    assert_eq!(hold(&stack, op).await?, "OPEN");
    assert!(sim.transfers_of(op).await?.is_empty());
    stack.assert_invariants().await
}
