//! The measured `opledger-inbox` child process of the webhook benchmark and its loopback ports.

use anyhow::Context;
use std::time::{Duration, Instant};

/// Free loopback ports for the service.
#[derive(Debug)]
pub(super) struct Ports {
    grpc: u16,
    pub(super) http: u16,
    metrics: u16,
}

impl Ports {
    pub(super) fn free() -> anyhow::Result<Ports> {
        // Held together so the three differ; released just before the service binds them.
        let listeners = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
            .collect::<Result<Vec<_>, _>>()?;
        let port = |i: usize| -> anyhow::Result<u16> { Ok(listeners[i].local_addr()?.port()) };
        Ok(Ports {
            grpc: port(0)?,
            http: port(1)?,
            metrics: port(2)?,
        })
    }
}

/// The `opledger-inbox` child process.
#[derive(Debug)]
pub(super) struct Service {
    child: std::process::Child,
}

impl Service {
    pub(super) fn spawn(
        app_url: &str,
        ports: &Ports,
        body_keys: &str,
        pool: usize,
        processors: usize,
    ) -> anyhow::Result<Service> {
        let exe = std::env::current_exe()?;
        let bin = exe.with_file_name("opledger-inbox");
        anyhow::ensure!(
            bin.exists(),
            "{} is missing: cargo build --release -p opledger-inbox -p opledger-bench",
            bin.display()
        );
        let mut command = std::process::Command::new(bin);
        // Only what the bench sets: no configuration file or variable from the caller's shell.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("OPLEDGER_INBOX_") {
                command.env_remove(name);
            }
        }
        let child = command
            .env("OPLEDGER_INBOX_DATABASE_URL", app_url)
            .env("OPLEDGER_INBOX_LISTEN", format!("127.0.0.1:{}", ports.grpc))
            .env(
                "OPLEDGER_INBOX_HTTP_LISTEN",
                format!("127.0.0.1:{}", ports.http),
            )
            .env(
                "OPLEDGER_INBOX_METRICS_LISTEN",
                format!("127.0.0.1:{}", ports.metrics),
            )
            .env("OPLEDGER_INBOX_BODY_KEYS", body_keys)
            .env("OPLEDGER_INBOX_DB_MAX_CONNECTIONS", pool.to_string())
            .env("OPLEDGER_INBOX_PROCESSORS", processors.to_string())
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .spawn()?;
        Ok(Service { child })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the ingress accepts connections (the service binds it after connecting to
    /// the database).
    pub(super) async fn wait_ready(&mut self, http: u16) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("opledger-inbox exited before serving: {status}");
            }
            match tokio::net::TcpStream::connect(("127.0.0.1", http)).await {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(e).context("opledger-inbox did not start listening");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    pub(super) fn stop(mut self) {
        self.child.kill().ok();
        let _ = self.child.wait();
    }
}
