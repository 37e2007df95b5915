//! One phase of the pipeline benchmark: withdrawals driven through every service until they are
//! CONFIRMED (or the phase stalls or times out), then what it used, how long each withdrawal took
//! and what its checks found.

use crate::report::summarize;
use sqlx::PgPool;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

use super::client::drive;
use super::cpu;
use super::services::WatchTotals;
use super::types::{Bench, Driven, PhaseResult, Sender, Sent};
use super::witness::WitnessTotals;

/// The counters read when a phase starts, to take what it used.
struct Before {
    watch: WatchTotals,
    witness: WitnessTotals,
    cpu: cpu::Sample,
    logins: BTreeMap<String, f64>,
}

/// What a phase used: CPU by process and by login, the watchers' and the witnesses' passes.
struct Used {
    cpu: cpu::Used,
    logins: Vec<(String, f64)>,
    watch: WatchTotals,
    witness: WitnessTotals,
}

/// How the wait for a phase's outcome ended.
struct Waited {
    /// The phase's withdrawals by state when the wait ended.
    states: BTreeMap<String, i64>,
    /// What the clients did, when they finished in time.
    driven: Option<Driven>,
    /// Time from the start until the clients finished (zero when they did not).
    ingest: Duration,
    /// The clients, when they had not finished.
    driver: Option<JoinHandle<anyhow::Result<Driven>>>,
}

/// Throughput and latency of a phase, from the transition log and the clients' send times.
struct Timing {
    per_sec: f64,
    p50: Duration,
    p99: Duration,
    /// Seconds from the first create until the last confirmation.
    span: f64,
    stages: Vec<(&'static str, Duration)>,
    reached: Vec<(&'static str, f64)>,
}

impl Bench {
    /// Creates and approves `n` withdrawals over gRPC (round-robin over `senders`), waits until
    /// every one is CONFIRMED (or the phase stalls or times out), then measures and verifies.
    pub(super) async fn phase(
        &self,
        label: &str,
        senders: &[Sender],
        n: usize,
        instances: usize,
    ) -> anyhow::Result<PhaseResult> {
        let tenants: Vec<uuid::Uuid> = senders.iter().map(|s| s.tenant.as_uuid()).collect();
        self.services.run_instances(instances)?;
        // The new instances' first polls and passes, before the clock starts.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = self.before().await;
        let start = Instant::now();
        let driver = tokio::spawn(drive(
            self.clients.clone(),
            Arc::new(senders.to_vec()),
            n,
            self.args.clients,
            self.args.rate,
        ));
        let mut waited = self.wait(&tenants, n, driver, start).await?;
        let used = self.used_since(before).await;
        if let Some(handle) = waited.driver.take() {
            handle.abort();
        }
        let (sent, client_errors, first_error) = waited.driven.unwrap_or_default();

        // Latency: the CONFIRMED transition's time minus the create request's send time.
        let rows = transitions(&self.owner, &tenants).await?;
        let timing = timing(&rows, &sent);
        let checked = self
            .check(
                senders,
                n,
                &waited.states,
                &used.witness,
                client_errors,
                first_error.as_deref(),
            )
            .await?;
        Ok(PhaseResult {
            label: label.to_owned(),
            senders: senders.len(),
            instances,
            duplicates: checked.duplicates,
            per_instance: checked.per_instance,
            withdrawals: n,
            per_sec: timing.per_sec,
            p50: timing.p50,
            p99: timing.p99,
            used: used.cpu,
            logins: used.logins,
            ingest_secs: waited.ingest.as_secs_f64(),
            span_secs: timing.span,
            states: waited.states,
            stages: timing.stages,
            reached: timing.reached,
            watch: used.watch,
            witness: used.witness,
            client_errors,
            first_error,
            failures: checked.failures,
        })
    }

    /// The counters now, as a phase starts.
    async fn before(&self) -> Before {
        let watch = self.services.watch_totals();
        let witness = self.services.witness_totals();
        let cpu = self.meter.sample();
        let logins = cpu::by_login(&self.owner, self.meter.hz).await;
        Before {
            watch,
            witness,
            cpu,
            logins,
        }
    }

    /// What was used since `before`.
    async fn used_since(&self, before: Before) -> Used {
        let cpu = before.cpu.until(&self.meter.sample());
        let logins = cpu::login_use(
            &before.logins,
            &cpu::by_login(&self.owner, self.meter.hz).await,
        );
        let watch = before.watch.until(&self.services.watch_totals());
        let witness = before.witness.until(&self.services.witness_totals());
        Used {
            cpu,
            logins,
            watch,
            witness,
        }
    }

    /// Waits for the outcome, polling the states of the phase's operations: until the clients
    /// are done and all `n` are CONFIRMED, nothing moved for 20 s after the clients finished, or
    /// the phase timeout passed.
    async fn wait(
        &self,
        tenants: &[uuid::Uuid],
        n: usize,
        driver: JoinHandle<anyhow::Result<Driven>>,
        start: Instant,
    ) -> anyhow::Result<Waited> {
        let timeout = Duration::from_secs(self.args.phase_timeout);
        let mut driven = None;
        let mut driver = Some(driver);
        let mut ingest = Duration::ZERO;
        let (mut last, mut last_change) = (BTreeMap::new(), Instant::now());
        let states = loop {
            if let Some(handle) = driver.take_if(|h| h.is_finished()) {
                driven = Some(handle.await??);
                ingest = start.elapsed();
            }
            let states = states(&self.owner, tenants).await?;
            let confirmed = states.get("CONFIRMED").copied().unwrap_or(0);
            if driven.is_some() && usize::try_from(confirmed)? >= n {
                break states;
            }
            if states != last {
                last = states.clone();
                last_change = Instant::now();
            }
            let stalled = driven.is_some() && last_change.elapsed() > Duration::from_secs(20);
            if stalled || start.elapsed() > timeout {
                break states;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        Ok(Waited {
            states,
            driven,
            ingest,
            driver,
        })
    }
}

/// Latencies, throughput, the median of each stage and when the last withdrawal reached each
/// state, from the phase's transition log `rows` and the clients' send times `sent`.
fn timing(rows: &[Timeline], sent: &[Sent]) -> Timing {
    let sent_at: HashMap<uuid::Uuid, f64> = sent.iter().copied().collect();
    let first_sent = sent.iter().map(|s| s.1).fold(f64::INFINITY, f64::min);
    let mut latencies = Vec::new();
    let mut last_confirmed = f64::NEG_INFINITY;
    let mut stage = [(); 5].map(|()| Vec::new());
    let mut reached = [f64::NEG_INFINITY; 4];
    for row in rows {
        for (i, at) in [row.approved, row.signed, row.broadcast, row.confirmed]
            .into_iter()
            .enumerate()
        {
            if let Some(at) = at {
                reached[i] = reached[i].max(at - first_sent);
            }
        }
        if let (Some(&at), Some(confirmed)) = (sent_at.get(&row.op_id), row.confirmed) {
            latencies.push(secs(confirmed - at));
            last_confirmed = last_confirmed.max(confirmed);
        }
        let steps = [
            sent_at.get(&row.op_id).copied(),
            Some(row.created),
            row.approved,
            row.signed,
            row.broadcast,
            row.confirmed,
        ];
        for (i, pair) in steps.windows(2).enumerate() {
            if let [Some(a), Some(b)] = pair {
                stage[i].push(secs(b - a));
            }
        }
    }
    let span = (last_confirmed - first_sent).max(f64::MIN_POSITIVE);
    let summary = summarize(latencies, 0, Duration::from_secs_f64(span.max(1e-9)));
    let names = [
        "request -> created",
        "created -> approved",
        "approved -> signed",
        "signed -> broadcast",
        "broadcast -> confirmed",
    ];
    let stages = names
        .into_iter()
        .zip(stage)
        .map(|(name, durations)| (name, summarize(durations, 0, Duration::from_secs(1)).p50))
        .collect();
    Timing {
        per_sec: summary.per_sec,
        p50: summary.p50,
        p99: summary.p99,
        span,
        stages,
        reached: ["APPROVED", "SIGNED", "BROADCAST", "CONFIRMED"]
            .into_iter()
            .zip(reached)
            .collect(),
    }
}

/// Seconds as a duration (negative differences, from clock granularity, count as zero).
fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// Withdrawal counts by state for `tenants`.
async fn states(db: &PgPool, tenants: &[uuid::Uuid]) -> anyhow::Result<BTreeMap<String, i64>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT state, count(*) FROM withdrawal_ops WHERE tenant_id = ANY($1) GROUP BY state",
    )
    .bind(tenants)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// When one operation reached each state (Unix seconds, from the transition log).
#[derive(Debug)]
struct Timeline {
    op_id: uuid::Uuid,
    created: f64,
    approved: Option<f64>,
    signed: Option<f64>,
    broadcast: Option<f64>,
    confirmed: Option<f64>,
}

type TimelineRow = (
    uuid::Uuid,
    f64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
);

async fn transitions(db: &PgPool, tenants: &[uuid::Uuid]) -> anyhow::Result<Vec<Timeline>> {
    let rows: Vec<TimelineRow> = sqlx::query_as(
        "SELECT o.op_id, extract(epoch FROM o.created_at)::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'APPROVED'))::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'SIGNED'))::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'BROADCAST'))::float8, \
           extract(epoch FROM min(t.created_at) FILTER (WHERE t.to_state = 'CONFIRMED'))::float8 \
         FROM withdrawal_ops o JOIN operation_transitions t USING (tenant_id, op_id) \
         WHERE o.tenant_id = ANY($1) GROUP BY o.tenant_id, o.op_id, o.created_at",
    )
    .bind(tenants)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(
            |(op_id, created, approved, signed, broadcast, confirmed)| Timeline {
                op_id,
                created,
                approved,
                signed,
                broadcast,
                confirmed,
            },
        )
        .collect())
}
