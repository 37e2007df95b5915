//! One test per fault class of the double that tests/custodian/faults.rs does not play at the
//! executor's level, each asserting what the executor recorded (sends, answers, records,
//! proposals, escalations), what the books hold (state, hold, ledger entries, inclusions) and
//! what reached the chain (the double's transfers, cross-checked with its node).

use anyhow::Context;
use opledger_custodian_executor::Executor;
use opledger_tests::chain::CONFIRMATIONS;
use opledger_tests::custodian::{
    Books, SIM_WALLET, Sim, SimWebhooks, approved_withdrawal, books, cadence, chains,
    custodian_witness, executor, executor_with, pass_until,
};
use opledger_tests::{Stack, Tenant};
use opledger_witness::CustodianOutcome;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub(crate) const AMOUNT: &str = "1000000000000000";
const WITHIN: Duration = Duration::from_secs(30);
/// An hour of the double's clock: a lag or a hold no real wait ends (`POST /sim/clock` does).
const HOUR: u64 = 3600;

fn schedule(rules: Value) -> Value {
    json!({"seed": 17, "rules": rules})
}

/// The double (Fireblocks profile) on its own node, the stack, a funded tenant routed to the
/// double, and an executor settling from the double's node.
pub(crate) struct World {
    pub(crate) sim: Sim,
    pub(crate) stack: Stack,
    acme: Tenant,
    executor: Executor,
}

impl World {
    /// With `rules` and a consistency window of `window_secs`.
    pub(crate) async fn start(rules: Value, window_secs: u64) -> anyhow::Result<World> {
        let sim = Sim::start(schedule(rules), 0).await?;
        let stack = Stack::start().await?;
        let acme = stack.tenant("acme").await?;
        stack
            .fund(&acme, "treasury", "ETH", "100000000000000000")
            .await?;
        let account = sim.account(&acme, window_secs)?;
        let executor = executor(&stack, "executor-1", vec![account])
            .await?
            .with_chains(chains(&sim)?);
        Ok(World {
            sim,
            stack,
            acme,
            executor,
        })
    }

    /// An approved withdrawal of [`AMOUNT`] to a fresh address: its id and the address.
    pub(crate) async fn withdrawal(&self) -> anyhow::Result<(String, String)> {
        let (w, destination) = approved_withdrawal(&self.stack, &self.acme, AMOUNT).await?;
        Ok((w.withdrawal_id, destination))
    }

    /// Passes (mining a block after each when `mine`) until `done` holds for `op`'s books.
    pub(crate) async fn until(
        &self,
        op: &str,
        mine: bool,
        done: impl Fn(&Books) -> bool,
    ) -> anyhow::Result<Books> {
        let node = self.sim.anvil()?;
        pass_until(
            &self.stack,
            &self.executor,
            op,
            mine.then_some(node),
            WITHIN,
            done,
        )
        .await
    }

    /// `rounds` more passes, 250 ms apart (longer than the executor's follow interval): each
    /// looks the withdrawal up again.
    async fn follow(&self, rounds: usize) {
        for _ in 0..rounds {
            tokio::time::sleep(Duration::from_millis(250)).await;
            self.executor.pass(16, 4).await;
        }
    }

    /// Paid exactly once, settled from the chain: one transfer for the reference, mined, to the
    /// destination, which holds exactly the amount; the withdrawal CONFIRMED with one live
    /// inclusion naming that transfer's block, its hold settled by one SETTLE entry, never
    /// released, one request. The books and the transfer.
    pub(crate) async fn settled_once(
        &self,
        op: &str,
        destination: &str,
    ) -> anyhow::Result<(Books, Value)> {
        let (transfer, block_hash) = self.sim.paid_once(op, destination, AMOUNT).await?;
        let books = books(&self.stack, op).await?;
        assert_eq!(books.state, "CONFIRMED");
        assert_eq!(books.hold, "SETTLED");
        assert_eq!((books.settles, books.releases, books.reopens), (1, 0, 0));
        assert_eq!((books.requests, books.proposals), (1, 0));
        let live = books.live_inclusions();
        assert_eq!(live.len(), 1, "{:?}", books.inclusions);
        assert_eq!(Some(live[0].tx_hash.as_str()), transfer["hash"].as_str());
        assert_eq!(live[0].block_hash, block_hash);
        Ok((books, transfer))
    }

    /// The operations the double stores for `reference` (one per reference it was sent).
    async fn operations_of(&self, reference: &str) -> anyhow::Result<Vec<Value>> {
        operations_of(&self.sim, reference).await
    }
}

async fn operations_of(sim: &Sim, reference: &str) -> anyhow::Result<Vec<Value>> {
    let all = sim.get("operations").await?;
    Ok(all
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|op| op["reference"].as_str() == Some(reference))
        .collect())
}

/// The statuses the double's records of `reference` show now, oldest record first.
async fn statuses_now(sim: &Sim, reference: &str) -> anyhow::Result<Vec<String>> {
    let ops = operations_of(sim, reference).await?;
    let views = ops
        .first()
        .and_then(|op| op["views"].as_array().cloned())
        .unwrap_or_default();
    Ok(views
        .iter()
        .filter_map(|v| v["status"].as_str().map(str::to_owned))
        .collect())
}

#[tokio::test]
async fn a_resend_answered_as_a_duplicate_in_any_way_is_looked_up_never_renamed_and_paid_once()
-> anyhow::Result<()> {
    let w = World::start(json!([]), 1).await?;
    // The first answer is lost (the connection closed, or a 500 after the double stored it) and
    // lookups find nothing for an hour: after the 1 s window the stored request is sent again,
    // under our reference, and the double answers that resend each way a provider does.
    let lost = || json!({"kind": "drop_response", "nth": 1});
    let lag = || json!({"kind": "lookup_lag", "secs": HOUR});
    let duplicate = |answer: &str| json!({"kind": "duplicate", "answer": answer, "nth": 2});
    let cases = [
        // 400, Fireblocks 1438 (the external tx id exists).
        (
            json!([lost(), duplicate("reject"), lag()]),
            [None, Some(400)],
            vec!["duplicate#1"],
            ["CONNECTION_LOST", "DUPLICATE"],
            "UNKNOWN",
        ),
        // 409 Conflict.
        (
            json!([lost(), duplicate("conflict"), lag()]),
            [None, Some(409)],
            vec!["duplicate#1"],
            ["CONNECTION_LOST", "DUPLICATE"],
            "UNKNOWN",
        ),
        // The first answer replayed: accepted, and followed.
        (
            json!([lost(), duplicate("replay"), lag()]),
            [None, Some(200)],
            vec!["duplicate#1"],
            ["CONNECTION_LOST", "ACCEPTED"],
            "BROADCAST",
        ),
        // 400, Fireblocks 1439: the double's own idempotency memory of the 500 it gave, no rule.
        (
            json!([{"kind": "error_after_accept", "status": 500, "nth": 1}, lag()]),
            [Some(500), Some(400)],
            vec![],
            ["SERVER_ERROR", "DUPLICATE"],
            "UNKNOWN",
        ),
    ];
    for (done, (rules, statuses, resend_faults, answers, after)) in cases.into_iter().enumerate() {
        w.sim.set_faults(&schedule(rules)).await?;
        let (op, destination) = w.withdrawal().await?;
        let resent = w.until(&op, false, |b| b.sends == 2).await?;
        assert_eq!(resent.answers, answers);
        assert_eq!(resent.state, after, "{answers:?}");
        assert_eq!(resent.hold, "OPEN");
        assert!(resent.records.is_empty(), "nothing found yet");
        assert_eq!((resent.requests, resent.proposals), (1, 0));
        let creates = w.sim.creates_of(&op).await?;
        let answered: Vec<Option<u64>> = creates.iter().map(|(status, _)| *status).collect();
        assert_eq!(answered, statuses, "{answers:?}");
        assert_eq!(creates[1].1, resend_faults, "{answers:?}");
        assert!(w.sim.transfers_of(&op).await?.len() <= 1);

        // The provider indexes it: found by our reference, settled from the chain, once.
        w.sim.advance_clock(HOUR).await?;
        w.until(&op, true, |b| b.state == "CONFIRMED").await?;
        let (books, transfer) = w.settled_once(&op, &destination).await?;
        assert_eq!(books.sends, 2, "never sent a third time");
        assert!(books.records.iter().any(|r| {
            r.status == "COMPLETED" && r.tx_hash.as_deref() == transfer["hash"].as_str()
        }));
        assert!(w.sim.lookups_of(&op).await? > 0);
        // One operation at the double for the reference, and none under another name.
        assert_eq!(w.operations_of(&op).await?.len(), 1);
        let all = w.sim.get("operations").await?;
        assert_eq!(all.as_array().map(Vec::len), Some(done + 1));
    }
    w.stack.assert_invariants().await
}

#[tokio::test]
async fn stale_statuses_are_only_followed_and_the_chain_settles_the_withdrawal_once()
-> anyhow::Result<()> {
    // Lookups show the status the record had an hour earlier: SUBMITTED, long after the double
    // paid and completed it.
    let w = World::start(json!([{"kind": "status_lag", "secs": HOUR}]), 2).await?;
    let (op, destination) = w.withdrawal().await?;
    let deadline = Instant::now() + WITHIN;
    while statuses_now(&w.sim, &op).await? != ["COMPLETED"] {
        anyhow::ensure!(Instant::now() < deadline, "the double never completed it");
        w.executor.pass(16, 4).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Final on chain too: only the stale record keeps the executor from settling.
    w.sim.anvil()?.mine(CONFIRMATIONS - 1).await?;
    let seen = books(&w.stack, &op).await?.records.len();
    let stale = w.until(&op, false, |b| b.records.len() >= seen + 3).await?;
    assert!(
        stale
            .records
            .iter()
            .all(|r| r.status == "SUBMITTED" && r.tx_hash.is_none()),
        "{:?}",
        stale.records
    );
    assert_eq!(stale.state, "BROADCAST");
    assert_eq!(stale.hold, "OPEN");
    assert_eq!((stale.sends, stale.proposals, stale.settles), (1, 0, 0));
    assert!(stale.inclusions.is_empty());
    assert_eq!(statuses_now(&w.sim, &op).await?, ["COMPLETED"]);

    // The lag ends: the record names the transaction, and the chain settles it.
    w.sim.advance_clock(HOUR).await?;
    w.until(&op, true, |b| b.state == "CONFIRMED").await?;
    let (books, _) = w.settled_once(&op, &destination).await?;
    assert_eq!(books.sends, 1, "never sent again");
    assert_eq!(books.answers, ["ACCEPTED"]);
    w.stack.assert_invariants().await
}

#[tokio::test]
async fn a_long_authorization_then_a_rejection_or_a_block_releases_once_only_on_the_witness()
-> anyhow::Result<()> {
    let w = World::start(json!([]), 2).await?;
    let witness =
        custodian_witness(&w.stack, &w.sim, vec![w.sim.witness_account(&w.acme)?]).await?;
    let cases = [
        (false, "REJECTED", "REJECTED_BY_USER"),
        (true, "BLOCKED", "BLOCKED_BY_POLICY"),
    ];
    for (blocked, status, sub_status) in cases {
        let rule = json!({"kind": "reject", "blocked": blocked, "hold_secs": HOUR});
        w.sim.set_faults(&schedule(json!([rule]))).await?;
        let (op, _) = w.withdrawal().await?;
        // In authorization for an hour of the double's clock: followed, nothing else.
        let pending = w
            .until(&op, false, |b| b.records_in("PENDING_AUTHORIZATION") >= 3)
            .await?;
        assert_eq!(pending.state, "BROADCAST", "{status}");
        assert_eq!(pending.hold, "OPEN");
        assert_eq!(pending.answers, ["ACCEPTED"], "sent once");
        assert_eq!((pending.proposals, pending.releases), (0, 0));
        assert!(witness.tick(16).await.is_empty(), "nothing proposed");
        assert_eq!(w.sim.creates_of(&op).await?.len(), 1);

        // The provider's record turns terminal without a transaction: a proposal, no release.
        w.sim.advance_clock(HOUR).await?;
        w.until(&op, false, |b| b.proposals > 0).await?;
        w.follow(3).await;
        let proposed = books(&w.stack, &op).await?;
        assert_eq!(proposed.state, "UNKNOWN", "{status}");
        assert_eq!(proposed.hold, "OPEN");
        assert_eq!((proposed.attestations, proposed.releases), (0, 0));
        let last = proposed.records.last().cloned();
        assert_eq!(
            last.map(|r| (r.status, r.sub_status, r.tx_hash)),
            Some((status.to_owned(), Some(sub_status.to_owned()), None))
        );

        // The witness attests it from its own lookup; then the release, once.
        assert_eq!(witness.tick(16).await, [CustodianOutcome::Attested]);
        w.until(&op, false, |b| b.state == "VERIFIED_NOT_SENT")
            .await?;
        w.follow(3).await;
        let released = books(&w.stack, &op).await?;
        assert_eq!(released.state, "VERIFIED_NOT_SENT");
        assert_eq!(released.hold, "RELEASED");
        assert_eq!((released.releases, released.settles), (1, 0), "{status}");
        assert_eq!((released.attestations, released.sends), (1, 1));
        assert_eq!(released.records_with_hash(), 0);
        let (attested,): (String,) = sqlx::query_as(
            "SELECT status FROM custodian_release_attestations WHERE op_id = $1::uuid",
        )
        .bind(&op)
        .fetch_one(w.stack.admin.pool())
        .await?;
        assert_eq!(attested, status);
        assert!(w.sim.transfers_of(&op).await?.is_empty(), "nothing sent");
        assert!(witness.tick(16).await.is_empty(), "decided");
    }
    assert_eq!(w.sim.anvil()?.nonce(SIM_WALLET, "latest").await?, 0);
    w.stack.assert_invariants().await
}

#[tokio::test]
async fn a_replaced_transaction_settles_on_the_mined_hash_and_the_replaced_one_never_settles()
-> anyhow::Result<()> {
    let w = World::start(json!([{"kind": "replacement"}]), 2).await?;
    let (op, destination) = w.withdrawal().await?;
    w.until(&op, true, |b| b.state == "CONFIRMED").await?;
    let (_, transfer) = w.settled_once(&op, &destination).await?;
    let mined = transfer["hash"].as_str().unwrap_or_default().to_owned();
    let replaced: Vec<String> = serde_json::from_value(transfer["replaced_hashes"].clone())?;
    assert_eq!(replaced.len(), 1, "{transfer}");
    assert_ne!(replaced[0], mined);
    // Followed on, blocks mined: nothing more happens.
    for _ in 0..3 {
        w.sim.anvil()?.mine(1).await?;
        w.follow(1).await;
    }
    let after = w.settled_once(&op, &destination).await?.0;
    // The executor stored the record naming the mined hash with the first one as replaced.
    assert!(
        after
            .records
            .iter()
            .any(|r| r.tx_hash.as_deref() == Some(mined.as_str()) && r.replaced == replaced),
        "{:?}",
        after.records
    );
    assert_eq!(after.inclusions.len(), 1, "the replaced hash never settles");
    assert_eq!((after.sends, after.proposals), (1, 0));
    // The replaced transaction was never on chain.
    let node = w.sim.anvil()?;
    assert_eq!(node.receipt(&replaced[0]).await?, None);
    let seen = node
        .rpc("eth_getTransactionByHash", json!([replaced[0]]))
        .await?;
    assert!(seen.is_null(), "{seen}");
    assert_eq!(
        node.nonce(SIM_WALLET, "latest").await?,
        1,
        "one transaction sent"
    );
    w.stack.assert_invariants().await
}

#[tokio::test]
async fn a_failed_record_naming_a_transaction_never_broadcast_keeps_the_hold_and_stays_unresolved()
-> anyhow::Result<()> {
    let rule = json!({"kind": "failed_with_hash", "variant": "not_broadcast"});
    let w = World::start(json!([rule]), 2).await?;
    let witness =
        custodian_witness(&w.stack, &w.sim, vec![w.sim.witness_account(&w.acme)?]).await?;
    let (op, destination) = w.withdrawal().await?;
    let failed = |b: &Books| {
        b.records
            .iter()
            .filter(|r| r.status == "FAILED" && r.tx_hash.is_some())
            .count()
    };
    let first = w.until(&op, false, |b| failed(b) > 0).await?;
    let record = first.records.last().cloned().context("no record")?;
    assert_eq!(record.sub_status.as_deref(), Some("DROPPED_BY_BLOCKCHAIN"));
    let hash = record.tx_hash.unwrap_or_default();
    // The chain decides and never shows it, however deep the chain grows.
    let later = w.until(&op, true, |b| failed(b) >= 4).await?;
    assert_eq!(later.state, "BROADCAST");
    assert_eq!(later.hold, "OPEN");
    assert_eq!((later.settles, later.releases, later.reopens), (0, 0, 0));
    assert_eq!(
        (later.proposals, later.attestations, later.sends),
        (0, 0, 1)
    );
    assert!(later.inclusions.is_empty());
    assert!(witness.tick(16).await.is_empty(), "nothing to release");
    assert!(later.escalations.is_empty(), "{:?}", later.escalations);
    // Past `stuck_after` (1 s here, two hours by default) an operator is told; the funds stay
    // held and nothing else changes.
    let account = w.sim.account(&w.acme, 2)?;
    let mut cadence = cadence(Duration::from_millis(200));
    cadence.stuck_after = Duration::from_secs(1);
    let told = executor_with(&w.stack, "executor-2", vec![account], cadence)
        .await?
        .with_chains(chains(&w.sim)?);
    let deadline = Instant::now() + WITHIN;
    let escalated = loop {
        told.pass(16, 4).await;
        let b = books(&w.stack, &op).await?;
        if !b.escalations.is_empty() {
            break b;
        }
        anyhow::ensure!(Instant::now() < deadline, "never escalated");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(escalated.escalations, ["CUSTODIAN_TRANSACTION_NOT_FINAL"]);
    assert_eq!(
        (escalated.state.as_str(), escalated.hold.as_str()),
        ("BROADCAST", "OPEN")
    );
    // Nothing reached the chain: no transfer, no transaction from the double's wallet.
    assert!(w.sim.transfers_of(&op).await?.is_empty());
    let node = w.sim.anvil()?;
    assert_eq!(node.receipt(&hash).await?, None);
    let seen = node.rpc("eth_getTransactionByHash", json!([hash])).await?;
    assert!(seen.is_null(), "{seen}");
    assert_eq!(node.nonce(SIM_WALLET, "latest").await?, 0);
    assert_eq!(node.balance(&destination).await?, 0);
    w.stack.assert_invariants().await
}

#[tokio::test]
async fn a_no_lookup_providers_ambiguous_answer_stays_unknown_for_an_operator_even_when_it_retried()
-> anyhow::Result<()> {
    // Coinbase Prime: the answer is lost, and the double recreates the transaction (the first
    // ends TRANSACTION_RETRIED, a second carries the only broadcast).
    let rules = json!([
        {"kind": "drop_response", "nth": 1, "profile": "prime"},
        {"kind": "retried", "profile": "prime"}
    ]);
    let sim = Sim::start_webhooks(SimWebhooks {
        faults: schedule(rules),
        authorization_delay_secs: 0,
        fireblocks_webhook_url: None,
        bitgo: None,
        prime: Some((None, "prime-test-signing-secret".to_owned())),
    })
    .await?;
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "100000000000000000")
        .await?;
    let account = sim.prime_account_within(&acme, 1)?;
    let executor = executor(&stack, "executor-1", vec![account]).await?;
    let (w, destination) = approved_withdrawal(&stack, &acme, AMOUNT).await?;
    let op = w.withdrawal_id;
    executor.pass(16, 4).await;
    let sent_at = Instant::now();
    let first = books(&stack, &op).await?;
    assert_eq!(first.state, "UNKNOWN");
    assert_eq!(first.answers, ["CONNECTION_LOST"]);
    assert_eq!(first.escalations, ["CUSTODIAN_NO_LOOKUP"]);
    // The double retries and pays under its second transaction; the executor, passing on well
    // past the account's 1 s window, never learns it and never sends again.
    let deadline = Instant::now() + WITHIN;
    loop {
        executor.pass(16, 4).await;
        let now = statuses_now(&sim, &op).await?;
        if now == ["TRANSACTION_RETRIED", "TRANSACTION_DONE"]
            && sent_at.elapsed() > Duration::from_millis(1500)
        {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "the double shows {now:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let books = books(&stack, &op).await?;
    assert_eq!(books.state, "UNKNOWN");
    assert_eq!(books.hold, "OPEN");
    assert_eq!((books.requests, books.sends), (1, 1));
    assert_eq!(books.answers, ["CONNECTION_LOST"]);
    assert!(books.records.is_empty(), "no lookup");
    assert_eq!(books.escalations, ["CUSTODIAN_NO_LOOKUP"], "escalated once");
    assert_eq!((books.settles, books.releases, books.proposals), (0, 0, 0));
    // One request reached the double, answered by nothing, and no read of any kind.
    let creates = sim.creates_of(&op).await?;
    assert_eq!(creates.len(), 1, "{creates:?}");
    assert_eq!(creates[0].0, None);
    let reads = sim.requests().await?;
    assert!(reads.iter().all(|r| r["method"] != "GET"), "{reads:?}");
    // The double paid once, from its second transaction; our books hold it for an operator.
    let (transfer, _) = sim.paid_once(&op, &destination, AMOUNT).await?;
    let ops = operations_of(&sim, &op).await?;
    assert_eq!(ops.len(), 1);
    assert_eq!(ops[0]["records"][1]["id"], transfer["provider_id"]);
    stack.assert_invariants().await
}
