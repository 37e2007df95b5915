//! The processor: idempotent effects per event type, retries ending in dead letters, retention.

use opledger_tests::ALICE;
use opledger_tests::inbox::{ALL_TYPES, World, deposit, event_id, kyt};
use opledger_witness::Outcome;
use std::time::Duration;

/// A world whose screening endpoint may send KYT results, with a funded REQUESTED withdrawal of
/// 100 (balance 900 available, 100 held).
async fn screening_world() -> anyhow::Result<(World, String)> {
    let world = World::start("screening", &["kyt.result"]).await?;
    let stack = &world.stack;
    stack.fund(&world.acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&world.acme, "100", ALICE).await?;
    assert_eq!(world.treasury().await?, (900, 100));
    Ok((world, w.withdrawal_id))
}

#[tokio::test]
async fn a_deposit_is_proposed_once_per_deposit_id_whatever_event_carries_it() -> anyhow::Result<()>
{
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let body = deposit("0xdeposit-1", "treasury", "ETH", "500");
    // The provider re-sends the same deposit under a new event id.
    assert_eq!(world.post(&body).await?, 200);
    assert_eq!(world.post(&body).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 2)
        .await?;
    // Two processors may take the two items in either order: one proposes, the other finds it
    // proposed. A proposal is pending, not spendable: the witness alone credits (issue 25).
    let mut outcomes = world.outcomes().await?;
    outcomes.sort();
    assert_eq!(outcomes, ["DONE:ALREADY_PROPOSED", "DONE:CREDIT_PROPOSED"]);
    assert_eq!(world.proposals("0xdeposit-1").await?, 1);
    assert_eq!(world.rows("credit_proposals", "").await?, 1);
    assert_eq!(world.pending().await?, 500);
    assert_eq!(world.treasury().await?, (0, 0));
    assert_eq!(world.rows("ledger_credits", "").await?, 0);

    // The same deposit id with another amount is not proposed: a dead letter for a person.
    let conflicting = deposit("0xdeposit-1", "treasury", "ETH", "5000");
    assert_eq!(world.post(&conflicting).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DEAD'", 1)
        .await?;
    assert_eq!(world.outcomes().await?[2], "DEAD:DEPOSIT_CONFLICT");
    assert_eq!(world.rows("credit_proposals", "").await?, 1);
    assert_eq!(world.pending().await?, 500);
    assert_eq!(world.treasury().await?, (0, 0));
    world.stack.assert_invariants().await?;
    world.stop().await
}

#[tokio::test]
async fn a_failing_kyt_result_rejects_a_requested_withdrawal_and_releases_the_hold_once()
-> anyhow::Result<()> {
    let (world, op) = screening_world().await?;
    assert_eq!(world.post(&kyt(&op, "fail", "case-1")).await?, 200);
    // A second failing screening of the same withdrawal must not release anything again.
    assert_eq!(world.post(&kyt(&op, "fail", "case-2")).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 2)
        .await?;
    // In either order: the first rejects, the other is only recorded.
    let mut outcomes = world.outcomes().await?;
    outcomes.sort();
    assert_eq!(outcomes, ["DONE:RECORDED", "DONE:REJECTED"]);
    assert_eq!(world.stack.state(&op).await?, "REJECTED");
    assert_eq!(world.treasury().await?, (1000, 0));
    assert_eq!(
        world
            .rows("ledger_holds", "AND status = 'RELEASED'")
            .await?,
        1
    );
    assert_eq!(
        world.rows("kyt_screenings", "AND result = 'FAIL'").await?,
        2
    );
    assert_eq!(
        world
            .rows(
                "operation_transitions",
                "AND to_state = 'REJECTED' AND actor = 'webhook_processor'"
            )
            .await?,
        1
    );
    world.stack.assert_invariants().await?;
    world.stop().await
}

#[tokio::test]
async fn a_passing_kyt_result_is_recorded_and_changes_nothing_else() -> anyhow::Result<()> {
    let (world, op) = screening_world().await?;
    assert_eq!(world.post(&kyt(&op, "pass", "case-9")).await?, 200);
    world
        .wait_rows("inbox_work", "AND status = 'DONE'", 1)
        .await?;
    assert_eq!(world.outcomes().await?, ["DONE:RECORDED"]);
    assert_eq!(world.stack.state(&op).await?, "REQUESTED");
    assert_eq!(world.treasury().await?, (900, 100));
    world.stop().await
}

#[tokio::test]
async fn a_failing_kyt_result_after_approval_is_a_dead_letter_owned_by_compliance()
-> anyhow::Result<()> {
    let (world, op) = screening_world().await?;
    let stack = &world.stack;
    let w = opledger_tests::inbox::withdrawal(stack, &world.acme, &op).await?;
    opledger_tests::signer::approve(stack, &world.acme, &w).await?;
    assert_eq!(world.post(&kyt(&op, "fail", "late")).await?, 200);
    world
        .wait_rows(
            "inbox_work",
            "AND status = 'DEAD' AND owner = 'compliance'",
            1,
        )
        .await?;
    assert_eq!(world.outcomes().await?, ["DEAD:KYT_FAIL_AFTER_APPROVAL"]);
    // Recorded, but the approved withdrawal and its hold are untouched: a person decides.
    assert_eq!(world.rows("kyt_screenings", "").await?, 1);
    assert_eq!(stack.state(&op).await?, "APPROVED");
    assert_eq!(world.treasury().await?, (900, 100));
    world.stop().await
}

#[tokio::test]
async fn an_item_that_keeps_failing_becomes_a_dead_letter_after_max_attempts() -> anyhow::Result<()>
{
    // max_attempts 3, retries from 50 ms (the test configuration).
    let world = World::start("screening", &["kyt.result"]).await?;
    let unknown_op = uuid::Uuid::now_v7().to_string();
    assert_eq!(world.post(&kyt(&unknown_op, "fail", "x")).await?, 200);
    world
        .wait_rows(
            "inbox_work",
            "AND status = 'DEAD' AND attempts = 3 AND owner = 'payments-operations' \
             AND outcome = 'ATTEMPTS_EXHAUSTED' AND last_error = 'OPERATION_NOT_FOUND'",
            1,
        )
        .await?;
    assert_eq!(
        world.inbox.metric("opledger_inbox_dead_letters").await?,
        1.0
    );
    assert!(
        world
            .inbox
            .metric("opledger_inbox_oldest_unresolved_seconds")
            .await?
            >= 0.0
    );
    world.stop().await
}

#[tokio::test]
async fn retention_purges_processed_and_quarantined_bodies_and_keeps_dead_letters()
-> anyhow::Result<()> {
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let id = event_id();
    let first = deposit("d1", "treasury", "ETH", "3");
    assert_eq!(world.post_as(&id, &first).await?.0, 200);
    let altered = deposit("d1", "treasury", "ETH", "4");
    assert_eq!(world.post_as(&id, &altered).await?.0, 200);
    let unknown_op = uuid::Uuid::now_v7().to_string();
    assert_eq!(world.post(&kyt(&unknown_op, "pass", "r")).await?, 200);
    world
        .wait_rows("inbox_work", "AND status IN ('DONE', 'DEAD')", 2)
        .await?;
    let admin = world.stack.admin.clone();
    let purge = |age: Duration| {
        let admin = admin.clone();
        async move {
            admin
                .purge_inbox_bodies(age, age)
                .await
                .map_err(|e| anyhow::anyhow!(e.log_safe()))
        }
    };
    let young = purge(Duration::from_secs(86_400)).await?;
    assert_eq!(
        (young.events, young.quarantined),
        (0, 0),
        "nothing is old enough yet"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let purged = purge(Duration::from_millis(10)).await?;
    assert_eq!(
        (purged.events, purged.quarantined),
        (1, 1),
        "processed + quarantined"
    );
    assert_eq!(
        world
            .rows(
                "inbox_events",
                "AND body_ciphertext IS NULL AND body_purged_at IS NOT NULL"
            )
            .await?,
        1
    );
    // The dead letter keeps its body for the person who owns it; metadata stays for all.
    assert_eq!(
        world
            .rows("inbox_events", "AND body_ciphertext IS NOT NULL")
            .await?,
        1
    );
    assert_eq!(
        world
            .rows("inbox_events", "AND octet_length(body_hash) = 32")
            .await?,
        2
    );
    world.stop().await
}

#[tokio::test]
async fn a_deposit_beyond_the_amount_range_never_corrupts_the_account() -> anyhow::Result<()> {
    // A deposit is only proposed; the overflow is found where a credit is applied, by the witness.
    // So the issue's reproduction (two signed deposits of u128::MAX for one account) must end with
    // two proposals that neither crash the processor nor the balance read (pending is capped at
    // the range), and, once operators witness both, exactly one applied: the witness refuses the
    // other with CREDIT_OUT_OF_RANGE, commits nothing of it, and the account still takes work.
    let world = World::start("chainwatch", &ALL_TYPES).await?;
    let max = u128::MAX.to_string();
    for (n, id) in ["0xdeposit-max-1", "0xdeposit-max-2"].iter().enumerate() {
        assert_eq!(
            world.post(&deposit(id, "treasury", "ETH", &max)).await?,
            200
        );
        world
            .wait_rows("inbox_work", "AND status = 'DONE'", n as i64 + 1)
            .await?;
    }
    assert_eq!(
        world.outcomes().await?,
        ["DONE:CREDIT_PROPOSED", "DONE:CREDIT_PROPOSED"]
    );
    assert_eq!(world.rows("credit_proposals", "").await?, 2);
    assert_eq!(world.pending().await?, u128::MAX);
    assert_eq!(world.treasury().await?, (0, 0));

    // Neither carries chain evidence: an operator's statement witnesses each, oldest first.
    let witness = opledger_tests::chain::credit_witness(
        &world.stack,
        &["http://127.0.0.1:9"],
        1,
        &[world.acme.id],
    )
    .await?;
    for id in ["0xdeposit-max-1", "0xdeposit-max-2"] {
        world.sign_deposit(id, "treasury", u128::MAX).await?;
    }
    assert_eq!(
        witness.tick(16).await,
        [Outcome::Attested, Outcome::Refused("CREDIT_OUT_OF_RANGE")]
    );
    assert_eq!(witness.tick(16).await, []);
    // Nothing of the second was committed; the account reads and still takes work.
    assert_eq!(world.rows("ledger_credits", "").await?, 1);
    assert_eq!(world.rows("credit_refusals", "").await?, 1);
    assert_eq!(world.pending().await?, 0);
    assert_eq!(world.treasury().await?, (u128::MAX, 0));
    world.stack.withdraw(&world.acme, "100", ALICE).await?;
    assert_eq!(world.treasury().await?, (u128::MAX - 100, 100));
    world.stack.assert_invariants().await?;
    world.stop().await
}
