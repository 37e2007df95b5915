//! A highly available PostgreSQL per test: `scripts/ha.sh` (etcd, two Patroni nodes, a primary
//! and a synchronous standby in strict mode, HAProxy routing every connection to the leader)
//! under a folder of the repository's `.data/`, destroyed when the handle is dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::database::TestDatabase;

/// The repository root (this crate is `crates/testkit`).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// One member of the topology as Patroni reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaMember {
    /// `node0` or `node1`.
    pub name: String,
    /// `leader`, `sync_standby` or `replica`.
    pub role: String,
    /// `running`, `streaming`, `stopped`, `starting`...
    pub state: String,
}

/// A running HA topology. Every service reaches the current primary through [`HaCluster::url`]
/// (HAProxy); [`HaCluster::kill_primary`] and [`HaCluster::switchover`] fail it over.
#[derive(Debug)]
pub struct HaCluster {
    dir: PathBuf,
    url: String,
    script: PathBuf,
}

impl HaCluster {
    /// Starts a fresh topology (in test mode: fsync off, synchronous commit on) and waits until a
    /// write commits through the router. Installs the Debian packages it needs when missing
    /// (`ha.sh ensure-installed`; `scripts/test.sh` does it beforehand).
    pub async fn start() -> anyhow::Result<HaCluster> {
        let root = repo_root();
        let dir = root.join(".data").join(format!(
            "ha-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        std::fs::create_dir_all(root.join(".data")).context("creating .data")?;
        let mut cluster = HaCluster {
            dir,
            url: String::new(),
            script: root.join("scripts").join("ha.sh"),
        };
        let out = cluster
            .run(&["start"], &[("OPLEDGER_PG_FAST", "1")])
            .await?;
        cluster.url = last_line(&out)
            .filter(|line| line.starts_with("postgres://"))
            .context("ha.sh start printed no URL")?
            .to_owned();
        Ok(cluster)
    }

    /// The superuser URL of the `postgres` database through the router.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The topology's folder (logs: `node*/patroni.log`, `etcd/etcd.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A fresh database from the migrated template on this topology (the template and the test
    /// login roles are made on first use, as on the single cluster).
    pub async fn database(&self) -> anyhow::Result<TestDatabase> {
        TestDatabase::create_in(&self.url).await
    }

    /// SIGKILLs the leader's postmaster and returns the killed node's name at once (Patroni
    /// fails over to the synchronous standby by itself).
    pub async fn kill_primary(&self) -> anyhow::Result<String> {
        self.single(&["kill-primary"]).await
    }

    /// A planned switchover to the synchronous standby; returns once a write commits through
    /// the router, with the new leader's name.
    pub async fn switchover(&self) -> anyhow::Result<String> {
        self.single(&["switchover"]).await
    }

    /// The current leader's name.
    pub async fn leader(&self) -> anyhow::Result<String> {
        self.single(&["leader"]).await
    }

    /// Waits until a write commits through the router (a leader with a synchronous standby).
    pub async fn wait_writable(&self, timeout: Duration) -> anyhow::Result<()> {
        self.run(
            &["wait-writable", &timeout.as_secs().max(1).to_string()],
            &[],
        )
        .await
        .map(|_| ())
    }

    /// Every member, as Patroni reports it.
    pub async fn members(&self) -> anyhow::Result<Vec<HaMember>> {
        let out = self.run(&["status"], &[]).await?;
        Ok(out
            .lines()
            .filter_map(|line| {
                let mut parts = line.split_whitespace();
                Some(HaMember {
                    name: parts.next()?.to_owned(),
                    role: parts.next()?.to_owned(),
                    state: parts.next()?.to_owned(),
                })
            })
            .collect())
    }

    async fn single(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = self.run(args, &[]).await?;
        last_line(&out)
            .map(str::to_owned)
            .with_context(|| format!("ha.sh {} printed nothing", args.join(" ")))
    }

    async fn run(&self, args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<String> {
        let mut command = Command::new("bash");
        command
            .arg(&self.script)
            .arg(args[0])
            .arg(&self.dir)
            .args(&args[1..])
            .envs(env.iter().copied());
        let what = format!("ha.sh {}", args.join(" "));
        let output: Output = tokio::task::spawn_blocking(move || command.output())
            .await
            .context("joining ha.sh")?
            .with_context(|| format!("running {what}"))?;
        if !output.status.success() {
            bail!(
                "{what} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

fn last_line(out: &str) -> Option<&str> {
    out.lines().map(str::trim).rfind(|line| !line.is_empty())
}

impl Drop for HaCluster {
    fn drop(&mut self) {
        let destroyed = Command::new("bash")
            .arg(&self.script)
            .arg("destroy")
            .arg(&self.dir)
            .output();
        match destroyed {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "ha.sh destroy {} failed: {}",
                self.dir.display(),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("ha.sh destroy {} failed: {e}", self.dir.display()),
        }
    }
}
