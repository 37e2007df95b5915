//! Duplicate work by the two instances of each worker, from the database and the node's side:
//! what the instances did twice that one should have done once.
//!
//! Under faults some repetition is the design (a restarted broadcaster submits the stored bytes
//! again, a lost answer is retried), so the soak's audits hold only what no fault excuses: the
//! ledger settles or releases an operation at most once net, every applied credit is one credit
//! entry, and two replacements of one operation are never made together (one worker waits
//! `bump_after_secs` or `cancel_after_secs` after the latest attempt, so two within
//! [`RACE_GAP_SECS`] are two instances that raced). The fault-free phase ([`Tally::audit_clean`])
//! holds every withdrawal to exactly one of everything, every submission included.

use crate::audit::{Sends, Tally};
use crate::cluster::Cluster;
use std::collections::BTreeMap;

/// Two attempts of one operation persisted closer than this were made by racing instances.
pub const RACE_GAP_SECS: f64 = 2.0;

/// One stored attempt: operation, attempt number, kind, raw bytes (hex), when persisted.
type AttemptRow = (uuid::Uuid, i32, String, String, f64);

async fn attempts(c: &Cluster) -> anyhow::Result<Vec<AttemptRow>> {
    Ok(sqlx::query_as(
        "SELECT op_id, attempt, kind, encode(raw_tx, 'hex'), \
           extract(epoch FROM created_at)::float8 \
         FROM tx_attempts WHERE tenant_id = $1 ORDER BY op_id, attempt",
    )
    .bind(c.acme.id.as_uuid())
    .fetch_all(c.stack.admin.pool())
    .await?)
}

/// Ledger entries of one operation by kind.
#[derive(Debug, Default, Clone, Copy)]
struct Entries {
    hold: i64,
    settle: i64,
    reopen: i64,
    release: i64,
}

async fn entries(c: &Cluster) -> anyhow::Result<BTreeMap<uuid::Uuid, Entries>> {
    let rows: Vec<(uuid::Uuid, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT op_id, count(*) FILTER (WHERE kind = 'HOLD'), \
           count(*) FILTER (WHERE kind = 'SETTLE'), count(*) FILTER (WHERE kind = 'REOPEN'), \
           count(*) FILTER (WHERE kind = 'RELEASE') \
         FROM ledger_entries WHERE tenant_id = $1 AND op_id IS NOT NULL GROUP BY op_id",
    )
    .bind(c.acme.id.as_uuid())
    .fetch_all(c.stack.admin.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(op, hold, settle, reopen, release)| {
            (
                op,
                Entries {
                    hold,
                    settle,
                    reopen,
                    release,
                },
            )
        })
        .collect())
}

/// Counts the submissions of every stored attempt (by its raw bytes).
fn sends(c: &Cluster, rows: &[AttemptRow]) -> (Sends, BTreeMap<String, u64>) {
    let sent = c.rpc_recorder.sent_transactions();
    let mut out = Sends::default();
    let mut by_raw = BTreeMap::new();
    for (_, _, _, raw, _) in rows {
        let n = sent.get(raw).copied().unwrap_or(0);
        out.attempts += 1;
        out.submitted += u64::from(n > 0);
        out.calls += n;
        out.repeated += n.saturating_sub(1);
        out.most = out.most.max(n);
        by_raw.insert(raw.clone(), n);
    }
    (out, by_raw)
}

impl Tally {
    /// What two instances of a worker must never have done twice, whatever the faults.
    pub async fn duplicate_work(&mut self, c: &Cluster, label: &str) -> anyhow::Result<()> {
        let rows = attempts(c).await?;
        for pair in rows.windows(2) {
            let [(op, a, kind_a, _, at_a), (next_op, b, kind_b, _, at_b)] = pair else {
                continue;
            };
            if op == next_op && at_b - at_a < RACE_GAP_SECS && self.races.insert((*op, *b)) {
                self.violations.push(format!(
                    "{label}: {op} attempts {a} ({kind_a}) and {b} ({kind_b}) persisted {:.3} s \
                     apart: two instances replaced it at once",
                    at_b - at_a
                ));
            }
        }
        for (op, e) in entries(c).await? {
            let settled = e.settle - e.reopen;
            if e.hold != 1
                || !(0..=1).contains(&settled)
                || e.release > 1
                || settled + e.release > 1
            {
                self.violations.push(format!(
                    "{label}: {op} ledger entries: {} holds, {} settlements, {} reopenings, {} \
                     releases",
                    e.hold, e.settle, e.reopen, e.release
                ));
            }
        }
        let (credit_entries, credits): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM ledger_entries WHERE tenant_id = $1 AND kind = 'CREDIT'), \
               (SELECT count(*) FROM ledger_credits WHERE tenant_id = $1)",
        )
        .bind(c.acme.id.as_uuid())
        .fetch_one(c.stack.admin.pool())
        .await?;
        if credit_entries != credits {
            self.violations.push(format!(
                "{label}: {credit_entries} credit entries for {credits} credits"
            ));
        }
        self.sends = sends(c, &rows).0;
        Ok(())
    }

    /// The fault-free phase: each of `ids` (approved, converged) has one original attempt, each of
    /// its attempts submitted exactly once, one SIGNED, BROADCAST and CONFIRMED transition each and
    /// one settlement.
    pub async fn audit_clean(
        &mut self,
        c: &Cluster,
        ids: &[String],
        label: &str,
    ) -> anyhow::Result<()> {
        let rows = attempts(c).await?;
        let (_, by_raw) = sends(c, &rows);
        let entries = entries(c).await?;
        let moves: Vec<(uuid::Uuid, i64, i64, i64)> = sqlx::query_as(
            "SELECT op_id, count(*) FILTER (WHERE to_state = 'SIGNED'), \
               count(*) FILTER (WHERE to_state = 'BROADCAST'), \
               count(*) FILTER (WHERE to_state = 'CONFIRMED') \
             FROM operation_transitions WHERE tenant_id = $1 GROUP BY op_id",
        )
        .bind(c.acme.id.as_uuid())
        .fetch_all(c.stack.admin.pool())
        .await?;
        let moves: BTreeMap<String, (i64, i64, i64)> = moves
            .into_iter()
            .map(|(op, s, b, f)| (op.to_string(), (s, b, f)))
            .collect();
        for id in ids {
            let mine: Vec<&AttemptRow> = rows.iter().filter(|r| r.0.to_string() == *id).collect();
            let sent: Vec<u64> = mine
                .iter()
                .map(|r| by_raw.get(&r.3).copied().unwrap_or(0))
                .collect();
            let e = uuid::Uuid::parse_str(id)
                .ok()
                .and_then(|op| entries.get(&op).copied())
                .unwrap_or_default();
            let m = moves.get(id).copied().unwrap_or_default();
            // A fee bump of a transfer still short of final depth after `bump_after_secs` is
            // one worker's doing (a slow machine's), not duplicate work: each attempt counts.
            let originals = mine.iter().filter(|r| r.2 == "ORIGINAL").count();
            if originals != 1
                || sent.iter().any(|n| *n != 1)
                || m != (1, 1, 1)
                || (e.settle, e.reopen) != (1, 0)
            {
                self.violations.push(format!(
                    "{label}: {id}: {} attempts submitted {sent:?} times; (SIGNED, BROADCAST, \
                     CONFIRMED) transitions {m:?}; {} settlements",
                    mine.len(),
                    e.settle
                ));
            }
        }
        Ok(())
    }
}

/// What each instance did: transitions by the instance that made them (signers, broadcasters and
/// their watchers, reconcilers, inbox processors name themselves), and client calls answered by
/// operations, approvals and inbox ingress instances.
pub async fn per_instance(c: &Cluster) -> anyhow::Result<BTreeMap<String, String>> {
    let rows: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT actor_id, actor, count(*) FROM operation_transitions \
         WHERE tenant_id = $1 AND actor_id LIKE 'faults-%' GROUP BY actor_id, actor \
         ORDER BY actor_id, actor",
    )
    .bind(c.acme.id.as_uuid())
    .fetch_all(c.stack.admin.pool())
    .await?;
    let mut counts: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (id, actor, n) in rows {
        // A signer names its claim after itself: `<instance_id>:<claim>`.
        let id = id.split(':').next().unwrap_or_default();
        let name = id.trim_start_matches("faults-").to_owned();
        *counts.entry(name).or_default().entry(actor).or_default() += n;
    }
    for (name, n) in c.answered() {
        counts
            .entry(name)
            .or_default()
            .insert("answered".to_owned(), i64::try_from(n).unwrap_or(i64::MAX));
    }
    let out = counts
        .into_iter()
        .map(|(name, by)| {
            let line: Vec<String> = by.iter().map(|(what, n)| format!("{what}={n}")).collect();
            (name, line.join(" "))
        })
        .collect();
    Ok(out)
}
