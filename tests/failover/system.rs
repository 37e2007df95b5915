//! The system on a highly available database: an HA topology (`scripts/ha.sh`: a Patroni primary
//! and synchronous standby behind HAProxy), the six real service binaries as child processes
//! reaching the primary through the router, each as its own login, and a real anvil node.
//! Nothing is restarted across a failover: the services must recover by themselves.

use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_testkit::{
    Anvil, AnvilOptions, ChildService, HaCluster, ServiceRole, free_port, wait_for_tcp,
};
use opledger_tests::inbox::{Endpoint, Sender, body_keys, endpoint};
use opledger_tests::signer::{
    CALLER_TOKEN, NETWORK, config as signer_config, signer_url, write_keystore,
};
use opledger_tests::{Stack, Tenant, operations_config};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The services, with the gRPC health name each reports.
pub const SERVICES: [(&str, &str); 6] = [
    ("operations", opledger_operations::SERVICE_NAME),
    ("approvals", opledger_approvals::SERVICE_NAME),
    ("signer", opledger_signer::SERVICE_NAME),
    ("broadcaster", opledger_broadcaster::SERVICE_NAME),
    ("reconciler", opledger_reconciler::SERVICE_NAME),
    ("inbox", opledger_inbox::SERVICE_NAME),
];

/// A removed-on-drop folder for configuration files.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Service {
    name: &'static str,
    health: &'static str,
    port: u16,
    child: ChildService,
}

/// The running system.
pub struct System {
    /// The services, in start order (dropped first: killed before the database goes).
    services: Vec<Service>,
    /// The database (tenant setup, inspection; its in-process services serve the setup only).
    pub stack: Stack,
    /// The funded tenant.
    pub acme: Tenant,
    /// The chain.
    pub node: Anvil,
    /// The inbox endpoint of `acme`.
    pub endpoint: Endpoint,
    /// A sender to the inbox.
    pub sender: Sender,
    /// The HA topology (dropped last: destroyed).
    pub ha: HaCluster,
    operations_port: u16,
    approvals_port: u16,
    _dir: TempDir,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

impl System {
    /// Starts the topology, a database on it, the tenant (1000 ETH in `treasury`), anvil and
    /// every service.
    pub async fn start() -> anyhow::Result<System> {
        let started = tokio::time::Instant::now();
        let ha = HaCluster::start().await?;
        let ha_secs = started.elapsed().as_secs_f64();
        let db = ha.database().await?;
        let stack = Stack::start_in(db, operations_config()).await?;
        let acme = stack.tenant("acme").await?;
        stack
            .fund(&acme, "treasury", "ETH", "1000000000000000000000")
            .await?;
        let node = Anvil::start_with(AnvilOptions {
            block_time: Some(1),
            ..AnvilOptions::default()
        })
        .await?;
        let dir = std::env::temp_dir().join(format!(
            "opledger-failover-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir)?;
        let (keystore, passphrase) = write_keystore(&dir)?;
        let ports: BTreeMap<&str, u16> = SERVICES.iter().map(|(s, _)| (*s, free_port())).collect();
        let inbox_http = free_port();

        let mut signer = signer_config(
            &signer_url(&stack.db).await?,
            acme.id,
            &keystore,
            &passphrase,
            5,
        );
        signer.base.listen = loopback(ports["signer"]);
        signer.base.metrics_listen = loopback(0);
        let signer_path = dir.join("signer.toml");
        std::fs::write(&signer_path, toml::to_string(&signer)?)?;
        let rpc = BTreeMap::from([(NETWORK.to_owned(), node.rpc_url())]);
        let evidence = BTreeMap::from([(
            NETWORK.to_owned(),
            opledger_tests::chain::evidence(&[&node.rpc_url()], 1),
        )]);
        let broadcaster = opledger_broadcaster::Config {
            base: opledger_config::ServiceBase {
                listen: loopback(ports["broadcaster"]),
                metrics_listen: loopback(0),
                database_url: opledger_config::DatabaseUrl(stack.url(ServiceRole::Broadcaster)),
                ..opledger_broadcaster::Config::default().base
            },
            worker_id: "failover-broadcaster".into(),
            signer: opledger_grpc::client::SignerLink {
                signer_url: format!("http://{}", loopback(ports["signer"])),
                signer_token: opledger_config::Secret(CALLER_TOKEN.to_owned()),
                signer_tls: None,
            },
            chain: opledger_chain::ChainLinks {
                rpc: rpc.clone(),
                evidence: evidence.clone(),
                ..Default::default()
            },
            submit_timeout_ms: 2_000,
            poll_interval_ms: 100,
            // A signing refused or cut by the failover is tried again within seconds.
            backoff_base_ms: 200,
            backoff_max_ms: 2_000,
            ..opledger_broadcaster::Config::default()
        };
        let broadcaster_path = dir.join("broadcaster.toml");
        std::fs::write(&broadcaster_path, toml::to_string(&broadcaster)?)?;
        let reconciler = opledger_reconciler::Config {
            base: opledger_config::ServiceBase {
                listen: loopback(ports["reconciler"]),
                metrics_listen: loopback(0),
                database_url: opledger_config::DatabaseUrl(stack.url(ServiceRole::Reconciler)),
                ..opledger_reconciler::Config::default().base
            },
            worker_id: "failover-reconciler".into(),
            signer: opledger_grpc::client::SignerLink {
                signer_url: format!("http://{}", loopback(ports["signer"])),
                signer_token: opledger_config::Secret(CALLER_TOKEN.to_owned()),
                signer_tls: None,
            },
            chain: opledger_chain::ChainLinks {
                evidence,
                rpc,
                ..Default::default()
            },
            stale_broadcast_secs: 5,
            cancel_after_secs: 10,
            poll_interval_ms: 200,
            rpc_timeout_ms: 2_000,
            ..opledger_reconciler::Config::default()
        };
        let reconciler_path = dir.join("reconciler.toml");
        std::fs::write(&reconciler_path, toml::to_string(&reconciler)?)?;

        let listen = |name: &str| format!("127.0.0.1:{}", ports[name]);
        // (name, binary, environment, the port that shows it started).
        type Spec = (&'static str, &'static str, Vec<(&'static str, String)>, u16);
        let envs: Vec<Spec> = vec![
            (
                "operations",
                "opledger-operations",
                vec![
                    (
                        "OPLEDGER_OPERATIONS_DATABASE_URL",
                        stack.url(ServiceRole::Operations),
                    ),
                    ("OPLEDGER_OPERATIONS_LISTEN", listen("operations")),
                    ("OPLEDGER_OPERATIONS_METRICS_LISTEN", "127.0.0.1:0".into()),
                ],
                ports["operations"],
            ),
            (
                "approvals",
                "opledger-approvals",
                vec![
                    (
                        "OPLEDGER_APPROVALS_DATABASE_URL",
                        stack.url(ServiceRole::Approvals),
                    ),
                    ("OPLEDGER_APPROVALS_LISTEN", listen("approvals")),
                    ("OPLEDGER_APPROVALS_METRICS_LISTEN", "127.0.0.1:0".into()),
                ],
                ports["approvals"],
            ),
            (
                "signer",
                "opledger-signer",
                vec![("OPLEDGER_SIGNER_CONFIG", signer_path.display().to_string())],
                ports["signer"],
            ),
            (
                "broadcaster",
                "opledger-broadcaster",
                vec![(
                    "OPLEDGER_BROADCASTER_CONFIG",
                    broadcaster_path.display().to_string(),
                )],
                ports["broadcaster"],
            ),
            (
                "reconciler",
                "opledger-reconciler",
                vec![(
                    "OPLEDGER_RECONCILER_CONFIG",
                    reconciler_path.display().to_string(),
                )],
                ports["reconciler"],
            ),
            (
                "inbox",
                "opledger-inbox",
                vec![
                    ("OPLEDGER_INBOX_DATABASE_URL", stack.url(ServiceRole::Inbox)),
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
                inbox_http,
            ),
        ];
        let endpoint = endpoint(&stack, &acme, "chainwatch", &["deposit.confirmed"]).await?;
        let mut services = Vec::new();
        for ((name, bin, mut env, ready_port), (_, health)) in envs.into_iter().zip(SERVICES) {
            env.push(("RUST_LOG", "warn".to_owned()));
            let mut child = ChildService::spawn(bin, &env)?;
            if let Err(e) = wait_for_tcp(loopback(ready_port), Duration::from_secs(30)).await {
                anyhow::bail!("{name} did not start: {e}: {}", child.log_tail(20));
            }
            anyhow::ensure!(child.is_running(), "{name} exited: {}", child.log_tail(20));
            services.push(Service {
                name,
                health,
                port: ports[name],
                child,
            });
        }
        eprintln!(
            "failover: topology up in {ha_secs:.1}s, system in {:.1}s (leader {})",
            started.elapsed().as_secs_f64(),
            ha.leader().await?
        );
        Ok(System {
            services,
            stack,
            acme,
            node,
            endpoint,
            sender: Sender::new(loopback(inbox_http)),
            ha,
            operations_port: ports["operations"],
            approvals_port: ports["approvals"],
            _dir: TempDir(dir),
        })
    }

    /// Fails unless every service process still runs (none may need a restart).
    pub fn all_running(&mut self) -> anyhow::Result<()> {
        for s in &mut self.services {
            anyhow::ensure!(
                s.child.is_running(),
                "{} exited across the failover: {}",
                s.name,
                s.child.log_tail(30)
            );
        }
        Ok(())
    }

    /// (service, gRPC health endpoint, health name) of every service.
    pub fn health_targets(&self) -> Vec<(&'static str, SocketAddr, &'static str)> {
        self.services
            .iter()
            .map(|s| (s.name, loopback(s.port), s.health))
            .collect()
    }

    /// A client of the operations service.
    pub fn operations(&self) -> anyhow::Result<OperationsServiceClient<Channel>> {
        let channel = Channel::from_shared(format!("http://{}", loopback(self.operations_port)))?
            .timeout(Duration::from_secs(10))
            .connect_lazy();
        Ok(OperationsServiceClient::new(channel))
    }

    /// A client of the approvals service.
    pub fn approvals(&self) -> anyhow::Result<ApprovalsServiceClient<Channel>> {
        let channel = Channel::from_shared(format!("http://{}", loopback(self.approvals_port)))?
            .timeout(Duration::from_secs(10))
            .connect_lazy();
        Ok(ApprovalsServiceClient::new(channel))
    }
}

/// A health client of the service at `addr` (connected lazily, reconnecting by itself).
pub fn health_client(addr: SocketAddr) -> anyhow::Result<HealthClient<Channel>> {
    let channel = Channel::from_shared(format!("http://{addr}"))?
        .timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1))
        .connect_lazy();
    Ok(HealthClient::new(channel))
}

/// The health `name` reports through `client` now (`None`: no answer within a second).
pub async fn health(client: &mut HealthClient<Channel>, name: &str) -> Option<ServingStatus> {
    let answer = client
        .check(tonic_health::pb::HealthCheckRequest {
            service: name.to_owned(),
        })
        .await
        .ok()?;
    ServingStatus::try_from(answer.into_inner().status).ok()
}
