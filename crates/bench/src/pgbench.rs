//! The raw-SQL ceilings: the store's own statements, run by `pgbench` in the same transactions
//! the services execute ([`create_script`] here; the webhook benchmark builds its own).

use crate::report::{Summary, summarize};
use anyhow::Context;
use opledger_store::ledger::PLACE_HOLD_SQL;
use opledger_store::operations::{INSERT_OPERATION_SQL, LOOKUP_BY_KEY_SQL};
use std::path::Path;
use std::time::Duration;

/// Replaces `$N` placeholders with the given SQL expressions (index 0 is `$1`).
pub fn substitute(sql: &str, params: &[&str]) -> anyhow::Result<String> {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
            digits.push(d);
            chars.next();
        }
        let n: usize = digits.parse().context("a '$' without a parameter number")?;
        let expr = params
            .get(n - 1)
            .with_context(|| format!("no value for ${n}"))?;
        out.push_str(expr);
    }
    Ok(out)
}

/// The pgbench script of one create: the replay lookup, then BEGIN, the operation insert, the
/// hold, COMMIT: the same statements the store executes, with per-transaction random identities.
pub fn create_script(accounts: usize) -> anyhow::Result<String> {
    let op_id = "(lpad(to_hex(:r1::bigint), 16, '0') || lpad(to_hex(:r2::bigint), 16, '0'))::uuid";
    let key = "sha256(('k' || :r1::text || ':' || :r2::text)::bytea)";
    let hash = "sha256(('p' || :r1::text || ':' || :r2::text)::bytea)";
    let destination = "('0x' || lpad(to_hex(:r1::bigint), 40, '0'))";
    // Client i uses account i mod N, like the gRPC workers.
    let account = format!("('treasury-' || (:client_id % {accounts}))");
    let lookup = substitute(LOOKUP_BY_KEY_SQL, &[":tenant::uuid", key])?;
    let insert = substitute(
        INSERT_OPERATION_SQL,
        &[
            ":tenant::uuid",
            op_id,
            key,
            hash,
            "'REQUESTED'",
            &account,
            "'ETH'",
            "'anvil'",
            destination,
            "NULL::text",
            "'100'",
            "'1000000000000000'",
            "1",
            "86400",
            "'operations'",
            "'pgbench'",
            "'local_signer'",
        ],
    )?;
    let hold = substitute(
        PLACE_HOLD_SQL,
        &[":tenant::uuid", op_id, &account, "'100'", "'ETH'"],
    )?;
    Ok(format!(
        "\\set r1 random(1, 4000000000000000000)\n\\set r2 random(1, 4000000000000000000)\n\
         {lookup};\nBEGIN;\n{insert};\n{hold};\nCOMMIT;\n"
    ))
}

/// Runs the create script at `clients` for `duration` and summarizes the per-transaction log.
pub fn run(
    url: &str,
    tenant: &str,
    clients: usize,
    accounts: usize,
    duration: Duration,
    dir: &Path,
) -> anyhow::Result<Summary> {
    run_script(
        url,
        "create",
        &create_script(accounts)?,
        &[("tenant", tenant)],
        clients,
        duration,
        dir,
    )
}

/// Runs `script` (named `name` in `dir`) through `pgbench` with prepared statements, two threads,
/// `clients` connections for `duration` and the `-D` variables `defines`, and summarizes its
/// per-transaction log (failed and skipped transactions count as errors).
pub fn run_script(
    url: &str,
    name: &str,
    script: &str,
    defines: &[(&str, &str)],
    clients: usize,
    duration: Duration,
    dir: &Path,
) -> anyhow::Result<Summary> {
    let path = dir.join(format!("{name}.sql"));
    std::fs::write(&path, script)?;
    let log = format!("pgbench-{name}-c{clients}");
    let prefix = dir.join(&log);
    let mut command = std::process::Command::new("pgbench");
    command
        .args(["-n", "-M", "prepared", "-j", "2", "-l"])
        .arg(format!("--log-prefix={}", prefix.display()))
        .arg(format!("-c{clients}"))
        .arg(format!("-T{}", duration.as_secs()));
    for (var, value) in defines {
        command.arg(format!("-D{var}={value}"));
    }
    let status = command
        .arg("-f")
        .arg(&path)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .status()
        .context("pgbench did not start (is PostgreSQL's client installed?)")?;
    anyhow::ensure!(status.success(), "pgbench failed: {status}");
    let mut latencies = Vec::new();
    let mut errors = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        if !file.starts_with(&format!("{log}.")) {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            // client_id transaction_no time script_no time_epoch time_us
            match line.split_whitespace().nth(2) {
                Some("failed") | Some("skipped") => errors += 1,
                Some(us) => latencies.push(Duration::from_micros(us.parse().unwrap_or(0))),
                None => {}
            }
        }
        std::fs::remove_file(&path)?;
    }
    Ok(summarize(latencies, errors, duration))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_every_placeholder_including_two_digit_ones() {
        let out = substitute(
            "a=$1 b=$10 c=$2",
            &["x", "y", "", "", "", "", "", "", "", "z"],
        );
        assert_eq!(out.ok().as_deref(), Some("a=x b=z c=y"));
        assert!(substitute("$3", &["x"]).is_err());
    }

    #[test]
    fn the_script_has_no_unsubstituted_parameter() {
        let script = create_script(4).expect("script");
        assert!(!script.contains('$'), "{script}");
        assert!(script.contains("BEGIN;") && script.contains("COMMIT;"));
    }
}
