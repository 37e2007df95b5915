//! A robust start: the default ports lie outside the kernel's ephemeral range (a client socket
//! of the stack itself can never hold one), and a service binds every listener before it opens
//! any outbound connection, failing at once with the address named when a port is taken.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

/// The kernel's ephemeral port range (Linux's default when it cannot be read).
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut parts = text.split_whitespace().map(str::parse::<u16>);
            Some((parts.next()?.ok()?, parts.next()?.ok()?))
        })
        .unwrap_or((32768, 60999))
}

#[test]
fn every_default_listen_port_lies_outside_the_ephemeral_range() {
    let (low, high) = ephemeral_range();
    let defaults: Vec<(&str, SocketAddr)> = vec![
        (
            "operations listen",
            opledger_operations::Config::default().base.listen,
        ),
        (
            "operations metrics",
            opledger_operations::Config::default().base.metrics_listen,
        ),
        (
            "approvals listen",
            opledger_approvals::Config::default().base.listen,
        ),
        (
            "approvals metrics",
            opledger_approvals::Config::default().base.metrics_listen,
        ),
        (
            "signer listen",
            opledger_signer::Config::default().base.listen,
        ),
        (
            "signer metrics",
            opledger_signer::Config::default().base.metrics_listen,
        ),
        (
            "broadcaster listen",
            opledger_broadcaster::Config::default().base.listen,
        ),
        (
            "broadcaster metrics",
            opledger_broadcaster::Config::default().base.metrics_listen,
        ),
        (
            "reconciler listen",
            opledger_reconciler::Config::default().base.listen,
        ),
        (
            "reconciler metrics",
            opledger_reconciler::Config::default().base.metrics_listen,
        ),
        (
            "witness listen",
            opledger_witness::Config::default().base.listen,
        ),
        (
            "witness metrics",
            opledger_witness::Config::default().base.metrics_listen,
        ),
        (
            "custodian executor listen",
            opledger_custodian_executor::Config::default().base.listen,
        ),
        (
            "custodian executor metrics",
            opledger_custodian_executor::Config::default()
                .base
                .metrics_listen,
        ),
        (
            "inbox listen",
            opledger_inbox::Config::default().base.listen,
        ),
        (
            "inbox webhooks",
            opledger_inbox::Config::default().http_listen,
        ),
        (
            "inbox metrics",
            opledger_inbox::Config::default().base.metrics_listen,
        ),
    ];
    for (name, addr) in &defaults {
        assert!(
            addr.port() < low || addr.port() > high,
            "{name} {addr} lies inside the ephemeral range {low}-{high}"
        );
    }
    // The dev stack uses the same ports.
    let dev = std::fs::read_to_string(super::repo("scripts/dev.sh")).unwrap_or_default();
    for (name, addr) in defaults.iter().filter(|(n, _)| n.ends_with("listen")) {
        assert!(
            dev.contains(&addr.to_string()),
            "scripts/dev.sh does not use the default {name} {addr}"
        );
    }
}

/// A loopback port held by this test, and whether anything ever connected to a second one that
/// stands in for the database.
pub(super) struct Taken {
    taken: std::net::TcpListener,
    database: std::net::TcpListener,
}

impl Taken {
    pub(super) fn new() -> anyhow::Result<Taken> {
        let database = std::net::TcpListener::bind("127.0.0.1:0")?;
        database.set_nonblocking(true)?;
        Ok(Taken {
            taken: std::net::TcpListener::bind("127.0.0.1:0")?,
            database,
        })
    }

    fn taken(&self) -> anyhow::Result<SocketAddr> {
        Ok(self.taken.local_addr()?)
    }

    pub(super) fn database_url(&self) -> anyhow::Result<String> {
        let port = self.database.local_addr()?.port();
        Ok(format!("postgres://nobody:x@127.0.0.1:{port}/opledger"))
    }

    pub(super) fn database_was_contacted(&self) -> bool {
        self.database.accept().is_ok()
    }
}

/// Runs `bin` with `env` and returns its exit success and stderr plus stdout (logs are JSON on
/// stdout), killing it if it has not ended after 20 s.
pub(super) fn run(bin: &str, env: &[(&str, String)]) -> anyhow::Result<(bool, String)> {
    let mut child = Command::new(opledger_testkit::binary_path(bin)?)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let started = std::time::Instant::now();
    while child.try_wait()?.is_none() {
        if started.elapsed() > Duration::from_secs(20) {
            child.kill()?;
            anyhow::bail!("{bin} did not fail its start within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    Ok((output.status.success(), text))
}

#[test]
fn a_taken_port_fails_the_start_naming_the_address_before_any_database_connection()
-> anyhow::Result<()> {
    for (bin, prefix, port_key) in [
        ("opledger-operations", "OPLEDGER_OPERATIONS_", "LISTEN"),
        (
            "opledger-operations",
            "OPLEDGER_OPERATIONS_",
            "METRICS_LISTEN",
        ),
        ("opledger-approvals", "OPLEDGER_APPROVALS_", "LISTEN"),
        ("opledger-inbox", "OPLEDGER_INBOX_", "LISTEN"),
        ("opledger-inbox", "OPLEDGER_INBOX_", "HTTP_LISTEN"),
        ("opledger-inbox", "OPLEDGER_INBOX_", "METRICS_LISTEN"),
    ] {
        let held = Taken::new()?;
        let taken = held.taken()?;
        let mut env = vec![(format!("{prefix}DATABASE_URL"), held.database_url()?)];
        for key in ["LISTEN", "METRICS_LISTEN", "HTTP_LISTEN"] {
            if bin != "opledger-inbox" && key == "HTTP_LISTEN" {
                continue;
            }
            let addr = if key == port_key {
                taken.to_string()
            } else {
                "127.0.0.1:0".to_owned()
            };
            env.push((format!("{prefix}{key}"), addr));
        }
        if bin == "opledger-inbox" {
            env.push((
                "OPLEDGER_INBOX_BODY_KEYS".to_owned(),
                opledger_tests::inbox::body_keys(),
            ));
        }
        let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let (ok, text) = run(bin, &env)?;
        assert!(!ok, "{bin} started with {port_key} taken");
        assert!(
            text.contains(&format!("cannot listen on {taken}")),
            "{bin} {port_key}: the error does not name {taken}: {text}"
        );
        assert!(
            !held.database_was_contacted(),
            "{bin} connected to the database before binding {port_key}"
        );
    }
    Ok(())
}
