//! The pipeline benchmark's printed report.

use crate::report::machine;
use std::time::Duration;

use super::options::{Args, TARGET_CPU_PER_1000, TARGET_P50_SECS, TARGET_PER_SEC, WARMUP};
use super::services;
use super::types::{Baseline, Bench, PhaseResult};

fn per_1000(seconds: Option<f64>, n: usize) -> String {
    seconds.map_or_else(
        || "n/a".to_owned(),
        |s| format!("{:.2}", s * 1000.0 / n as f64),
    )
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// Prints the report: the setup, one table row per phase, the node baseline, the targets, the
/// details of every phase (the warm-up's too), the method, duplicate work and what was verified.
pub(super) fn print(
    bench: &Bench,
    baseline: &Baseline,
    warm: &PhaseResult,
    rows: &[PhaseResult],
    total: Duration,
) {
    let args = &bench.args;
    print_setup(args);
    print_table(rows, baseline);
    println!(
        "node baseline: {} pre-signed native transfers (opledger-evm, one fresh wallet) sent with \
         eth_sendRawTransaction by {} concurrent submitters: {:.0} accepted/s; all mined {:.1} s \
         after the first was sent; anvil CPU {} s per 1000 (submission until mined)",
        baseline.sent,
        args.baseline_concurrency,
        baseline.per_sec,
        baseline.mined_after.as_secs_f64(),
        per_1000(baseline.node_cpu, baseline.sent)
    );
    print_targets(rows);
    for r in std::iter::once(warm).chain(rows) {
        print_progress(r);
        print_witness_and_logins(r);
    }
    println!(
        "method: confirmed/s = withdrawals CONFIRMED / (last CONFIRMED transition - first create \
         request sent); latency = the CONFIRMED transition's created_at (transition log) - the \
         time its create request was sent (same clock); CPU from /proc (utime+stime): services = \
         this whole process over the phase (the in-process services plus the benchmark's gRPC \
         clients and its 100 ms state polling, minus nothing), postgres = the cluster's \
         postmaster and children (live children's own time plus exited children's via the \
         postmaster's cutime+cstime), anvil = its process; ratio = confirmed/s / node raw tx/s"
    );
    print_duplicates(rows);
    let verified = rows.iter().all(|r| r.failures.is_empty());
    println!(
        "verified after each phase (SQL and chain): every withdrawal CONFIRMED, exactly one \
         tx_attempts row each, ledger invariants hold (check_invariants empty), each hot wallet's \
         on-chain nonce equals its withdrawals, no duplicate work{}: {}",
        if bench.args.no_send_counter {
            " (repeated sends not counted: --no-send-counter)"
        } else {
            ""
        },
        if verified { "OK" } else { "FAILED" }
    );
    for r in rows {
        for f in &r.failures {
            println!("  {}: {f}", r.label);
        }
    }
    println!("total run: {:.1} s", total.as_secs_f64());
}

/// The title, the machine and how the services, the node and the clients were set up.
fn print_setup(args: &Args) {
    println!(
        "opledger-bench pipeline: create -> approve -> sign -> broadcast -> CONFIRMED on anvil vs \
         the node's own eth_sendRawTransaction rate"
    );
    println!("machine: {}", machine());
    let offered = if args.rate > 0.0 {
        format!("paced at {} creates/s", args.rate)
    } else {
        "unpaced".to_owned()
    };
    let (witness_pool, witness_batch, witness_poll) = services::witness_defaults();
    println!(
        "setup: operations, approvals, signer, broadcaster worker and chain watcher, reconciler, \
         witness (the last four as 'instances' replicas, each on its own pools) in-process (gRPC \
         over loopback; each service as a login in its own service role; pools 32/16/8/8/8/{} of \
         which the signer's {}); reconciler with its defaults (polls every 1 s); witness with its \
         defaults (a pass of up to {} proposals every {} ms) on the reconciler's evidence \
         endpoints and quorum; broadcaster batch_size {}, watch_batch_size {}, concurrency {}, \
         polls 20 ms, 1 confirmation; anvil --block-time {}; PostgreSQL (fsync on) on this \
         machine; {} clients each creating then approving (default policy: 1 approver), \
         {offered}; native ETH to random destinations; warm-up of {WARMUP} withdrawals on its own \
         wallet, then ANALYZE before each phase",
        witness_pool,
        args.signer_connections,
        witness_batch,
        witness_poll,
        args.batch_size,
        args.watch_batch_size,
        args.concurrency,
        args.block_time,
        args.clients
    );
}

/// The table: one row per measured phase, against the node baseline.
fn print_table(rows: &[PhaseResult], baseline: &Baseline) {
    println!(
        "| phase | senders | instances | withdrawals | confirmed/s | p50 s | p99 s | duplicate work | services CPU s per 1000 | postgres CPU s per 1000 | anvil CPU s per 1000 | node raw tx/s | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.2} | {:.2} | {} | {} | {} | {} | {:.0} | {:.3} |",
            r.label,
            r.senders,
            r.instances,
            r.withdrawals,
            r.per_sec,
            r.p50.as_secs_f64(),
            r.p99.as_secs_f64(),
            r.duplicates.total(),
            per_1000(Some(r.used.services), r.withdrawals),
            per_1000(r.used.postgres, r.withdrawals),
            per_1000(r.used.node, r.withdrawals),
            baseline.per_sec,
            r.per_sec / baseline.per_sec
        );
    }
}

/// Each measured phase against the targets.
fn print_targets(rows: &[PhaseResult]) {
    for r in rows {
        let cpu = r.used.services * 1000.0 / r.withdrawals as f64;
        println!(
            "targets, {}: >= {TARGET_PER_SEC:.0} confirmed/s {} ({:.1}); p50 < {TARGET_P50_SECS:.0} s \
             with 1 confirmation {} ({:.2} s); <= {TARGET_CPU_PER_1000:.0} CPU s per 1000 in the \
             services {} ({cpu:.2})",
            r.label,
            verdict(r.per_sec >= TARGET_PER_SEC && r.failures.is_empty()),
            r.per_sec,
            verdict(r.p50.as_secs_f64() < TARGET_P50_SECS && r.failures.is_empty()),
            r.p50.as_secs_f64(),
            verdict(cpu <= TARGET_CPU_PER_1000 && r.failures.is_empty()),
        );
    }
}

/// How a phase progressed: when the clients were done, when the last withdrawal reached each
/// state, the median of each stage, the watcher's passes, the outcomes and failed client calls.
fn print_progress(r: &PhaseResult) {
    let stages: Vec<String> = r
        .stages
        .iter()
        .map(|(name, d)| format!("{name} {:.3}", d.as_secs_f64()))
        .collect();
    let reached: Vec<String> = r
        .reached
        .iter()
        .map(|(state, at)| format!("{state} {:.1}", at.max(0.0)))
        .collect();
    let count = |state: &str| r.states.get(state).copied().unwrap_or(0);
    let total: i64 = r.states.values().sum();
    println!(
        "{}: creates and approvals answered after {:.1} s, last confirmation after {:.1} s; \
         s after the first create when the last withdrawal was {}; median s per stage: {}; \
         watcher: {} passes on new heads, {:.0} ms mean, {:.0} ms \
         longest, {} confirmed, mean ms per pass {}; outcomes: CONFIRMED {}, UNKNOWN {}, other unconfirmed {}; \
         failed client calls {}{}",
        r.label,
        r.ingest_secs,
        r.span_secs,
        reached.join(", "),
        stages.join(", "),
        r.watch.passes,
        if r.watch.passes == 0 {
            0.0
        } else {
            r.watch.busy.as_secs_f64() * 1000.0 / r.watch.passes as f64
        },
        r.watch.longest.as_secs_f64() * 1000.0,
        r.watch.confirmed,
        {
            let per = |d: Duration| d.as_secs_f64() * 1000.0 / (r.watch.passes.max(1) as f64);
            let st = &r.watch.stages;
            format!(
                "(pin {:.0}, reorgs {:.0}, load {:.0}, read {:.0}, record {:.0})",
                per(st.pin),
                per(st.reorgs),
                per(st.load),
                per(st.read),
                per(st.record)
            )
        },
        count("CONFIRMED"),
        count("UNKNOWN"),
        total - count("CONFIRMED") - count("UNKNOWN"),
        r.client_errors,
        r.first_error
            .as_deref()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default()
    );
}

/// What a phase's witnesses did and PostgreSQL CPU per login.
fn print_witness_and_logins(r: &PhaseResult) {
    let w = &r.witness;
    println!(
        "{}: witness: passes {} ({:.1} ms mean), attested {}, no verdict {}, refused {}{}",
        r.label,
        w.passes,
        w.mean_ms(),
        w.attested,
        w.no_verdict,
        w.refused_total(),
        if w.refused.is_empty() {
            String::new()
        } else {
            format!(" ({:?})", w.refused)
        }
    );
    if !r.logins.is_empty() {
        let per_1000 = 1000.0 / (r.withdrawals.max(1) as f64);
        let logins: Vec<String> = r
            .logins
            .iter()
            .map(|(login, s)| format!("{login} {:.2}", s * per_1000))
            .collect();
        println!(
            "{}: postgres CPU s per 1000 by login (live client backends): {}",
            r.label,
            logins.join(", ")
        );
    }
}

/// The duplicate work of each measured phase and the transitions made by each instance.
fn print_duplicates(rows: &[PhaseResult]) {
    for r in rows {
        let d = &r.duplicates;
        let counted = |n: Option<u64>| n.map_or_else(|| "n/a".to_owned(), |n| n.to_string());
        let did: Vec<String> = r
            .per_instance
            .iter()
            .map(|(id, actor, n)| format!("{id} {actor} {n}"))
            .collect();
        println!(
            "{}: duplicate work: sends beyond the first {}, attempts never sent {}, attempts \
             beyond the first {}, submissions recorded beyond the first {}, confirmations beyond \
             the first {}, settlements beyond the first {}; transitions by instance: {}",
            r.label,
            counted(d.sends),
            counted(d.unsent),
            d.attempts,
            d.broadcasts,
            d.confirmations,
            d.settlements,
            did.join(", ")
        );
    }
}
