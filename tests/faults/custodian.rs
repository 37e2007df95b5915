//! The custodian path under fault. A second tenant (`custody`) has its withdrawals on the test
//! network routed to the conformance double (`opledger-custodian-sim`), which pays from its own
//! hot wallet on the cluster's node, the chain the local signer's transfers use too. Two
//! instances of the custodian executor process follow them, and the witnesses attest their
//! releases from their own lookups.
//!
//! The phase kills both executor instances at each step boundary of the custodian path in turn
//! (the request persisted, the send about to leave, the answer not yet recorded). It then runs
//! [`BATCH`] withdrawals under a seeded fault schedule of the double: lost answers, 5xx after
//! accepting, 429s, lookups that do not know the reference yet, stale statuses, rejections,
//! blocks, failed records naming a mined transfer, and provider-side replacements. Executor
//! instances are SIGKILLed at random moments while it runs.
//!
//! The audit is read from the chain and the database, never from the double's word:
//! - every withdrawal ends CONFIRMED (its fresh destination holds exactly the amount, and the
//!   hold is settled once) or VERIFIED_NOT_SENT (the destination holds nothing, the hold is
//!   released once, and the provider's record was terminal without a transaction, attested by
//!   a witness from its own lookup);
//! - the double's hot wallet sent exactly as many transactions as withdrawals were confirmed;
//! - every request the double received carried one of our withdrawals' ids as its reference.

use crate::audit::Tally;
use crate::cluster::{Cluster, instance, instances};
use opledger_proto::v1 as pb;
use opledger_tests::custodian::{SIM_WALLET, Sim};
use opledger_tests::signer::NETWORK;
use opledger_tests::{Stack, Tenant, authed};
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The executor's step boundaries the phase kills at.
pub const FAILPOINTS: [&str; 3] = [
    "custodian.after_persist",
    "custodian.before_send",
    "custodian.after_send",
];

/// Withdrawals of the batch under the double's fault schedule.
pub const BATCH: usize = 100;

/// Executor instances SIGKILLed while the batch runs.
const RANDOM_KILLS: u64 = 8;

/// How long the custodian withdrawals get to end.
const CONVERGE: Duration = Duration::from_secs(180);

/// The tenant routed to the double, and the double.
#[derive(Debug)]
pub struct Custody {
    /// The tenant (1000 ETH in `treasury`).
    pub tenant: Tenant,
    /// The double, on the cluster's node.
    pub sim: Sim,
}

impl Custody {
    /// Provisions the tenant and starts the double on `node`, without faults.
    pub async fn start(stack: &Stack, node: &opledger_testkit::Anvil) -> anyhow::Result<Custody> {
        let tenant = stack.tenant("custody").await?;
        stack
            .fund(&tenant, "treasury", "ETH", "1000000000000000000000")
            .await?;
        let sim = Sim::start_on(&node.rpc_url(), node.chain_id(), quiet(), 0).await?;
        Ok(Custody { tenant, sim })
    }

    /// The operations service's `custodian_routes`, as its environment variable's value.
    pub fn routes(&self) -> String {
        format!(
            "[{{tenant = \"{}\", network = \"{NETWORK}\"}}]",
            self.tenant.id
        )
    }

    /// The configuration of executor instance `name`: the double's account for the tenant
    /// (consistency window 2 s), the tenant's trust root, the node as its evidence (three
    /// confirmations), passes every 100 ms and 5 s leases.
    pub fn executor(
        &self,
        name: &str,
        listen: std::net::SocketAddr,
        database_url: String,
        evidence_url: &str,
    ) -> anyhow::Result<opledger_custodian_executor::Config> {
        use opledger_custodian_executor::Config;
        Ok(Config {
            base: opledger_config::ServiceBase {
                listen,
                metrics_listen: crate::service::loopback(0),
                database_url: opledger_config::DatabaseUrl(database_url),
                ..Config::default().base
            },
            executor_id: format!("faults-{name}"),
            accounts: vec![self.sim.account(&self.tenant, 2)?],
            trust_roots: vec![opledger_tests::signer::trust_root(self.tenant.id)],
            evidence: BTreeMap::from([(
                NETWORK.to_owned(),
                opledger_tests::chain::evidence(&[evidence_url], 1),
            )]),
            payout_assets: opledger_tests::custodian::payout_assets(),
            rpc_timeout_ms: 2_000,
            poll_interval_ms: 100,
            follow_every_secs: 1,
            lease_secs: 5,
            ..Config::default()
        })
    }
}

/// No faults.
fn quiet() -> Value {
    json!({"seed": 0, "rules": []})
}

/// The double's fault schedule of the batch, seeded by the harness's generator. Outcome rules
/// are exclusive (the first that fires wins); call rules apply per call.
fn schedule(seed: u64) -> Value {
    json!({"seed": seed, "rules": [
        {"kind": "drop_response", "rate": 0.08},
        {"kind": "error_after_accept", "status": 502, "rate": 0.08},
        {"kind": "rate_limit", "retry_after_secs": 1, "rate": 0.08},
        {"kind": "lookup_lag", "secs": 3, "rate": 0.1},
        {"kind": "status_lag", "secs": 2, "rate": 0.1},
        {"kind": "duplicate", "answer": "conflict", "rate": 0.5},
        {"kind": "reject", "rate": 0.06},
        {"kind": "reject", "blocked": true, "rate": 0.04},
        {"kind": "failed_with_hash", "variant": "mined", "rate": 0.05},
        {"kind": "replacement", "rate": 0.05},
    ]})
}

/// What the phase did and found.
#[derive(Debug, Default)]
pub struct CustodianTally {
    /// Withdrawal id -> (destination, amount in wei).
    pub ops: BTreeMap<String, (String, u128)>,
    /// Executor processes killed (failpoints and SIGKILLs).
    pub kills: u64,
    /// Faults the double applied (by its request log and its transfers' plans).
    pub sim_faults: u64,
    /// Sends beyond each withdrawal's first (always under the same reference).
    pub resends: u64,
    /// Withdrawals paid on chain, and released on the witness's attestation.
    pub confirmed: u64,
    /// Withdrawals released on a witnessed terminal record without a transaction.
    pub released: u64,
    /// Destinations paid more than once.
    pub double_payouts: u64,
    /// Releases without a witnessed terminal record without a transaction.
    pub releases_without_evidence: u64,
}

/// A custodian withdrawal of `amount` wei to `to`, created and approved through the cluster's
/// instances (each call retried on a transport error, with the same idempotency key).
async fn approved(c: &Cluster, amount: u128, to: &str) -> anyhow::Result<String> {
    let tenant = &c.custody.tenant;
    let request = crate::audit::create_request(&uuid::Uuid::new_v4().to_string(), amount, to);
    let w = retry(|| async {
        let mut ops = c.operations().await?;
        let created = ops
            .create_withdrawal(authed(&tenant.client, request.clone()))
            .await?
            .into_inner();
        created
            .withdrawal
            .ok_or_else(|| anyhow::anyhow!("no withdrawal"))
    })
    .await?;
    anyhow::ensure!(
        w.executor == pb::Executor::Custodian as i32,
        "not routed to the custodian"
    );
    retry(|| async {
        let mut approvals = c.approvals_at(None)?.1;
        let answer = approvals
            .approve_withdrawal(authed(
                &tenant.approver,
                opledger_tests::approval(tenant.id, &w, 0),
            ))
            .await;
        match answer {
            Ok(_) => Ok(()),
            // An earlier call that got no answer may have approved it.
            Err(status) => match states(c).await?.get(&w.withdrawal_id).map(String::as_str) {
                Some("REQUESTED") | None => Err(status.into()),
                Some(_) => Ok(()),
            },
        }
    })
    .await?;
    Ok(w.withdrawal_id)
}

async fn retry<T, F, Fut>(mut call: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut tries = 0;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(_) if tries < 50 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// A fresh destination: its balance is exactly what was paid to it.
fn destination(rng: &mut StdRng) -> String {
    format!("0x{}", hex::encode(rng.random::<[u8; 20]>()))
}

fn amount(rng: &mut StdRng) -> u128 {
    u128::from(rng.random_range(1_000_u32..1_000_000)) * 1_000_000_000
}

/// The custodian withdrawals' states, by id.
async fn states(c: &Cluster) -> anyhow::Result<BTreeMap<String, String>> {
    let rows: Vec<(uuid::Uuid, String)> =
        sqlx::query_as("SELECT op_id, state FROM withdrawal_ops WHERE tenant_id = $1")
            .bind(c.custody.tenant.id.as_uuid())
            .fetch_all(c.stack.admin.pool())
            .await?;
    Ok(rows
        .into_iter()
        .map(|(id, s)| (id.to_string(), s))
        .collect())
}

const ENDED: [&str; 3] = ["CONFIRMED", "VERIFIED_NOT_SENT", "FAILED_TERMINAL"];

/// Waits until every custodian withdrawal has ended; with `kills`, SIGKILLs that many executor
/// instances at random moments meanwhile (each restarted after up to 300 ms).
async fn converge(
    run: &mut CustodianTally,
    c: &mut Cluster,
    rng: &mut StdRng,
    mut kills: u64,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let states = states(c).await?;
        let open: Vec<&String> = states
            .values()
            .filter(|s| !ENDED.contains(&s.as_str()))
            .collect();
        if open.is_empty() && kills == 0 {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            let mut left: BTreeMap<&str, usize> = BTreeMap::new();
            for s in open {
                *left.entry(s.as_str()).or_default() += 1;
            }
            anyhow::bail!("custodian withdrawals not ended after {CONVERGE:?}: {left:?}");
        }
        if kills > 0 {
            let victim = instance("custodian", rng.random_range(0..instances()));
            c.kill(&victim);
            run.kills += 1;
            kills -= 1;
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
            c.heal(false).await?;
            tokio::time::sleep(Duration::from_millis(rng.random_range(500..2_000))).await;
        } else {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The phase: every step boundary of the executor killed, then [`BATCH`] withdrawals under the
/// double's seeded faults with executors killed at random; audited after each part.
pub async fn phase(
    tally: &mut Tally,
    run: &mut CustodianTally,
    c: &mut Cluster,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    for failpoint in FAILPOINTS {
        for i in 0..instances() {
            c.start_service(&instance("custodian", i), &format!("{failpoint}=abort"))
                .await?;
        }
        let (to, amount) = (destination(rng), amount(rng));
        let id = approved(c, amount, &to).await?;
        run.ops.insert(id, (to, amount));
        let before = tally.kills;
        crate::expect_death(tally, c, "custodian", failpoint).await?;
        run.kills += tally.kills - before;
        converge(run, c, rng, 0).await?;
        audit(tally, run, c, &format!("custodian@{failpoint}")).await?;
    }

    c.custody.sim.set_faults(&schedule(rng.random())).await?;
    for _ in 0..BATCH {
        let (to, amount) = (destination(rng), amount(rng));
        let id = approved(c, amount, &to).await?;
        run.ops.insert(id, (to, amount));
    }
    converge(run, c, rng, RANDOM_KILLS).await?;
    c.custody.sim.set_faults(&quiet()).await?;
    audit(tally, run, c, "custodian batch").await
}

/// Compares the custodian withdrawals with the chain, the ledger and the double's request log;
/// records every violation in `tally` (and the counts in `run`).
async fn audit(
    tally: &mut Tally,
    run: &mut CustodianTally,
    c: &Cluster,
    at: &str,
) -> anyhow::Result<()> {
    let pool = c.stack.admin.pool();
    let tenant = c.custody.tenant.id.as_uuid();
    let states = states(c).await?;
    let entries: Vec<(uuid::Uuid, i64, i64)> = sqlx::query_as(
        "SELECT op_id, count(*) FILTER (WHERE kind = 'SETTLE'), \
                count(*) FILTER (WHERE kind = 'RELEASE') \
         FROM ledger_entries WHERE tenant_id = $1 AND op_id IS NOT NULL GROUP BY op_id",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await?;
    let entries: BTreeMap<String, (i64, i64)> = entries
        .into_iter()
        .map(|(op, s, r)| (op.to_string(), (s, r)))
        .collect();
    // Released on a witnessed terminal record without a transaction, and no record of the
    // withdrawal ever naming one.
    let witnessed: BTreeSet<String> = sqlx::query_scalar::<_, uuid::Uuid>(
        "SELECT DISTINCT a.op_id FROM custodian_release_attestations a \
         JOIN custodian_records r USING (tenant_id, op_id, record_id) \
         WHERE a.tenant_id = $1 AND r.tx_hash IS NULL \
           AND NOT EXISTS (SELECT 1 FROM custodian_records n WHERE n.tenant_id = a.tenant_id \
                           AND n.op_id = a.op_id AND n.tx_hash IS NOT NULL)",
    )
    .bind(tenant)
    .fetch_all(pool)
    .await?
    .into_iter()
    .map(|id| id.to_string())
    .collect();
    let (confirmed, released) = (&mut 0_u64, &mut 0_u64);
    for (id, (to, amount)) in &run.ops {
        let state = states.get(id).map_or("MISSING", String::as_str);
        let (settles, releases) = entries.get(id).copied().unwrap_or((0, 0));
        let paid = c.node.balance(to).await?;
        let fine = match state {
            "CONFIRMED" => {
                *confirmed += 1;
                paid == *amount && (settles, releases) == (1, 0)
            }
            "VERIFIED_NOT_SENT" => {
                *released += 1;
                if !witnessed.contains(id) {
                    run.releases_without_evidence += 1;
                }
                paid == 0 && (settles, releases) == (0, 1) && witnessed.contains(id)
            }
            _ => false,
        };
        if paid > *amount {
            run.double_payouts += 1;
        }
        if !fine {
            tally.violations.push(format!(
                "{at}: custodian withdrawal {id} {state}: paid {paid} of {amount}, \
                 {settles} settlements, {releases} releases, witnessed {}",
                witnessed.contains(id)
            ));
        }
    }
    // Every transaction of the double's wallet is one confirmed withdrawal's.
    let sent = c
        .node
        .rpc("eth_getTransactionCount", json!([SIM_WALLET, "latest"]))
        .await?;
    let sent = u64::from_str_radix(sent.as_str().unwrap_or("0x0").trim_start_matches("0x"), 16)?;
    if sent != *confirmed {
        tally.violations.push(format!(
            "{at}: the custodian's wallet sent {sent} transactions for {confirmed} confirmed \
             withdrawals"
        ));
    }
    // Every request the double received named one of our withdrawals.
    let ours: BTreeSet<&str> = run.ops.keys().map(String::as_str).collect();
    let requests = c.custody.sim.requests().await?;
    let foreign = requests
        .iter()
        .filter(|r| r["method"] == "POST")
        .filter(|r| {
            !r["reference"]
                .as_str()
                .is_some_and(|reference| ours.contains(reference))
        })
        .count();
    if foreign > 0 {
        tally.violations.push(format!(
            "{at}: {foreign} requests under a reference not ours"
        ));
    }
    let labels = |v: &Value| v.as_array().map_or(0, Vec::len) as u64;
    let operations = c.custody.sim.get("operations").await?;
    run.sim_faults = requests.iter().map(|r| labels(&r["faults"])).sum::<u64>()
        + operations
            .as_array()
            .into_iter()
            .flatten()
            .map(|op| labels(&op["plan"]["applied"]))
            .sum::<u64>();
    let (resends,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM custodian_sends WHERE tenant_id = $1 AND send_no > 1")
            .bind(tenant)
            .fetch_one(pool)
            .await?;
    run.resends = u64::try_from(resends)?;
    (run.confirmed, run.released) = (*confirmed, *released);
    tally.audits += 1;
    Ok(())
}
