//! The sign benchmark's printed report.

use crate::report::{machine, ms};
use std::time::{Duration, Instant};

use super::options::{Args, BASELINE_THREADS, WARMUP};
use super::types::{Baselines, Row};

/// Prints the report: the setup, one table row per phase, the baselines and what was verified.
pub(super) fn print(
    args: &Args,
    pool_size: u32,
    prepared: Duration,
    rows: &[Row],
    baselines: &Baselines,
    started: Instant,
) {
    let (single, parallel) = (baselines.single, baselines.parallel);
    let per_signature = single.1.as_secs_f64() / single.0 as f64;
    let single_rate = single.0 as f64 / single.1.as_secs_f64();
    let parallel_rate = parallel.0 as f64 / parallel.1.as_secs_f64();
    println!(
        "opledger-bench sign: signatures persisted per second by the real signer vs evm::sign alone"
    );
    println!("machine: {}", machine());
    println!(
        "key backend: {}",
        match args.backend {
            super::options::Backend::Keystore => "keystore (keys in the signer's memory)",
            super::options::Backend::Pkcs11 =>
                "pkcs11 (keys generated in a SoftHSM2 token, one session and thread per wallet)",
        }
    );
    println!(
        "setup: opledger-signer in-process as a login role in opledger_signer, pool {pool_size} \
         connections; PostgreSQL (fsync on) on this machine; {} approved withdrawals per phase \
         (native ETH, random destinations), prepared in {:.1} s, then ANALYZE; {WARMUP} warm-up \
         signatures on their own wallet",
        args.withdrawals,
        prepared.as_secs_f64()
    );
    print_table(args, rows, per_signature, single_rate);
    println!(
        "baseline evm::sign, 1 thread: {} in {:.1} s, {single_rate:.0}/s, {:.1} µs per signature",
        single.0,
        single.1.as_secs_f64(),
        per_signature * 1e6
    );
    println!(
        "baseline evm::sign, {BASELINE_THREADS} threads: {} in {:.1} s, {parallel_rate:.0}/s, \
         {:.2}x the 1-thread rate",
        parallel.0,
        parallel.1.as_secs_f64(),
        parallel_rate / single_rate
    );
    println!(
        "method: signing share = signatures x the 1-thread baseline time per signature / the sum \
         of sign_withdrawal latencies; database share = 1 - signing share (round trips, commits, \
         waits for a pooled connection and for the sender's nonce row lock, other CPU); ratio = \
         signatures/s / the 1-thread baseline rate"
    );
    println!(
        "verified after each phase (SQL): one ORIGINAL tx_attempts row per withdrawal, nonces \
         0..n-1 per sender without gaps or duplicates and matching signer_nonces, every \
         operation SIGNED"
    );
    println!("total run: {:.1} s", started.elapsed().as_secs_f64());
}

/// The table: one row per measured phase.
fn print_table(args: &Args, rows: &[Row], per_signature: f64, single_rate: f64) {
    println!(
        "| phase | senders | workers | signatures | signatures/s | p50 ms | p99 ms | errors | signing share | database share | ratio to baseline |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (label, senders, m) in rows {
        let s = &m.summary;
        let signing = if m.busy.is_zero() {
            0.0
        } else {
            (s.count as f64 * per_signature / m.busy.as_secs_f64()).min(1.0)
        };
        println!(
            "| {label} | {senders} | {} | {} | {:.0} | {} | {} | {} | {:.1}% | {:.1}% | {:.3} |",
            args.workers,
            s.count,
            s.per_sec,
            ms(s.p50),
            ms(s.p99),
            s.errors,
            signing * 100.0,
            (1.0 - signing) * 100.0,
            s.per_sec / single_rate
        );
    }
}
