//! Control 9 (alerting): the Prometheus rules in `deploy/prometheus/alerts.yml` are valid and fire
//! on the reconciler's oldest-unresolved metric, checked with promtool (Debian's prometheus
//! package, installed by scripts/test.sh when missing).

use std::path::PathBuf;
use std::process::Command;

fn promtool() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("OPLEDGER_PROMTOOL") {
        return Ok(PathBuf::from(path));
    }
    let found = Command::new("sh")
        .args(["-c", "command -v promtool"])
        .output()?;
    anyhow::ensure!(
        found.status.success(),
        "promtool not found: run scripts/test.sh, which installs Debian's prometheus package"
    );
    Ok(PathBuf::from(String::from_utf8(found.stdout)?.trim()))
}

#[test]
fn control_09_alert_rules_fire_on_the_oldest_unresolved_metric() -> anyhow::Result<()> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus");
    let promtool = promtool()?;
    for args in [
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts.test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(&dir)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "promtool {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The rules read the metric names the reconciler serves.
    let rules = std::fs::read_to_string(dir.join("alerts.yml"))?;
    let served = opledger_store::metrics::Snapshot::default().to_prometheus();
    for name in [
        "opledger_oldest_unresolved_seconds{state=\"FAILED_TERMINAL\"}",
        "opledger_oldest_unresolved_seconds{state=\"UNKNOWN\"}",
    ] {
        assert!(rules.contains(name), "the rules use {name}");
        assert!(served.contains(name), "the reconciler serves {name}");
    }
    // The stalled-payout rule reads every waiting state's age.
    assert!(rules.contains("max by (state) (opledger_oldest_waiting_seconds) > 600"));
    for state in opledger_store::metrics::WAITING_STATES {
        let name = format!("opledger_oldest_waiting_seconds{{state=\"{state}\"}}");
        assert!(served.contains(&name), "the reconciler serves {name}");
    }
    Ok(())
}
