//! The double's faults, one class per test, each asserting what the executor did and what
//! reached the chain.

use opledger_tests::Stack;
use opledger_tests::custodian::{
    Sim, approved_withdrawal, custodian_witness, drive_until, executor, state,
};
use opledger_witness::CustodianOutcome;
use serde_json::{Value, json};
use std::time::Duration;

const AMOUNT: &str = "1000000000000000";
const WITHIN: Duration = Duration::from_secs(30);

async fn count(stack: &Stack, table: &str, op: &str) -> anyhow::Result<i64> {
    let sql = format!("SELECT count(*) FROM {table} WHERE op_id = $1::uuid");
    let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(op)
        .fetch_one(stack.admin.pool())
        .await?;
    Ok(n)
}

async fn answers(stack: &Stack, op: &str) -> anyhow::Result<Vec<String>> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT answer FROM custodian_answers WHERE op_id = $1::uuid ORDER BY send_no",
    )
    .bind(op)
    .fetch_all(stack.admin.pool())
    .await?;
    Ok(rows.into_iter().map(|(a,)| a).collect())
}

async fn hold(stack: &Stack, op: &str) -> anyhow::Result<String> {
    let (status,): (String,) =
        sqlx::query_as("SELECT status FROM ledger_holds WHERE op_id = $1::uuid")
            .bind(op)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(status)
}

fn rules(rules: Value) -> Value {
    json!({"seed": 7, "rules": rules})
}

#[tokio::test]
async fn an_answer_lost_after_the_provider_accepted_is_unknown_then_found_by_lookup()
-> anyhow::Result<()> {
    let sim = Sim::start(rules(json!([{"kind": "drop_response", "nth": 1}])), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 5)?]).await?;
    executor.pass(16, 4).await;
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(
        answers(&stack, &w.withdrawal_id).await?,
        ["CONNECTION_LOST"]
    );
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["BROADCAST", "CONFIRMED"],
        WITHIN,
    )
    .await?;
    // Found by our reference, never sent again.
    assert_eq!(count(&stack, "custodian_sends", &w.withdrawal_id).await?, 1);
    assert_eq!(sim.transfers_of(&w.withdrawal_id).await?.len(), 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn errors_and_rate_limits_are_unknown_and_resent_only_with_the_same_reference_after_the_window()
-> anyhow::Result<()> {
    let sim = Sim::start(rules(json!([])), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 1)?]).await?;
    // A 502 after the provider stored the request: found by lookup, never sent again. A 429
    // that stored nothing: not found after the window, the same request sent again.
    let cases = [
        (
            json!({"kind": "error_after_accept", "status": 502, "nth": 1}),
            "SERVER_ERROR",
            1,
        ),
        (
            json!({"kind": "rate_limit", "on": "create", "retry_after_secs": 1, "nth": 1}),
            "RATE_LIMITED",
            2,
        ),
    ];
    for (rule, first, sends) in cases {
        sim.set_faults(&rules(json!([rule]))).await?;
        let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
        executor.pass(16, 4).await;
        assert_eq!(state(&stack, &w.withdrawal_id).await?, "UNKNOWN");
        assert_eq!(answers(&stack, &w.withdrawal_id).await?[0], first);
        drive_until(
            &stack,
            &[&executor],
            &w.withdrawal_id,
            &["BROADCAST", "CONFIRMED"],
            WITHIN,
        )
        .await?;
        let sent = count(&stack, "custodian_sends", &w.withdrawal_id).await?;
        assert_eq!(sent, sends, "{first}");
        // One request, one reference, whatever was sent again.
        assert_eq!(
            count(&stack, "custodian_requests", &w.withdrawal_id).await?,
            1
        );
        assert_eq!(
            sim.transfers_of(&w.withdrawal_id).await?.len(),
            1,
            "paid once"
        );
    }
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_reference_not_found_inside_the_window_is_no_answer_and_after_it_the_same_request()
-> anyhow::Result<()> {
    // The answer is lost and the provider's lookup does not find the transfer for 3 s: inside
    // the 2 s window nothing is sent; after it the same request goes again, and the provider
    // deduplicates it by our reference (its idempotency key).
    let schedule = rules(json!([
        {"kind": "drop_response", "nth": 1},
        {"kind": "lookup_lag", "secs": 3}
    ]));
    let sim = Sim::start(schedule, 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 2)?]).await?;
    executor.pass(16, 4).await;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        executor.pass(16, 4).await;
    }
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(count(&stack, "custodian_sends", &w.withdrawal_id).await?, 1);
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["BROADCAST", "CONFIRMED"],
        WITHIN,
    )
    .await?;
    assert!(count(&stack, "custodian_sends", &w.withdrawal_id).await? >= 2);
    assert_eq!(
        sim.transfers_of(&w.withdrawal_id).await?.len(),
        1,
        "paid once"
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_rejection_without_a_transaction_releases_only_once_the_witness_attests_it()
-> anyhow::Result<()> {
    let sim = Sim::start(rules(json!([{"kind": "reject", "hold_secs": 0}])), 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 2)?]).await?;
    drive_until(&stack, &[&executor], &w.withdrawal_id, &["UNKNOWN"], WITHIN).await?;
    // Proposed, not released: the executor's word alone releases nothing.
    for _ in 0..5 {
        executor.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "UNKNOWN");
    assert_eq!(hold(&stack, &w.withdrawal_id).await?, "OPEN");
    let (record_id, status): (i64, String) = sqlx::query_as(
        "SELECT p.record_id, r.status FROM custodian_release_proposals p \
         JOIN custodian_records r USING (tenant_id, op_id, record_id) WHERE p.op_id = $1::uuid \
         ORDER BY p.record_id DESC LIMIT 1",
    )
    .bind(&w.withdrawal_id)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(status, "REJECTED");

    // The witness, in process as its own login, looks the record up itself through its own
    // account at the provider (its own configuration and credential files) and attests.
    let witness = custodian_witness(&stack, &sim, vec![sim.witness_account(&acme)?]).await?;
    assert_eq!(witness.tick(16).await, [CustodianOutcome::Attested]);
    let (attested, attested_status, by_witness): (i64, String, bool) = sqlx::query_as(
        "SELECT record_id, status, pg_has_role(login, 'opledger_witness', 'MEMBER') \
         FROM custodian_release_attestations WHERE op_id = $1::uuid",
    )
    .bind(&w.withdrawal_id)
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(
        (attested, attested_status.as_str()),
        (record_id, "REJECTED")
    );
    assert!(by_witness, "attested by the witness's login");
    // Decided: nothing more to examine.
    assert!(witness.tick(16).await.is_empty());
    drive_until(
        &stack,
        &[&executor],
        &w.withdrawal_id,
        &["VERIFIED_NOT_SENT"],
        WITHIN,
    )
    .await?;
    assert_eq!(hold(&stack, &w.withdrawal_id).await?, "RELEASED");
    assert!(
        sim.transfers_of(&w.withdrawal_id).await?.is_empty(),
        "nothing was sent"
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_failed_record_naming_a_transaction_is_never_released() -> anyhow::Result<()> {
    let schedule = rules(json!([{"kind": "failed_with_hash", "variant": "mined"}]));
    let sim = Sim::start(schedule, 0).await?;
    let stack = Stack::start().await?;
    let acme = crate::funded(&stack).await?;
    let (w, _) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let executor = executor(&stack, "executor-1", vec![sim.account(&acme, 2)?]).await?;
    let deadline = std::time::Instant::now() + WITHIN;
    loop {
        executor.pass(16, 4).await;
        let (failed,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM custodian_records WHERE op_id = $1::uuid \
             AND status = 'FAILED' AND tx_hash IS NOT NULL",
        )
        .bind(&w.withdrawal_id)
        .fetch_one(stack.admin.pool())
        .await?;
        if failed > 0 {
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "no FAILED record");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for _ in 0..3 {
        executor.pass(16, 4).await;
    }
    // The chain decides: the transfer was mined and paid; nothing releases the hold.
    assert_eq!(state(&stack, &w.withdrawal_id).await?, "BROADCAST");
    assert_eq!(hold(&stack, &w.withdrawal_id).await?, "OPEN");
    assert_eq!(
        count(&stack, "custodian_release_proposals", &w.withdrawal_id).await?,
        0
    );
    assert_eq!(sim.transfers_of(&w.withdrawal_id).await?.len(), 1);
    stack.assert_invariants().await
}
