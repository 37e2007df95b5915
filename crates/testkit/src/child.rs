//! Workspace service binaries run as child processes.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// Prefix of the variables that configure opledger programs. Inherited ones are removed from a
/// child's environment so that the pairs given to [`ChildService::spawn`] fully define its
/// configuration.
const CONFIG_ENV_PREFIX: &str = "OPLEDGER_";

/// A service binary of the workspace running as a child process of the test.
///
/// Its stdout and stderr go to a log file under the system temp folder ([`Self::log_path`],
/// [`Self::log_tail`]). It is killed (SIGKILL) when dropped; if the test is panicking at that
/// moment, the tail of its log is printed to stderr.
#[derive(Debug)]
pub struct ChildService {
    name: String,
    child: Child,
    log_path: PathBuf,
}

impl ChildService {
    /// Starts the workspace binary `bin` (found next to the running test executable, in
    /// `target/<profile>/`) with the test's environment, less every inherited `OPLEDGER_*`
    /// variable, plus the given pairs.
    pub fn spawn(bin: &str, env: &[(&str, String)]) -> anyhow::Result<ChildService> {
        Self::spawn_program(&binary_path(bin)?, bin, &[], env)
    }

    fn spawn_program(
        path: &Path,
        bin: &str,
        args: &[&str],
        env: &[(&str, String)],
    ) -> anyhow::Result<ChildService> {
        let log_path = std::env::temp_dir().join(format!(
            "opledger-{bin}-{}-{}.log",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let log = File::create(&log_path)
            .with_context(|| format!("creating the log file {}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .with_context(|| format!("duplicating the log file {}", log_path.display()))?;

        let mut command = Command::new(path);
        command.args(args);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with(CONFIG_ENV_PREFIX) {
                command.env_remove(&key);
            }
        }
        command
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err));
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", path.display()))?;
        Ok(ChildService {
            name: bin.to_owned(),
            child,
            log_path,
        })
    }

    /// The binary's name, as given to [`Self::spawn`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Process id of the child.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Path of the file that receives the child's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines of the child's output so far.
    pub fn log_tail(&self, lines: usize) -> String {
        crate::child::tail_of(&self.log_path, lines)
    }

    /// True while the child has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the child with SIGKILL (no chance to clean up) and reaps it. Does nothing if it
    /// already exited.
    pub fn kill(&mut self) {
        if self.is_running() {
            // An error here means it exited in the meantime.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }

    /// Asks the child to shut down gracefully (SIGTERM); see [`Self::wait_exit`].
    pub fn terminate(&mut self) -> anyhow::Result<()> {
        if !self.is_running() {
            return Ok(());
        }
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .context("running kill -TERM")?;
        if !status.success() && self.is_running() {
            bail!("kill -TERM {} failed: {status}", self.pid());
        }
        Ok(())
    }

    /// Waits (blocking this thread) up to `timeout` for the child to exit; `None` if it is still
    /// running then.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => {}
                Err(_) => return None,
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ChildService {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- last lines of {} (pid {}, log {}) ---\n{}\n--- end of {} log ---",
                self.name,
                self.pid(),
                self.log_path.display(),
                self.log_tail(50),
                self.name
            );
        }
    }
}

/// The workspace binary `bin` at `target/<profile>/<bin>`, next to the running test executable
/// (`target/<profile>/deps/<test>-<hash>`).
pub fn binary_path(bin: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the running test executable")?;
    let mut dir = exe
        .parent()
        .with_context(|| format!("{} has no parent folder", exe.display()))?;
    if dir.ends_with("deps") {
        dir = dir
            .parent()
            .with_context(|| format!("{} has no parent folder", dir.display()))?;
    }
    let path = dir.join(format!("{bin}{}", std::env::consts::EXE_SUFFIX));
    if !path.is_file() {
        bail!(
            "service binary {} not found: build the workspace binaries first: cargo build --workspace",
            path.display()
        );
    }
    Ok(path)
}

/// The last `lines` lines of a log file, or why it cannot be read.
pub(crate) fn tail_of(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_binary_is_a_clear_error() {
        let err = ChildService::spawn("opledger-no-such-binary", &[])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("build the workspace binaries first: cargo build --workspace"),
            "{err}"
        );
    }

    fn shell(script: &str, env: &[(&str, String)]) -> anyhow::Result<ChildService> {
        ChildService::spawn_program(Path::new("/bin/sh"), "sh", &["-c", script], env)
    }

    fn wait_for_log(child: &ChildService, needle: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if child.log_tail(100).contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn child_output_env_kill_and_exit() -> anyhow::Result<()> {
        let mut child = shell(
            "echo started; env | grep '^OPLEDGER_' | sort; echo ready >&2; exec sleep 30",
            &[("OPLEDGER_GIVEN", "yes".to_owned())],
        )?;
        assert!(wait_for_log(&child, "ready"), "{}", child.log_tail(20));
        assert!(child.is_running());
        assert!(child.pid() > 0);
        // Only the given OPLEDGER_* pair reaches the child, whatever the test process has.
        let log = child.log_tail(20);
        let config: Vec<&str> = log.lines().filter(|l| l.starts_with("OPLEDGER_")).collect();
        assert_eq!(config, ["OPLEDGER_GIVEN=yes"], "{log}");
        assert_eq!(child.log_tail(1), "ready");

        assert_eq!(child.wait_exit(Duration::from_millis(50)), None);
        child.kill();
        assert!(!child.is_running());
        assert!(child.wait_exit(Duration::from_secs(1)).is_some());
        child.kill(); // idempotent
        Ok(())
    }

    #[test]
    fn terminate_lets_the_child_exit() -> anyhow::Result<()> {
        let mut child = shell(
            "trap 'echo bye; exit 3' TERM; echo ready; while :; do sleep 0.05; done",
            &[],
        )?;
        assert!(wait_for_log(&child, "ready"), "{}", child.log_tail(20));
        child.terminate()?;
        let status = child.wait_exit(Duration::from_secs(10));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(3),
            "{}",
            child.log_tail(20)
        );
        assert!(child.log_tail(5).contains("bye"));
        Ok(())
    }
}
