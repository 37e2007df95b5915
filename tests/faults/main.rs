//! The fault harness: two instances of each of the eight real service processes against one real
//! PostgreSQL database and a real anvil node, with every step boundary of the pipeline killed in
//! turn (a failpoint aborts the process as SIGKILL would), then a transfer the node drops from
//! its pool (cancelled, and VERIFIED_NOT_SENT only once the cancel is final at three
//! confirmations), then a seeded soak of random kills of
//! single instances, proxy faults in front of PostgreSQL and the node, duplicate and reordered
//! webhooks and chain reorganizations. After each run the system is left to converge and audited
//! against what every client was told and for duplicate work (`audit.rs`); at the end it prints
//! what each instance did.
//!
//! The custodian path runs through the conformance double after the fault-free phase
//! (`custodian.rs`: its executor killed at every step boundary, then 100 withdrawals under the
//! double's seeded faults with executors killed at random).
//!
//! It ends with one summary line. Every random choice comes from one seed, printed in that line:
//! `OPLEDGER_SOAK_SEED=<seed>` replays a run, `OPLEDGER_SOAK_STEPS=<n>` makes the soak longer
//! (default 75 steps; `OPLEDGER_SOAK_STEPS=1000 bash scripts/test.sh -p opledger-tests --test
//! faults` runs a long one), `OPLEDGER_FAULT_INSTANCES=1` runs one
//! instance of each service instead of two.

mod audit;
mod cluster;
mod credits;
mod custodian;
mod duplicates;
mod service;

use audit::{Answer, Decision, Tally, create_request, decide_at, deposit_body};
use cluster::{Cluster, all_instances, instance, instances};
use opledger_proto::v1 as pb;
use opledger_testkit::FaultMode;
use opledger_tests::authed;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// How a failpoint is reached.
#[derive(Debug, Clone, Copy)]
enum Trigger {
    /// A CreateWithdrawal call.
    Create,
    /// An ApproveWithdrawal call.
    Approve,
    /// A RejectWithdrawal call.
    Reject,
    /// An approved withdrawal the workers carry to the chain.
    Pipeline,
    /// An approved withdrawal whose submission answer is lost (UNKNOWN, then the reconciler).
    Unknown,
    /// A webhook delivery.
    Webhook,
    /// A webhook the processor applies.
    Processor,
}

/// Every step boundary the harness kills, by service.
const FAILPOINTS: [(&str, &str, Trigger); 17] = [
    (
        "operations",
        "create.after_operation_insert",
        Trigger::Create,
    ),
    ("operations", "create.after_hold", Trigger::Create),
    ("operations", "create.after_commit", Trigger::Create),
    ("approvals", "approve.before_commit", Trigger::Approve),
    ("approvals", "approve.after_commit", Trigger::Approve),
    ("approvals", "hold.release_before_commit", Trigger::Reject),
    ("signer", "sign.after_claim", Trigger::Pipeline),
    ("signer", "sign.after_sign", Trigger::Pipeline),
    ("signer", "sign.before_commit", Trigger::Pipeline),
    ("signer", "sign.after_commit", Trigger::Pipeline),
    ("broadcaster", "broadcast.before_submit", Trigger::Pipeline),
    ("broadcaster", "broadcast.after_submit", Trigger::Pipeline),
    (
        "broadcaster",
        "hold.settle_before_commit",
        Trigger::Pipeline,
    ),
    ("reconciler", "hold.settle_before_commit", Trigger::Unknown),
    ("inbox", "webhook.before_commit", Trigger::Webhook),
    ("inbox", "webhook.after_commit", Trigger::Webhook),
    ("inbox", "inbox.apply_before_commit", Trigger::Processor),
];

/// Fresh destinations (never funded), so their balances are exactly what was paid to them.
fn destinations(rng: &mut StdRng) -> Vec<String> {
    (0..4)
        .map(|_| format!("0x{}", hex::encode(rng.random::<[u8; 20]>())))
        .collect()
}

const CONVERGE: Duration = Duration::from_secs(120);

/// Withdrawals of the fault-free phase.
const CLEAN_WITHDRAWALS: usize = 12;

async fn approved_withdrawal(
    tally: &mut Tally,
    c: &Cluster,
    amount: u128,
    to: &str,
) -> anyhow::Result<String> {
    let id = tally
        .create(c, &uuid::Uuid::new_v4().to_string(), amount, to, false)
        .await?;
    tally.approve(c, &id, false).await?;
    Ok(id)
}

/// Arms `failpoint` in `service`, reaches it, checks the process died there, restarts it and lets
/// the clients retry as they would; then converges and audits.
async fn kill_at(
    tally: &mut Tally,
    c: &mut Cluster,
    rng: &mut StdRng,
    service: &str,
    failpoint: &str,
    trigger: Trigger,
    to: &str,
) -> anyhow::Result<()> {
    // A call the client makes is sent to the first instance, which alone is armed; work the
    // instances take from the database may reach either, so every instance is armed for it.
    let armed = match trigger {
        Trigger::Create | Trigger::Approve | Trigger::Reject | Trigger::Webhook => 1,
        Trigger::Pipeline | Trigger::Unknown | Trigger::Processor => instances(),
    };
    for i in 0..armed {
        c.start_service(&instance(service, i), &format!("{failpoint}=abort"))
            .await?;
    }
    let amount = u128::from(rng.random_range(1_000_u32..1_000_000)) * 1_000_000_000;
    match trigger {
        Trigger::Create => {
            let key = uuid::Uuid::new_v4().to_string();
            let first = c
                .operations_at(Some(0))?
                .1
                .create_withdrawal(authed(&c.acme.client, create_request(&key, amount, to)))
                .await;
            anyhow::ensure!(first.is_err(), "{failpoint}: the create was answered");
            expect_death(tally, c, service, failpoint).await?;
            tally.create(c, &key, amount, to, true).await?;
        }
        Trigger::Approve | Trigger::Reject => {
            let id = tally
                .create(c, &uuid::Uuid::new_v4().to_string(), amount, to, false)
                .await?;
            let decision = if matches!(trigger, Trigger::Approve) {
                Decision::Approve
            } else {
                Decision::Reject
            };
            let first = decide_at(c, &id, decision, Some(0)).await;
            anyhow::ensure!(
                matches!(first, Answer::Unanswered(_)),
                "{failpoint}: the call was answered"
            );
            expect_death(tally, c, service, failpoint).await?;
            match decision {
                Decision::Approve => tally.approve(c, &id, true).await?,
                Decision::Reject => tally.reject(c, &id, true).await?,
            }
        }
        Trigger::Pipeline => {
            approved_withdrawal(tally, c, amount, to).await?;
            expect_death(tally, c, service, failpoint).await?;
        }
        Trigger::Unknown => {
            // Every node answer is lost until the submission made the operation UNKNOWN.
            c.node_proxy.set_mode(FaultMode::ForwardThenDropResponse);
            c.node_proxy.drop_connections();
            let id = approved_withdrawal(tally, c, amount, to).await?;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while c.withdrawal(&id).await?.state != pb::WithdrawalState::Unknown as i32 {
                anyhow::ensure!(tokio::time::Instant::now() < deadline, "never UNKNOWN");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // Answers stay lost (no verdict) until the transfer is final (1 s blocks), so the
            // reconciler's first verdict is the settlement it is killed committing.
            let final_after = opledger_tests::chain::CONFIRMATIONS + 1;
            tokio::time::sleep(Duration::from_secs(final_after)).await;
            c.node_proxy.set_mode(FaultMode::Pass);
            c.node_proxy.drop_connections();
            expect_death(tally, c, service, failpoint).await?;
        }
        Trigger::Webhook | Trigger::Processor => {
            let event = format!("msg_{}", uuid::Uuid::new_v4().simple());
            let deposit = format!("dep-{}", uuid::Uuid::new_v4().simple());
            let first = c
                .sender_at(Some(0))
                .1
                .send(&c.endpoint, &event, &deposit_body(&deposit, amount))
                .await;
            let answered = matches!(first, Ok((200, _)));
            if matches!(trigger, Trigger::Processor) {
                anyhow::ensure!(answered, "{failpoint}: the delivery was not acknowledged");
                tally.webhooks.insert(event.clone(), deposit.clone());
                tally.deposit_amounts.insert(deposit.clone(), amount);
            } else {
                anyhow::ensure!(!answered, "{failpoint}: the delivery was acknowledged");
            }
            expect_death(tally, c, service, failpoint).await?;
            if !answered {
                tally.deposit(c, &event, &deposit, amount, true).await?;
            }
        }
    }
    tally.converge(c, CONVERGE).await?;
    tally.audit(c, &format!("{service}@{failpoint}")).await
}

async fn expect_death(
    tally: &mut Tally,
    c: &mut Cluster,
    service: &str,
    failpoint: &str,
) -> anyhow::Result<()> {
    let dead = c.died(service, Duration::from_secs(30)).await as u64;
    if dead > 0 {
        tally.kills += dead;
        tally.failpoint_kills += dead;
    } else {
        tally.violations.push(format!(
            "{service} never reached {failpoint} (binary built without failpoints? build with \
             `cargo build --workspace --bins`)"
        ));
    }
    // The instance that did not reach the failpoint is started again unarmed too.
    c.heal(true).await
}

/// A transfer the node dropped from its pool after the answer to its submission was lost, with
/// the watchers and reconcilers at three confirmations: a reconciler cancels at its nonce, the
/// cancel mines, and only once it is final is the withdrawal VERIFIED_NOT_SENT: the recipient
/// unpaid, the hold released once, the cancel the only transaction at that nonce.
async fn dropped_transfer(
    tally: &mut Tally,
    c: &mut Cluster,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    // A fresh recipient, so its balance is exactly what was paid to it.
    let to = format!("0x{}", hex::encode(rng.random::<[u8; 20]>()));
    let amount = u128::from(rng.random_range(1_000_u32..1_000_000)) * 1_000_000_000;
    // No block is mined while the transfer waits in the pool, and every node answer is lost
    // until the submission made the operation UNKNOWN.
    c.node.set_interval_mining(0).await?;
    c.node_proxy.set_mode(FaultMode::ForwardThenDropResponse);
    c.node_proxy.drop_connections();
    let id = approved_withdrawal(tally, c, amount, &to).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while c.withdrawal(&id).await?.state != pb::WithdrawalState::Unknown as i32 {
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "never UNKNOWN");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let op: uuid::Uuid = id.parse()?;
    let pool = c.stack.admin.pool().clone();
    let ours = |attempts: Vec<(uuid::Uuid, String, String, i64)>| -> Vec<(String, String, i64)> {
        attempts
            .into_iter()
            .filter(|a| a.0 == op)
            .map(|(_, hash, kind, nonce)| (hash, kind, nonce))
            .collect()
    };
    let signed = ours(opledger_tests::audit::attempts(&pool, c.acme.id).await?);
    let [(original, _, nonce)] = signed.as_slice() else {
        anyhow::bail!(
            "dropped transfer: {} attempts before the drop",
            signed.len()
        );
    };
    let dropped = c.node.drop_transaction(original).await;
    c.node_proxy.set_mode(FaultMode::Pass);
    c.node_proxy.drop_connections();
    c.node.set_interval_mining(1).await?;
    anyhow::ensure!(
        dropped?,
        "dropped transfer: the submission never reached the pool"
    );

    tally.converge(c, CONVERGE).await?;
    tally.audit(c, "dropped transfer").await?;
    let state = c.withdrawal(&id).await?.state;
    anyhow::ensure!(
        state == pb::WithdrawalState::VerifiedNotSent as i32,
        "dropped transfer ended in state {state}, not VERIFIED_NOT_SENT"
    );
    anyhow::ensure!(c.node.balance(&to).await? == 0, "the recipient was paid");
    let attempts = ours(opledger_tests::audit::attempts(&pool, c.acme.id).await?);
    let mined: Vec<&(String, String, i64)> = {
        let mut mined = Vec::new();
        for attempt in &attempts {
            let receipt = c
                .node
                .rpc("eth_getTransactionReceipt", serde_json::json!([attempt.0]))
                .await?;
            if !receipt.is_null() {
                mined.push(attempt);
            }
        }
        mined
    };
    anyhow::ensure!(
        matches!(mined.as_slice(), [(_, kind, n)] if kind == "CANCEL" && n == nonce),
        "dropped transfer: mined attempts {:?}, want one CANCEL at the transfer's nonce",
        mined.iter().map(|a| (&a.1, a.2)).collect::<Vec<_>>()
    );
    let (releases,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM ledger_entries WHERE tenant_id = $1 AND op_id = $2 \
         AND kind = 'RELEASE'",
    )
    .bind(c.acme.id.as_uuid())
    .bind(op)
    .fetch_one(&pool)
    .await?;
    anyhow::ensure!(releases == 1, "dropped transfer: {releases} releases");
    tally.dropped_cancelled += 1;
    Ok(())
}

/// One step of the soak, chosen by the seeded generator.
async fn soak_step(
    tally: &mut Tally,
    c: &mut Cluster,
    rng: &mut StdRng,
    step: u64,
    to: &[String],
    held_back: &mut Option<(String, String, u128)>,
) -> anyhow::Result<()> {
    let amount = u128::from(rng.random_range(1_000_u32..1_000_000)) * 1_000_000_000;
    let dest = &to[rng.random_range(0..to.len())];
    if step % 5 == 4 {
        // A process dies at an arbitrary moment of whatever it was doing.
        let instances = all_instances();
        let victim = &instances[rng.random_range(0..instances.len())];
        c.kill(victim);
        tally.kills += 1;
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
        c.heal(false).await?;
    }
    if step % 3 == 2 {
        // Connections to the database and the node are cut; some new ones fail too.
        c.db_proxy.drop_connections();
        c.node_proxy.drop_connections();
        for _ in 0..rng.random_range(1..4) {
            c.db_proxy.once(FaultMode::ResetOnConnect);
        }
        c.node_proxy.once(match rng.random_range(0..3) {
            0 => FaultMode::ForwardThenDropResponse,
            1 => FaultMode::ResetOnConnect,
            _ => FaultMode::Latency(Duration::from_millis(50)),
        });
    }
    match rng.random_range(0..100) {
        0..45 => {
            approved_withdrawal(tally, c, amount, dest).await?;
        }
        45..55 => {
            let id = tally
                .create(c, &uuid::Uuid::new_v4().to_string(), amount, dest, false)
                .await?;
            tally.reject(c, &id, false).await?;
        }
        55..90 => {
            let event = format!("msg_{}", uuid::Uuid::new_v4().simple());
            let deposit = format!("dep-{}", uuid::Uuid::new_v4().simple());
            if held_back.is_none() && rng.random_bool(0.3) {
                // Delivered later, after the next one: reordered.
                *held_back = Some((event, deposit, amount));
            } else {
                tally.deposit(c, &event, &deposit, amount, false).await?;
                if let Some((e, d, a)) = held_back.take() {
                    tally.deposit(c, &e, &d, a, false).await?;
                    tally.reordered_webhooks += 1;
                }
                if rng.random_bool(0.3) {
                    tally.deposit(c, &event, &deposit, amount, false).await?;
                    tally.duplicate_webhooks += 1;
                }
            }
        }
        _ => {
            // The tip block is replaced by another holding the same transactions (as a real
            // reorganization usually re-includes them): inclusions move to a new block hash.
            reorg_keeping_transactions(c).await?;
            tally.reorgs += 1;
        }
    }
    Ok(())
}

/// Replaces the tip block with a new one that re-includes its transactions. (A reorganization that
/// loses transactions is `tests/broadcaster/watch.rs`'s. The harness's watcher and reconciler act
/// at three confirmations, deeper than this one-block reorganization, as real deployments
/// configure their finality deeper than the deepest reorganization.)
async fn reorg_keeping_transactions(c: &Cluster) -> anyhow::Result<()> {
    let block = c
        .node
        .rpc("eth_getBlockByNumber", serde_json::json!(["latest", false]))
        .await?;
    let mut keep = Vec::new();
    for hash in block["transactions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let raw = c
            .node
            .rpc("eth_getRawTransactionByHash", serde_json::json!([hash]))
            .await?;
        if raw.is_string() {
            keep.push(serde_json::json!([raw, 0]));
        }
    }
    c.node
        .rpc("anvil_reorg", serde_json::json!([1, keep]))
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_harness_every_step_killed_then_a_seeded_soak_leaves_no_violation()
-> anyhow::Result<()> {
    let seed: u64 = match std::env::var("OPLEDGER_SOAK_SEED") {
        Ok(s) => s.parse()?,
        Err(_) => rand::random(),
    };
    let steps: u64 = match std::env::var("OPLEDGER_SOAK_STEPS") {
        Ok(s) => s.parse()?,
        Err(_) => 75,
    };
    eprintln!("fault harness seed={seed} steps={steps} (replay: OPLEDGER_SOAK_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let to = destinations(&mut rng);
    let started = std::time::Instant::now();
    let mut c = Cluster::start().await?;
    let mut tally = Tally::default();
    let mut phases = vec![("start", started.elapsed())];

    // Fault-free first: both instances of every worker take work from one database, and none
    // of it is done twice (one attempt, one submission, one settlement per withdrawal).
    let mut clean = Vec::new();
    for i in 0..CLEAN_WITHDRAWALS {
        let amount = u128::from(rng.random_range(1_000_u32..1_000_000)) * 1_000_000_000;
        clean.push(approved_withdrawal(&mut tally, &c, amount, &to[i % to.len()]).await?);
    }
    tally.converge(&mut c, CONVERGE).await?;
    tally.audit(&c, "fault-free").await?;
    tally.audit_clean(&c, &clean, "fault-free").await?;
    phases.push(("fault-free", started.elapsed()));

    // The custodian path: its executor killed at every step boundary, then a batch under the
    // double's seeded faults with executors killed at random.
    let mut custody = custodian::CustodianTally::default();
    custodian::phase(&mut tally, &mut custody, &mut c, &mut rng).await?;
    phases.push(("custodian", started.elapsed()));

    for (i, (service, failpoint, trigger)) in FAILPOINTS.iter().enumerate() {
        let dest = to[i % to.len()].clone();
        kill_at(
            &mut tally, &mut c, &mut rng, service, failpoint, *trigger, &dest,
        )
        .await?;
    }

    phases.push(("every step killed", started.elapsed()));

    dropped_transfer(&mut tally, &mut c, &mut rng).await?;
    phases.push(("dropped transfer", started.elapsed()));

    let mut held_back = None;
    for step in 0..steps {
        soak_step(&mut tally, &mut c, &mut rng, step, &to, &mut held_back).await?;
        if step % 25 == 24 {
            tally.converge(&mut c, CONVERGE).await?;
            tally.audit(&c, &format!("soak step {step}")).await?;
        }
    }
    if let Some((e, d, a)) = held_back.take() {
        tally.deposit(&c, &e, &d, a, false).await?;
    }
    tally.converge(&mut c, CONVERGE).await?;
    tally.audit(&c, "soak end").await?;
    phases.push(("soak", started.elapsed()));
    let timeline: Vec<String> = phases
        .iter()
        .map(|(name, at)| format!("{name} {:.1}", at.as_secs_f64()))
        .collect();
    println!(
        "fault harness phases (s since start when each ended): {}",
        timeline.join(", ")
    );

    for (name, did) in duplicates::per_instance(&c).await? {
        println!("fault harness instance {name}: {did}");
    }
    let (db, node) = (c.db_proxy.stats(), c.node_proxy.stats());
    let proxy_faults = db.faulted + db.severed + node.faulted + node.severed;
    println!(
        "fault harness: seed={seed} operations={} webhooks={} faults: kills={} (failpoints={}, \
         sigkill={}) proxy={} (db cut={} db refused={} node cut={} node faulted={}) reorgs={} \
         duplicate_webhooks={} reordered_webhooks={}; indeterminate={} (had happened={}, \
         happened on retry={}) unknown_resolved={} dropped_cancelled={}; attempts={} submitted={} sends={} \
         repeated_sends={} most_sends={}; invariant_checks={} violations={} double_payouts={} \
         releases_without_evidence={} witnessed_releases={} credits_without_evidence={}; \
         custodian: operations={} confirmed={} released={} custodian_faults={} (double={} \
         executor_kills={}) resends={} double_payouts={} releases_without_evidence={}",
        tally.ops.len(),
        tally.webhooks.len(),
        tally.kills,
        tally.failpoint_kills,
        tally.kills - tally.failpoint_kills,
        proxy_faults,
        db.severed,
        db.faulted,
        node.severed,
        node.faulted,
        tally.reorgs,
        tally.duplicate_webhooks,
        tally.reordered_webhooks,
        tally.indeterminate,
        tally.indeterminate_happened,
        tally.indeterminate_now,
        tally.unknown_resolved,
        tally.dropped_cancelled,
        tally.sends.attempts,
        tally.sends.submitted,
        tally.sends.calls,
        tally.sends.repeated,
        tally.sends.most,
        tally.audits,
        tally.violations.len(),
        tally.double_payouts,
        tally.releases_without_evidence,
        tally.witnessed_releases,
        tally.credits_without_evidence,
        custody.ops.len(),
        custody.confirmed,
        custody.released,
        custody.sim_faults + custody.kills,
        custody.sim_faults,
        custody.kills,
        custody.resends,
        custody.double_payouts,
        custody.releases_without_evidence,
    );
    assert!(
        tally.violations.is_empty(),
        "violations: {:#?}",
        tally.violations
    );
    assert_eq!(
        (
            tally.double_payouts,
            tally.releases_without_evidence,
            tally.credits_without_evidence
        ),
        (0, 0, 0)
    );
    assert_eq!(
        (custody.double_payouts, custody.releases_without_evidence),
        (0, 0)
    );
    assert!(
        custody.ops.len() > custodian::BATCH && custody.confirmed > 0 && custody.released > 0,
        "custodian: {} withdrawals, {} confirmed, {} released",
        custody.ops.len(),
        custody.confirmed,
        custody.released
    );
    // Every dropped transfer's release was proposed and witnessed (the audit counts releases of
    // signed withdrawals with both records, and counts any without the witness as a violation).
    assert!(
        tally.witnessed_releases >= tally.dropped_cancelled,
        "{} witnessed releases for {} dropped transfers",
        tally.witnessed_releases,
        tally.dropped_cancelled
    );
    assert!(
        tally.kills >= 30,
        "only {} killed-process runs",
        tally.kills
    );
    assert!(proxy_faults >= 200, "only {proxy_faults} proxy faults");
    for name in all_instances() {
        c.kill(&name);
    }
    Ok(())
}
