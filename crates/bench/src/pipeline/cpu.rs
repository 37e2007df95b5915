//! CPU time of processes, read from /proc: this process, the PostgreSQL cluster and anvil.

use std::collections::BTreeMap;
use std::path::Path;

/// Clock ticks per second of /proc/<pid>/stat times (`getconf CLK_TCK`; 100 when unknown).
pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|&hz| hz > 0.0)
        .unwrap_or(100.0)
}

/// Times of one process, in clock ticks.
#[derive(Debug, Clone, Copy)]
struct Stat {
    ppid: u32,
    /// utime + stime: the process's own CPU (all its threads).
    own: u64,
    /// cutime + cstime: CPU of its children that exited and were waited for.
    children: u64,
}

fn stat(dir: &Path) -> Option<Stat> {
    let text = std::fs::read_to_string(dir.join("stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: fields after the last
    // ')' start with field 3 (state).
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        ppid: u32::try_from(field(4)?).ok()?,
        own: field(14)? + field(15)?,
        children: field(16)? + field(17)?,
    })
}

/// CPU seconds this process has used (all threads: the in-process services, the benchmark's
/// clients and its polling).
pub fn own_seconds(hz: f64) -> f64 {
    stat(Path::new("/proc/self")).map_or(0.0, |s| s.own as f64 / hz)
}

/// CPU seconds process `pid` has used, or `None` when it is not visible in /proc.
pub fn process_seconds(pid: u32, hz: f64) -> Option<f64> {
    stat(&Path::new("/proc").join(pid.to_string())).map(|s| s.own as f64 / hz)
}

/// CPU seconds of a PostgreSQL cluster: the postmaster's own and its exited children's time
/// (backends that ended), plus the own time of every live child (backends, checkpointer, WAL
/// writer, autovacuum, ...). `None` when the postmaster is not visible in /proc.
pub fn cluster_seconds(postmaster: u32, hz: f64) -> Option<f64> {
    let root = stat(&Path::new("/proc").join(postmaster.to_string()))?;
    let mut ticks = root.own + root.children;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if pid == postmaster {
            continue;
        }
        if let Some(s) = stat(&entry.path())
            && s.ppid == postmaster
        {
            ticks += s.own + s.children;
        }
    }
    Some(ticks as f64 / hz)
}

/// The postmaster of the cluster `db` is connected to (the parent of one of its backends), when
/// that cluster runs on this machine.
pub async fn postmaster_pid(db: &sqlx::PgPool) -> Option<u32> {
    let (backend,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
        .fetch_one(db)
        .await
        .ok()?;
    let backend = u32::try_from(backend).ok()?;
    let parent = stat(&Path::new("/proc").join(backend.to_string()))?.ppid;
    (parent > 1).then_some(parent)
}

/// CPU seconds of this process, the cluster and the node at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// This process.
    pub services: f64,
    /// The PostgreSQL cluster, when visible.
    pub postgres: Option<f64>,
    /// The anvil node, when visible.
    pub node: Option<f64>,
}

/// Where to read CPU times from.
#[derive(Debug, Clone, Copy)]
pub struct Meter {
    /// Clock ticks per second.
    pub hz: f64,
    /// The cluster's postmaster.
    pub postmaster: Option<u32>,
    /// The node's pid.
    pub node: u32,
}

impl Meter {
    /// Reads every counter now.
    pub fn sample(&self) -> Sample {
        Sample {
            services: own_seconds(self.hz),
            postgres: self.postmaster.and_then(|p| cluster_seconds(p, self.hz)),
            node: process_seconds(self.node, self.hz),
        }
    }
}

/// CPU seconds used between two samples.
#[derive(Debug, Clone, Copy)]
pub struct Used {
    /// This process (the services in-process, plus the benchmark's clients).
    pub services: f64,
    /// The PostgreSQL cluster.
    pub postgres: Option<f64>,
    /// The anvil node.
    pub node: Option<f64>,
}

impl Sample {
    /// What was used from `self` until `later`.
    pub fn until(&self, later: &Sample) -> Used {
        let diff = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
        Used {
            services: later.services - self.services,
            postgres: diff(self.postgres, later.postgres),
            node: diff(self.node, later.node),
        }
    }
}

/// CPU seconds of the live client backends of each login of the cluster `db` is connected to,
/// at one moment (an empty map when the query fails; backends whose /proc entry cannot be read,
/// as when the cluster is not on this machine, are left out). Backends that ended
/// are not counted: the services' pools keep theirs for the whole run.
pub async fn by_login(db: &sqlx::PgPool, hz: f64) -> BTreeMap<String, f64> {
    let backends: Vec<(i32, String)> = sqlx::query_as(
        "SELECT pid, usename::text FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND usename IS NOT NULL",
    )
    .fetch_all(db)
    .await
    .unwrap_or_default();
    let mut seconds: BTreeMap<String, f64> = BTreeMap::new();
    for (pid, login) in backends {
        if let Some(s) = u32::try_from(pid)
            .ok()
            .and_then(|pid| process_seconds(pid, hz))
        {
            *seconds.entry(login).or_default() += s;
        }
    }
    seconds
}

/// What each login used from `before` until `after` ([`by_login`] samples), largest first: a
/// login that appears only in `after` counts from 0.
pub fn login_use(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> Vec<(String, f64)> {
    let mut used: Vec<(String, f64)> = after
        .iter()
        .map(|(login, &s)| {
            let was = before.get(login).copied().unwrap_or(0.0);
            (login.clone(), (s - was).max(0.0))
        })
        .collect();
    used.sort_by(|a, b| b.1.total_cmp(&a.1));
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_use_is_the_difference_per_login_largest_first() {
        let before = BTreeMap::from([("a".to_owned(), 1.0), ("b".to_owned(), 2.0)]);
        let after = BTreeMap::from([
            ("a".to_owned(), 4.0),
            ("b".to_owned(), 2.5),
            ("c".to_owned(), 1.0),
        ]);
        assert_eq!(
            login_use(&before, &after),
            vec![
                ("a".to_owned(), 3.0),
                ("c".to_owned(), 1.0),
                ("b".to_owned(), 0.5)
            ]
        );
    }
}
