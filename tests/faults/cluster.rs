//! The system under fault: the six real service binaries as child processes, talking to one
//! PostgreSQL database through a fault proxy and (broadcaster, reconciler) to a real anvil node
//! through another; any of them can be armed with a failpoint, killed with SIGKILL and restarted.

use anyhow::Context;
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_testkit::ServiceRole;
use opledger_testkit::{Anvil, AnvilOptions, ChildService, FaultProxy, free_port, wait_for_tcp};
use opledger_tests::inbox::{Endpoint, Sender, body_keys, endpoint};
use opledger_tests::signer::{
    CALLER_TOKEN, NETWORK, config as signer_config, signer_url, write_keystore,
};
use opledger_tests::{Stack, Tenant, authed};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tonic::transport::Channel;

/// The services, in start order.
pub const SERVICES: [&str; 6] = [
    "operations",
    "approvals",
    "signer",
    "broadcaster",
    "reconciler",
    "inbox",
];

struct Service {
    bin: &'static str,
    env: Vec<(&'static str, String)>,
    ready_port: u16,
    child: Option<ChildService>,
}

/// A removed-on-drop folder for configuration files.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The running system.
pub struct Cluster {
    /// Database (and the tenant setup helpers; its in-process services are not used).
    pub stack: Stack,
    /// The funded tenant.
    pub acme: Tenant,
    /// The chain.
    pub node: Anvil,
    /// In front of PostgreSQL, for every service.
    pub db_proxy: FaultProxy,
    /// In front of anvil, for the broadcaster and the reconciler.
    pub node_proxy: FaultProxy,
    /// The inbox endpoint of `acme`.
    pub endpoint: Endpoint,
    /// A sender to the inbox.
    pub sender: Sender,
    operations_port: u16,
    approvals_port: u16,
    services: BTreeMap<&'static str, Service>,
    /// Services whose armed failpoint fired while they were starting (work left from earlier
    /// steps reached it before the harness saw the port): they crashed where the step wanted.
    fired_at_start: std::collections::BTreeSet<String>,
    _dir: TempDir,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node", &self.node.rpc_url())
            .finish_non_exhaustive()
    }
}

/// `url` with its `host:port` replaced by `addr` (to route a database URL through a proxy).
fn through(url: &str, addr: SocketAddr) -> anyhow::Result<String> {
    let at = url.rfind('@').context("database url without credentials")?;
    let slash = url[at..]
        .find('/')
        .context("database url without a database")?
        + at;
    Ok(format!("{}{addr}{}", &url[..=at], &url[slash..]))
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

impl Cluster {
    /// Provisions the database, the tenant (1000 ETH in `treasury`), anvil, the proxies and the
    /// configurations, and starts every service unarmed.
    pub async fn start() -> anyhow::Result<Cluster> {
        let stack = Stack::start().await?;
        let acme = stack.tenant("acme").await?;
        stack
            .fund(&acme, "treasury", "ETH", "1000000000000000000000")
            .await?;
        // Blocks every second, as a real network makes them: a transaction waiting behind a
        // nonce gap is mined once the gap is filled, without another submission to trigger it.
        let node = Anvil::start_with(AnvilOptions {
            block_time: Some(1),
            ..AnvilOptions::default()
        })
        .await?;
        let pg: SocketAddr = {
            let url = stack.url(ServiceRole::Operations);
            let at = url.rfind('@').context("service url")?;
            let rest = &url[at + 1..];
            rest[..rest.find('/').context("app url")?].parse()?
        };
        let db_proxy = FaultProxy::start(pg).await?;
        let node_proxy = FaultProxy::start(loopback(node.port())).await?;
        // Every service through the proxy, each as its own role.
        let url_of = |role| through(&stack.url(role), db_proxy.addr());
        let signer_db = through(&signer_url(&stack.db).await?, db_proxy.addr())?;
        let dir =
            std::env::temp_dir().join(format!("opledger-faults-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)?;
        let (keystore, passphrase) = write_keystore(&dir)?;

        let ports: BTreeMap<&str, u16> = SERVICES.iter().map(|s| (*s, free_port())).collect();
        let inbox_http = free_port();
        let mut signer = signer_config(&signer_db, acme.id, &keystore, &passphrase, 1);
        signer.listen = loopback(ports["signer"]);
        signer.metrics_listen = loopback(0);
        let signer_path = dir.join("signer.toml");
        std::fs::write(&signer_path, toml::to_string(&signer)?)?;
        let rpc = BTreeMap::from([(NETWORK.to_owned(), node_proxy.url("http"))]);
        // The watcher and the reconciler read evidence at real depth: three confirmations.
        let evidence = BTreeMap::from([(
            NETWORK.to_owned(),
            opledger_tests::chain::evidence(&[&node_proxy.url("http")], 1),
        )]);
        let broadcaster = opledger_broadcaster::Config {
            listen: loopback(ports["broadcaster"]),
            metrics_listen: loopback(0),
            database_url: opledger_grpc::config::DatabaseUrl(url_of(ServiceRole::Broadcaster)?),
            worker_id: "faults-broadcaster".into(),
            signer_url: format!("http://{}", loopback(ports["signer"])),
            signer_token: opledger_grpc::config::Secret(CALLER_TOKEN.to_owned()),
            rpc: rpc.clone(),
            evidence: evidence.clone(),
            submit_timeout_ms: 2_000,
            bump_after_secs: 4,
            poll_interval_ms: 100,
            // The harness compresses time: a refused or interrupted signing is tried again
            // within seconds (production: 1 s doubling to 60 s), so that the clients' 120 s
            // convergence window is never spent waiting out a back-off its faults caused.
            backoff_base_ms: 200,
            backoff_max_ms: 5_000,
            ..opledger_broadcaster::Config::default()
        };
        let broadcaster_path = dir.join("broadcaster.toml");
        std::fs::write(&broadcaster_path, toml::to_string(&broadcaster)?)?;
        let reconciler = opledger_reconciler::Config {
            listen: loopback(ports["reconciler"]),
            metrics_listen: loopback(0),
            database_url: opledger_grpc::config::DatabaseUrl(url_of(ServiceRole::Reconciler)?),
            worker_id: "faults-reconciler".into(),
            signer_url: format!("http://{}", loopback(ports["signer"])),
            signer_token: opledger_grpc::config::Secret(CALLER_TOKEN.to_owned()),
            evidence,
            rpc,
            stale_broadcast_secs: 3,
            cancel_after_secs: 6,
            poll_interval_ms: 200,
            rpc_timeout_ms: 2_000,
            ..opledger_reconciler::Config::default()
        };
        let reconciler_path = dir.join("reconciler.toml");
        std::fs::write(&reconciler_path, toml::to_string(&reconciler)?)?;

        let listen = |name: &str| format!("127.0.0.1:{}", ports[name]);
        let mut services = BTreeMap::new();
        services.insert(
            "operations",
            Service {
                bin: "opledger-operations",
                env: vec![
                    (
                        "OPLEDGER_OPERATIONS_DATABASE_URL",
                        url_of(ServiceRole::Operations)?,
                    ),
                    ("OPLEDGER_OPERATIONS_LISTEN", listen("operations")),
                    ("OPLEDGER_OPERATIONS_METRICS_LISTEN", "127.0.0.1:0".into()),
                ],
                ready_port: ports["operations"],
                child: None,
            },
        );
        services.insert(
            "approvals",
            Service {
                bin: "opledger-approvals",
                env: vec![
                    (
                        "OPLEDGER_APPROVALS_DATABASE_URL",
                        url_of(ServiceRole::Approvals)?,
                    ),
                    ("OPLEDGER_APPROVALS_LISTEN", listen("approvals")),
                    ("OPLEDGER_APPROVALS_METRICS_LISTEN", "127.0.0.1:0".into()),
                ],
                ready_port: ports["approvals"],
                child: None,
            },
        );
        for (name, bin, var, path) in [
            (
                "signer",
                "opledger-signer",
                "OPLEDGER_SIGNER_CONFIG",
                &signer_path,
            ),
            (
                "broadcaster",
                "opledger-broadcaster",
                "OPLEDGER_BROADCASTER_CONFIG",
                &broadcaster_path,
            ),
            (
                "reconciler",
                "opledger-reconciler",
                "OPLEDGER_RECONCILER_CONFIG",
                &reconciler_path,
            ),
        ] {
            services.insert(
                name,
                Service {
                    bin,
                    env: vec![(var, path.display().to_string())],
                    ready_port: ports[name],
                    child: None,
                },
            );
        }
        services.insert(
            "inbox",
            Service {
                bin: "opledger-inbox",
                env: vec![
                    ("OPLEDGER_INBOX_DATABASE_URL", url_of(ServiceRole::Inbox)?),
                    ("OPLEDGER_INBOX_LISTEN", listen("inbox")),
                    (
                        "OPLEDGER_INBOX_HTTP_LISTEN",
                        format!("127.0.0.1:{inbox_http}"),
                    ),
                    ("OPLEDGER_INBOX_METRICS_LISTEN", "127.0.0.1:0".into()),
                    ("OPLEDGER_INBOX_BODY_KEYS", body_keys()),
                    ("OPLEDGER_INBOX_POLL_INTERVAL_MS", "50".into()),
                    ("OPLEDGER_INBOX_RETRY_BASE_MS", "100".into()),
                    ("OPLEDGER_INBOX_MAX_ATTEMPTS", "50".into()),
                ],
                ready_port: inbox_http,
                child: None,
            },
        );
        let endpoint = endpoint(&stack, &acme, "chainwatch", &["deposit.confirmed"]).await?;
        let mut cluster = Cluster {
            stack,
            acme,
            node,
            db_proxy,
            node_proxy,
            endpoint,
            sender: Sender::new(loopback(inbox_http)),
            operations_port: ports["operations"],
            approvals_port: ports["approvals"],
            services,
            fired_at_start: std::collections::BTreeSet::new(),
            _dir: TempDir(dir),
        };
        for name in SERVICES {
            cluster.start_service(name, "").await?;
        }
        Ok(cluster)
    }

    /// Starts `name` (killing a running instance first) with `failpoints` armed. Like a process
    /// supervisor, starts it again when it exits before it listens (its first database
    /// connection may meet a proxy fault).
    pub async fn start_service(&mut self, name: &str, failpoints: &str) -> anyhow::Result<()> {
        self.kill(name);
        let service = self.services.get_mut(name).context("no such service")?;
        let mut env = service.env.clone();
        env.push(("OPLEDGER_FAILPOINTS", failpoints.to_owned()));
        env.push(("RUST_LOG", "warn".to_owned()));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let armed: Vec<String> = failpoints
            .split(';')
            .filter_map(|spec| spec.split('=').next())
            .map(|name| format!("failpoint {}: abort", name.trim()))
            .filter(|line| line != "failpoint : abort")
            .collect();
        loop {
            let mut child = ChildService::spawn(service.bin, &env)?;
            loop {
                if wait_for_tcp(loopback(service.ready_port), Duration::from_millis(100))
                    .await
                    .is_ok()
                {
                    service.child = Some(child);
                    return Ok(());
                }
                if !child.is_running() {
                    break;
                }
                anyhow::ensure!(
                    tokio::time::Instant::now() < deadline,
                    "{name} did not start: {}",
                    child.log_tail(20)
                );
            }
            // Its armed failpoint fired before the port was seen: the crash the step wanted
            // happened; it is started again unarmed and counts as having died there.
            let tail = child.log_tail(50);
            if armed.iter().any(|line| tail.contains(line.as_str())) {
                self.fired_at_start.insert(name.to_owned());
                env.retain(|(key, _)| *key != "OPLEDGER_FAILPOINTS");
                continue;
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "{name} kept exiting at start: {}",
                child.log_tail(20)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILLs `name` if it runs.
    pub fn kill(&mut self, name: &str) {
        if let Some(service) = self.services.get_mut(name)
            && let Some(mut child) = service.child.take()
        {
            child.kill();
        }
    }

    /// True once `name`'s process has exited (a failpoint aborted it), within `timeout`.
    pub async fn died(&mut self, name: &str, timeout: Duration) -> bool {
        if self.fired_at_start.remove(name) {
            return true;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let running = self
                .services
                .get_mut(name)
                .and_then(|s| s.child.as_mut())
                .is_some_and(ChildService::is_running);
            if !running {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Every service that is not running is started again, unarmed.
    pub async fn heal(&mut self) -> anyhow::Result<()> {
        for name in SERVICES {
            let running = self
                .services
                .get_mut(name)
                .and_then(|s| s.child.as_mut())
                .is_some_and(ChildService::is_running);
            if !running {
                self.start_service(name, "").await?;
            }
        }
        Ok(())
    }

    /// A client of the operations service.
    pub async fn operations(&self) -> anyhow::Result<OperationsServiceClient<Channel>> {
        let channel = Channel::from_shared(format!("http://{}", loopback(self.operations_port)))?
            .timeout(Duration::from_secs(10))
            .connect_lazy();
        Ok(OperationsServiceClient::new(channel))
    }

    /// A client of the approvals service.
    pub async fn approvals(&self) -> anyhow::Result<ApprovalsServiceClient<Channel>> {
        let channel = Channel::from_shared(format!("http://{}", loopback(self.approvals_port)))?
            .timeout(Duration::from_secs(10))
            .connect_lazy();
        Ok(ApprovalsServiceClient::new(channel))
    }

    /// The withdrawal as the API shows it now.
    pub async fn withdrawal(&self, id: &str) -> anyhow::Result<pb::Withdrawal> {
        Ok(self
            .operations()
            .await?
            .get_withdrawal(authed(
                &self.acme.client,
                pb::GetWithdrawalRequest {
                    withdrawal_id: id.to_owned(),
                },
            ))
            .await?
            .into_inner())
    }
}
