//! Latency summaries and the machine description printed with every result.

use std::time::Duration;

/// Throughput and latency of one measured phase.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Completed operations per second.
    pub per_sec: f64,
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Mean latency.
    pub mean: Duration,
    /// How many operations completed.
    pub count: usize,
    /// How many failed.
    pub errors: usize,
}

/// Summarizes latencies collected over `elapsed`.
pub fn summarize(mut latencies: Vec<Duration>, errors: usize, elapsed: Duration) -> Summary {
    latencies.sort_unstable();
    let pick = |q: f64| {
        if latencies.is_empty() {
            return Duration::ZERO;
        }
        let index = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies[index.min(latencies.len() - 1)]
    };
    let total: Duration = latencies.iter().sum();
    let mean = u32::try_from(latencies.len())
        .ok()
        .filter(|&n| n > 0)
        .map_or(Duration::ZERO, |n| total / n);
    Summary {
        per_sec: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: pick(0.50),
        p99: pick(0.99),
        mean,
        count: latencies.len(),
        errors,
    }
}

/// CPU model, cores and memory of this machine, from /proc.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown cpu".to_owned());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| {
            r.split_whitespace()
                .next()
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    format!("{model}, {cores} cores, {mem_gib:.0} GiB")
}

/// Milliseconds with two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}
