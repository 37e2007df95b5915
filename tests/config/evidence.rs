//! Per-network minimum confirmations: a depth below a network's `min_confirmations` (12 unless
//! set) fails the start of every chain-facing service, naming the key and the ways out; only an
//! explicit `allow_shallow_finality = true` (development) starts it, and then with a warning
//! naming the network and the depth. `finalized = true` starts without one.

use super::start::{Taken, run};
use opledger_config::ConfigError;
use opledger_testkit::{ServiceRole, TestDatabase};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

/// The refusal every chain-facing service prints for a shallow depth.
const SHALLOW: &str = "configuration: evidence.confirmations is below min_confirmations (12 \
                       unless set): raise confirmations, use finalized = true, or set \
                       allow_shallow_finality = true (development only)";

/// A scratch directory for this test's files.
fn dir(test: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("opledger-config-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The chain-facing services: binary, environment prefix, and the keys each needs besides its
/// `[evidence.anvil]` table (which must come last in the file).
const SERVICES: [(&str, &str, &str); 4] = [
    (
        "opledger-broadcaster",
        "OPLEDGER_BROADCASTER_",
        "signer_token = \"t\"\n[rpc]\nanvil = \"http://127.0.0.1:8545\"\n",
    ),
    (
        "opledger-reconciler",
        "OPLEDGER_RECONCILER_",
        "signer_token = \"t\"\n[rpc]\nanvil = \"http://127.0.0.1:8545\"\n",
    ),
    ("opledger-witness", "OPLEDGER_WITNESS_", ""),
    ("opledger-custodian-executor", "OPLEDGER_CUSTODIAN_", ""),
];

/// The configuration file of `service` with `evidence` as its `[evidence.anvil]` keys.
fn file(database_url: &str, service: &str, evidence: &str) -> String {
    format!(
        "database_url = \"{database_url}\"\nlisten = \"127.0.0.1:0\"\n\
         metrics_listen = \"127.0.0.1:0\"\n{service}[evidence.anvil]\n\
         urls = [\"http://127.0.0.1:8545\"]\nchain_id = 31337\nquorum = 1\n{evidence}"
    )
}

/// Loads the file at `path` as the configuration of `bin` with its typed loader.
fn load(bin: &str, path: &std::path::Path) -> Result<(), ConfigError> {
    match bin {
        "opledger-broadcaster" => opledger_broadcaster::Config::load(Some(path)).map(drop),
        "opledger-reconciler" => opledger_reconciler::Config::load(Some(path)).map(drop),
        "opledger-custodian-executor" => {
            opledger_custodian_executor::Config::load(Some(path)).map(drop)
        }
        _ => opledger_witness::Config::load(Some(path)).map(drop),
    }
}

/// The adversary is a configuration mistake, or an operator in a hurry: `confirmations = 1` (or
/// any depth below the network's floor) on a real network, where a reorganization one block
/// deeper undoes a settlement or a release after the fact (paid twice). No chain-facing service
/// starts on it, and none contacts its database first.
#[test]
fn a_shallow_depth_refuses_the_start_of_every_chain_facing_service() -> anyhow::Result<()> {
    let dir = dir("shallow")?;
    for (bin, prefix, keys) in SERVICES {
        for (evidence, field, message) in [
            ("confirmations = 1\n", "evidence.confirmations", SHALLOW),
            ("confirmations = 11\n", "evidence.confirmations", SHALLOW),
            // A network's own floor: raised for one whose reorganizations run deeper.
            (
                "confirmations = 32\nmin_confirmations = 64\n",
                "evidence.confirmations",
                SHALLOW,
            ),
            // A floor of zero would refuse nothing.
            (
                "confirmations = 12\nmin_confirmations = 0\n",
                "evidence.min_confirmations",
                "configuration: evidence.min_confirmations must be at least 1",
            ),
            // The opt-in never lets zero confirmations through.
            (
                "confirmations = 0\nallow_shallow_finality = true\n",
                "evidence.confirmations",
                "configuration: evidence.confirmations must be at least 1",
            ),
        ] {
            let held = Taken::new()?;
            let path = dir.join(format!("{bin}.toml"));
            std::fs::write(&path, file(&held.database_url()?, keys, evidence))?;
            let loaded = load(bin, &path);
            assert!(
                matches!(loaded, Err(ConfigError::Invalid { field: f, .. }) if f == field),
                "{bin} {evidence:?}: {loaded:?}"
            );
            let (ok, text) = run(
                bin,
                &[(&format!("{prefix}CONFIG"), path.display().to_string())],
            )?;
            assert!(!ok, "{bin} started with {evidence:?}");
            assert!(text.contains(message), "{bin} {evidence:?}: {text}");
            assert!(
                !held.database_was_contacted(),
                "{bin} connected to the database with {evidence:?}"
            );
        }
        // At the floor, by the explicit opt-in, or under the protocol's finality: loaded.
        for evidence in [
            "confirmations = 12\n",
            "confirmations = 3\nmin_confirmations = 3\n",
            "confirmations = 2\nallow_shallow_finality = true\n",
            "finalized = true\nmin_confirmations = 1000\n",
        ] {
            let path = dir.join(format!("{bin}.toml"));
            std::fs::write(&path, file("postgres://u:p@127.0.0.1:1/db", keys, evidence))?;
            let loaded = load(bin, &path);
            assert!(loaded.is_ok(), "{bin} {evidence:?}: {loaded:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A custodian account on the `anvil` network (its credential files are read at start, not at
/// load).
const ACCOUNT: &str = "[[accounts]]\nname = \"fireblocks-main\"\n\
    tenant = \"00000000-0000-4000-8000-000000000001\"\nnetwork = \"anvil\"\nasset = \"ETH\"\n\
    [accounts.provider]\nprofile = \"lookup_by_reference\"\n\
    base_url = \"https://custodian.example\"\napi_key_file = \"/run/secrets/api_key\"\n\
    api_secret_file = \"/run/secrets/api_secret\"\nvault_account_id = \"0\"\n\
    asset_id = \"ETH\"\ndecimals = 18\ntimeout_secs = 10\nconsistency_window_secs = 60\n";

/// The adversary is a configuration mistake that would let the custodian's word settle a
/// withdrawal alone: an account on a network the executor has no evidence endpoints for. The
/// executor refuses it unless the network is named in `unwatched_networks` (an explicit choice),
/// and refuses a network named both watched and unwatched.
#[test]
fn a_custodian_network_without_evidence_must_be_named_unwatched() -> anyhow::Result<()> {
    let dir = dir("unwatched")?;
    let path = dir.join("custodian.toml");
    let base = "database_url = \"postgres://u:p@127.0.0.1:1/db\"\n";
    let evidence = "[evidence.anvil]\nurls = [\"http://127.0.0.1:8545\"]\nchain_id = 31337\nquorum = 1\n\
                    confirmations = 12\n";
    let assets = "[payout_assets.anvil]\nnative = \"ETH\"\n\
                  senders = [\"0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f\"]\n";
    for (keys, refused) in [
        (format!("{base}{ACCOUNT}"), Some("accounts")),
        (
            format!("{base}unwatched_networks = [\"anvil\"]\n{ACCOUNT}{evidence}"),
            Some("unwatched_networks"),
        ),
        (
            format!("{base}unwatched_networks = [\"anvil\"]\n{ACCOUNT}"),
            None,
        ),
        // A watched network's payouts: its coin and the addresses they are sent from.
        (format!("{base}{ACCOUNT}{evidence}"), Some("payout_assets")),
        (format!("{base}{ACCOUNT}{evidence}{assets}"), None),
    ] {
        std::fs::write(&path, &keys)?;
        let loaded = opledger_custodian_executor::Config::load(Some(&path));
        match refused {
            Some(field) => assert!(
                matches!(loaded, Err(ConfigError::Invalid { field: f, .. }) if f == field),
                "{keys}: {loaded:?}"
            ),
            None => assert!(loaded.is_ok(), "{keys}: {loaded:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Starts the witness binary on a fresh database with `evidence` (an inline table, the form the
/// compose and kustomize files use) and returns its log lines up to its first `listening` line:
/// everything its start logged.
async fn witness_start_logs(evidence: &str) -> anyhow::Result<Vec<Value>> {
    let db = TestDatabase::create().await?;
    let mut child =
        tokio::process::Command::new(opledger_testkit::binary_path("opledger-witness")?)
            .env(
                "OPLEDGER_WITNESS_DATABASE_URL",
                db.url_as(ServiceRole::Witness),
            )
            .env("OPLEDGER_WITNESS_LISTEN", "127.0.0.1:0")
            .env("OPLEDGER_WITNESS_METRICS_LISTEN", "127.0.0.1:0")
            .env("OPLEDGER_WITNESS_EVIDENCE", evidence)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut logged = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await? {
            let Ok(entry) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let listening = entry["fields"]["message"] == "listening";
            logged.push(entry);
            if listening {
                return Ok(true);
            }
        }
        anyhow::Ok(false)
    };
    let listening = tokio::time::timeout(Duration::from_secs(20), read).await;
    child.kill().await?;
    let output = child.wait_with_output().await?;
    anyhow::ensure!(
        matches!(listening, Ok(Ok(true))),
        "the witness did not start: {listening:?} {logged:?} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(logged)
}

/// The lines `logged` by the evidence settings.
fn settings_warnings(logged: &[Value]) -> Vec<&Value> {
    logged
        .iter()
        .filter(|e| e["target"] == "opledger_chain::evidence::settings")
        .collect()
}

#[tokio::test]
async fn the_development_opt_in_starts_with_a_warning_naming_the_network_and_the_depth()
-> anyhow::Result<()> {
    let logged = witness_start_logs(
        "{anvil={urls=[\"http://127.0.0.1:8545\",\"http://127.0.0.2:8545\"],chain_id=31337,quorum=2,\
         confirmations=2,allow_shallow_finality=true}}",
    )
    .await?;
    let warnings = settings_warnings(&logged);
    assert_eq!(warnings.len(), 1, "{logged:?}");
    let warning = warnings[0];
    assert_eq!(warning["level"], "WARN", "{warning}");
    let fields = &warning["fields"];
    assert!(
        fields["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("finality shallower than min_confirmations")),
        "{warning}"
    );
    assert_eq!(
        (
            &fields["network"],
            &fields["confirmations"],
            &fields["min_confirmations"]
        ),
        (&Value::from("anvil"), &Value::from(2), &Value::from(12)),
        "{warning}"
    );
    Ok(())
}

#[tokio::test]
async fn the_protocols_finality_starts_without_a_warning() -> anyhow::Result<()> {
    let logged = witness_start_logs(
        "{anvil={urls=[\"http://127.0.0.1:8545\",\"http://127.0.0.2:8545\"],chain_id=31337,quorum=2,\
         finalized=true}}",
    )
    .await?;
    assert!(
        logged.iter().any(|e| e["fields"]["message"] == "listening"),
        "{logged:?}"
    );
    assert_eq!(settings_warnings(&logged), Vec::<&Value>::new());
    Ok(())
}
