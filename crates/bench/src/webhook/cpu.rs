//! CPU time of the webhook benchmark's processes, read from /proc.

use sqlx::PgPool;
use std::path::Path;

/// CPU time read from /proc: this process (the HTTP clients), its waited-for children
/// (pgbench), the inbox and the PostgreSQL cluster.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cpu {
    hz: f64,
    postmaster: Option<u32>,
}

/// CPU seconds at one moment, or used between two.
#[derive(Debug, Clone, Copy)]
pub(super) struct Used {
    pub(super) bench: f64,
    pub(super) children: f64,
    pub(super) inbox: Option<f64>,
    pub(super) postgres: Option<f64>,
}

/// (parent pid, own ticks, waited-for children's ticks) of one process.
fn proc_stat(path: &Path) -> Option<(u32, u64, u64)> {
    let text = std::fs::read_to_string(path.join("stat")).ok()?;
    // Field 2 (the command) is in parentheses and may hold spaces: field 3 follows the last ')'.
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some((
        u32::try_from(field(4)?).ok()?,
        field(14)? + field(15)?,
        field(16)? + field(17)?,
    ))
}

impl Cpu {
    pub(super) async fn new(owner: &PgPool) -> Cpu {
        let hz = std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|&hz| hz > 0.0)
            .unwrap_or(100.0);
        let backend: Option<(i32,)> = sqlx::query_as("SELECT pg_backend_pid()")
            .fetch_optional(owner)
            .await
            .ok()
            .flatten();
        let postmaster = backend
            .and_then(|(pid,)| proc_stat(&Path::new("/proc").join(pid.to_string())))
            .map(|(ppid, _, _)| ppid)
            .filter(|&ppid| ppid > 1);
        Cpu { hz, postmaster }
    }

    pub(super) fn sample(&self, inbox: Option<u32>) -> Used {
        let this = proc_stat(Path::new("/proc/self")).unwrap_or((0, 0, 0));
        let ticks = |t: u64| t as f64 / self.hz;
        Used {
            bench: ticks(this.1),
            children: ticks(this.2),
            inbox: inbox
                .and_then(|pid| proc_stat(&Path::new("/proc").join(pid.to_string())))
                .map(|s| ticks(s.1)),
            postgres: self.postmaster.and_then(|pm| self.cluster(pm)),
        }
    }

    /// The postmaster's time and its exited backends', plus every live child's.
    fn cluster(&self, postmaster: u32) -> Option<f64> {
        let (_, own, children) = proc_stat(&Path::new("/proc").join(postmaster.to_string()))?;
        let mut total = own + children;
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let pid = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok());
            if pid.is_none() || pid == Some(postmaster) {
                continue;
            }
            if let Some((ppid, own, children)) = proc_stat(&entry.path())
                && ppid == postmaster
            {
                total += own + children;
            }
        }
        Some(total as f64 / self.hz)
    }
}

impl Used {
    pub(super) fn until(&self, later: &Used) -> Used {
        let diff = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
        Used {
            bench: later.bench - self.bench,
            children: later.children - self.children,
            inbox: diff(self.inbox, later.inbox),
            postgres: diff(self.postgres, later.postgres),
        }
    }
}
