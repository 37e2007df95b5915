//! The webhook benchmark's printed report.

use crate::report::{Summary, machine, ms};

use super::cpu::Used;
use super::load::Load;
use super::options::{Args, BODY_LEN, WARM_UP};

/// One concurrency's results.
#[derive(Debug)]
pub(super) struct Row {
    pub(super) c: usize,
    pub(super) pool: usize,
    /// Mean deliveries per commit of the service during the measured phase.
    pub(super) per_commit: f64,
    pub(super) http: Load,
    pub(super) used: Used,
    /// Work items the processor finished during the measured phase.
    pub(super) applied: i64,
    /// Work items still pending when the phase ended.
    pub(super) backlog: i64,
    pub(super) app_rows: i64,
    pub(super) ceiling: Summary,
    pub(super) pg_used: Used,
    pub(super) pg_rows: i64,
}

/// Prints the report: the setup, the throughput table, CPU per 1,000, each concurrency's
/// details, what was verified and how to reproduce the run.
pub(super) fn print(args: &Args, rows: &[Row]) {
    let concurrency: Vec<String> = args.concurrency.iter().map(usize::to_string).collect();
    println!(
        "opledger-bench webhook: signed deposit.confirmed deliveries over HTTP/1.1 to opledger-inbox \
         vs the same transaction through pgbench"
    );
    println!("machine: {}", machine());
    println!(
        "phase: {} s each after a {} s warm-up; one HMAC endpoint, {BODY_LEN}-byte bodies signed \
         (Standard Webhooks v1) per request, a new event id each; keep-alive connections, one \
         request in flight on each; inbox, PostgreSQL (fsync on), pgbench and the HTTP clients on \
         this machine over loopback",
        args.seconds,
        WARM_UP.as_secs()
    );
    if args.processors == 0 {
        println!(
            "the inbox runs as an ingress-only instance (processors = 0: the work items wait for \
             a processor instance); the service is stopped while pgbench runs"
        );
    } else {
        println!(
            "the inbox runs all-in-one: its processor ({} workers) applies the accepted deposits \
             concurrently; the service is stopped while pgbench runs",
            args.processors
        );
    }
    print_throughput(rows);
    print_cpu(rows);
    for r in rows {
        println!(
            "concurrency {}: service pool {} connections; {:.1} deliveries per commit (group \
             commit; pgbench: 1); processor applied {} items during the measured phase ({:.0}/s), \
             {} pending when it ended",
            r.c,
            r.pool,
            r.per_commit,
            r.applied,
            r.applied as f64 / args.seconds as f64,
            r.backlog
        );
        for (kind, n) in &r.http.errors {
            println!("concurrency {}: {n} failed: {kind}", r.c);
        }
    }
    let last = rows.last();
    println!(
        "verified in SQL after each phase: inbox rows = accepted deliveries (warm-up included; \
         {} in all), pgbench rows = its transactions ({} in all), one work item per row",
        last.map_or(0, |r| r.app_rows),
        last.map_or(0, |r| r.pg_rows)
    );
    println!(
        "reproduce: bash scripts/bench.sh webhook --seconds {} --concurrency {} --processors {}",
        args.seconds,
        concurrency.join(","),
        args.processors
    );
}

/// The throughput table: the service against pgbench at each concurrency.
fn print_throughput(rows: &[Row]) {
    println!(
        "| concurrency | webhooks | webhooks/s | p50 ms | p99 ms | errors | pgbench tx | pgbench tx/s | pgbench avg ms | pgbench p50 ms | pgbench p99 ms | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let (s, p) = (&r.http.summary, &r.ceiling);
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {:.2} |",
            r.c,
            s.count,
            s.per_sec,
            ms(s.p50),
            ms(s.p99),
            s.errors,
            p.count,
            p.per_sec,
            ms(p.mean),
            ms(p.p50),
            ms(p.p99),
            s.per_sec / p.per_sec
        );
    }
}

/// CPU seconds per 1,000 by process, for the service's phase and for pgbench's.
fn print_cpu(rows: &[Row]) {
    println!(
        "CPU seconds per 1,000 (machine: {} cores):",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "| concurrency | webhooks: HTTP clients | inbox | PostgreSQL | pgbench tx: pgbench | PostgreSQL |"
    );
    println!("|---|---|---|---|---|---|");
    for r in rows {
        let per_k = |secs: Option<f64>, n: usize| match secs {
            Some(s) if n > 0 => format!("{:.2}", s * 1000.0 / n as f64),
            _ => "n/a".to_owned(),
        };
        let (n, m) = (r.http.summary.count, r.ceiling.count);
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.c,
            per_k(Some(r.used.bench), n),
            per_k(r.used.inbox, n),
            per_k(r.used.postgres, n),
            per_k(Some(r.pg_used.children), m),
            per_k(r.pg_used.postgres, m),
        );
    }
}
