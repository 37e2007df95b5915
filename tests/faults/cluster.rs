//! The system under fault: two instances of each of the six real service binaries as child
//! processes, talking to one PostgreSQL database through a fault proxy and (broadcasters,
//! reconcilers) to a real anvil node through another, behind which a JSON-RPC proxy counts every
//! submission of every signed transaction; any instance can be armed with a failpoint, killed with
//! SIGKILL and restarted on its own. Clients spread their calls over the instances in turn (as a
//! load balancer would); each broadcaster and reconciler has a signer instance of its own to call.

use crate::service::{Service, TempDir, loopback, signer_link, through};
use anyhow::Context;
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_testkit::ServiceRole;
use opledger_testkit::{
    Anvil, AnvilOptions, ChildService, FaultProxy, RpcProxy, free_port, wait_for_tcp,
};
use opledger_tests::inbox::{Endpoint, Sender, body_keys, endpoint};
use opledger_tests::signer::{NETWORK, config as signer_config, signer_url, write_keystore};
use opledger_tests::{Stack, Tenant, authed};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tonic::transport::Channel;

/// The services, in start order (`custodian`: the custodian executor).
pub const SERVICES: [&str; 8] = [
    "operations",
    "approvals",
    "signer",
    "broadcaster",
    "reconciler",
    "witness",
    "custodian",
    "inbox",
];

/// Instances of every service, all against the one database, unless `OPLEDGER_FAULT_INSTANCES`
/// names another number (1 runs the harness as it was before replicas, for comparison).
pub const INSTANCES: usize = 2;

/// How many instances of every service run: [`INSTANCES`] or `OPLEDGER_FAULT_INSTANCES` (1 to 4).
pub fn instances() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| {
        std::env::var("OPLEDGER_FAULT_INSTANCES")
            .ok()
            .and_then(|n| n.parse().ok())
            .filter(|n| (1..=4).contains(n))
            .unwrap_or(INSTANCES)
    })
}

/// The name of instance `i` (from 0) of `service`: `broadcaster-1`, `broadcaster-2`, ...; it is
/// also the instance's `worker_id` or `instance_id` behind a `faults-` prefix.
pub fn instance(service: &str, i: usize) -> String {
    format!("{service}-{}", i + 1)
}

/// Every instance, in start order.
pub fn all_instances() -> Vec<String> {
    SERVICES
        .iter()
        .flat_map(|s| (0..instances()).map(move |i| instance(s, i)))
        .collect()
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
    /// In front of anvil, for the broadcasters and the reconcilers.
    pub node_proxy: FaultProxy,
    /// Between `node_proxy` and anvil: counts every `eth_sendRawTransaction` by signed bytes.
    pub rpc_recorder: RpcProxy,
    /// The tenant routed to the custodian double, and the double.
    pub custody: crate::custodian::Custody,
    /// The inbox endpoint of `acme`.
    pub endpoint: Endpoint,
    /// A sender to each inbox instance's ingress.
    senders: Vec<Sender>,
    operations_ports: Vec<u16>,
    approvals_ports: Vec<u16>,
    services: BTreeMap<String, Service>,
    /// Instances whose armed failpoint fired while they were starting (work left from earlier
    /// steps reached it before the harness saw the port): they crashed where the step wanted.
    fired_at_start: BTreeSet<String>,
    /// The next instance a client call goes to (round robin over the instances).
    turn: AtomicUsize,
    /// Client calls answered, by the instance that answered them (operations, approvals and the
    /// inbox's ingress: their transitions name the caller's key, not the instance).
    answered: Mutex<BTreeMap<String, u64>>,
    _dir: TempDir,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node", &self.node.rpc_url())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Provisions the database, the tenant (1000 ETH in `treasury`), anvil, the proxies and the
    /// configurations, and starts every instance unarmed.
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
        let custody = crate::custodian::Custody::start(&stack, &node).await?;
        let pg: SocketAddr = {
            let url = stack.url(ServiceRole::Operations);
            let at = url.rfind('@').context("service url")?;
            let rest = &url[at + 1..];
            rest[..rest.find('/').context("app url")?].parse()?
        };
        let db_proxy = FaultProxy::start(pg).await?;
        let rpc_recorder = RpcProxy::start(&node.rpc_url()).await?;
        let node_proxy = FaultProxy::start(rpc_recorder.addr()).await?;
        // Every service through the proxy, each as its own role.
        let url_of = |role| through(&stack.url(role), db_proxy.addr());
        let signer_db = through(&signer_url(&stack.db).await?, db_proxy.addr())?;
        let dir =
            std::env::temp_dir().join(format!("opledger-faults-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir)?;
        let (keystore, passphrase) = write_keystore(&dir)?;

        let names = all_instances();
        let ports: BTreeMap<&str, u16> = names.iter().map(|n| (n.as_str(), free_port())).collect();
        let inbox_http: Vec<u16> = (0..instances()).map(|_| free_port()).collect();
        let listen = |name: &str| format!("127.0.0.1:{}", ports[name]);
        let rpc = BTreeMap::from([(NETWORK.to_owned(), node_proxy.url("http"))]);
        // The watcher and the reconciler read evidence at real depth: three confirmations.
        let evidence = BTreeMap::from([(
            NETWORK.to_owned(),
            opledger_tests::chain::evidence(&[&node_proxy.url("http")], 1),
        )]);
        let mut services = BTreeMap::new();
        let config_file = |name: &str, text: String| -> anyhow::Result<String> {
            let path = dir.join(format!("{name}.toml"));
            std::fs::write(&path, text)?;
            Ok(path.display().to_string())
        };
        for i in 0..instances() {
            let operations = instance("operations", i);
            services.insert(
                operations.clone(),
                Service::new(
                    "opledger-operations",
                    vec![
                        (
                            "OPLEDGER_OPERATIONS_DATABASE_URL",
                            url_of(ServiceRole::Operations)?,
                        ),
                        ("OPLEDGER_OPERATIONS_LISTEN", listen(&operations)),
                        ("OPLEDGER_OPERATIONS_METRICS_LISTEN", "127.0.0.1:0".into()),
                        ("OPLEDGER_OPERATIONS_CUSTODIAN_ROUTES", custody.routes()),
                    ],
                    ports[operations.as_str()],
                ),
            );
            let approvals = instance("approvals", i);
            services.insert(
                approvals.clone(),
                Service::new(
                    "opledger-approvals",
                    vec![
                        (
                            "OPLEDGER_APPROVALS_DATABASE_URL",
                            url_of(ServiceRole::Approvals)?,
                        ),
                        ("OPLEDGER_APPROVALS_LISTEN", listen(&approvals)),
                        ("OPLEDGER_APPROVALS_METRICS_LISTEN", "127.0.0.1:0".into()),
                    ],
                    ports[approvals.as_str()],
                ),
            );

            let name = instance("signer", i);
            let mut signer = signer_config(&signer_db, acme.id, &keystore, &passphrase, 1);
            signer.base.listen = loopback(ports[name.as_str()]);
            signer.base.metrics_listen = loopback(0);
            signer.instance_id = format!("faults-{name}");
            let path = config_file(&name, toml::to_string(&signer)?)?;
            services.insert(
                name.clone(),
                Service::new(
                    "opledger-signer",
                    vec![("OPLEDGER_SIGNER_CONFIG", path)],
                    ports[name.as_str()],
                ),
            );

            // Broadcaster i calls signer i, reconciler i the other signer: every signer
            // instance serves both kinds of caller.
            let name = instance("broadcaster", i);
            let signer_port = ports[instance("signer", i).as_str()];
            let broadcaster = opledger_broadcaster::Config {
                base: opledger_config::ServiceBase {
                    listen: loopback(ports[name.as_str()]),
                    metrics_listen: loopback(0),
                    database_url: opledger_config::DatabaseUrl(url_of(ServiceRole::Broadcaster)?),
                    ..opledger_broadcaster::Config::default().base
                },
                worker_id: format!("faults-{name}"),
                signer: signer_link(signer_port),
                chain: opledger_chain::ChainLinks {
                    rpc: rpc.clone(),
                    evidence: evidence.clone(),
                    ..Default::default()
                },
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
            let path = config_file(&name, toml::to_string(&broadcaster)?)?;
            services.insert(
                name.clone(),
                Service::new(
                    "opledger-broadcaster",
                    vec![("OPLEDGER_BROADCASTER_CONFIG", path)],
                    ports[name.as_str()],
                ),
            );

            let name = instance("reconciler", i);
            let signer_port = ports[instance("signer", (i + 1) % instances()).as_str()];
            let reconciler = opledger_reconciler::Config {
                base: opledger_config::ServiceBase {
                    listen: loopback(ports[name.as_str()]),
                    metrics_listen: loopback(0),
                    database_url: opledger_config::DatabaseUrl(url_of(ServiceRole::Reconciler)?),
                    ..opledger_reconciler::Config::default().base
                },
                worker_id: format!("faults-{name}"),
                signer: signer_link(signer_port),
                chain: opledger_chain::ChainLinks {
                    rpc: rpc.clone(),
                    evidence: evidence.clone(),
                    ..Default::default()
                },
                // Longer than a loaded watcher takes to confirm at 3 confirmations (1 s blocks,
                // passes of up to a few seconds), so that the broadcaster's settlement step meets
                // its failpoint before a reconciler settles the same withdrawal as stale.
                stale_broadcast_secs: 15,
                cancel_after_secs: 6,
                poll_interval_ms: 200,
                rpc_timeout_ms: 2_000,
                ..opledger_reconciler::Config::default()
            };
            let path = config_file(&name, toml::to_string(&reconciler)?)?;
            services.insert(
                name.clone(),
                Service::new(
                    "opledger-reconciler",
                    vec![("OPLEDGER_RECONCILER_CONFIG", path)],
                    ports[name.as_str()],
                ),
            );

            // The witness of every release the reconciler proposes: its own login, its own
            // evidence reader (here the same node, at the same depth).
            let name = instance("witness", i);
            let witness = opledger_witness::Config {
                base: opledger_config::ServiceBase {
                    listen: loopback(ports[name.as_str()]),
                    metrics_listen: loopback(0),
                    database_url: opledger_config::DatabaseUrl(url_of(ServiceRole::Witness)?),
                    ..opledger_witness::Config::default().base
                },
                witness_id: format!("faults-{name}"),
                evidence: evidence.clone(),
                custodian_accounts: vec![custody.sim.witness_account(&custody.tenant)?],
                poll_interval_ms: 200,
                rpc_timeout_ms: 2_000,
                ..opledger_witness::Config::default()
            };
            let path = config_file(&name, toml::to_string(&witness)?)?;
            services.insert(
                name.clone(),
                Service::new(
                    "opledger-witness",
                    vec![("OPLEDGER_WITNESS_CONFIG", path)],
                    ports[name.as_str()],
                ),
            );

            // The custodian executor: its own login, the double's account, the node as evidence.
            let name = instance("custodian", i);
            let executor = custody.executor(
                &name,
                loopback(ports[name.as_str()]),
                url_of(ServiceRole::Custodian)?,
                &node_proxy.url("http"),
            )?;
            let path = config_file(&name, toml::to_string(&executor)?)?;
            let env = vec![("OPLEDGER_CUSTODIAN_CONFIG", path)];
            let service = Service::new("opledger-custodian-executor", env, ports[name.as_str()]);
            services.insert(name.clone(), service);

            let name = instance("inbox", i);
            services.insert(
                name.clone(),
                Service::new(
                    "opledger-inbox",
                    vec![
                        ("OPLEDGER_INBOX_DATABASE_URL", url_of(ServiceRole::Inbox)?),
                        ("OPLEDGER_INBOX_LISTEN", listen(&name)),
                        (
                            "OPLEDGER_INBOX_HTTP_LISTEN",
                            format!("127.0.0.1:{}", inbox_http[i]),
                        ),
                        ("OPLEDGER_INBOX_METRICS_LISTEN", "127.0.0.1:0".into()),
                        ("OPLEDGER_INBOX_BODY_KEYS", body_keys()),
                        ("OPLEDGER_INBOX_WORKER_ID", format!("faults-{name}")),
                        ("OPLEDGER_INBOX_POLL_INTERVAL_MS", "50".into()),
                        ("OPLEDGER_INBOX_RETRY_BASE_MS", "100".into()),
                        ("OPLEDGER_INBOX_MAX_ATTEMPTS", "50".into()),
                    ],
                    inbox_http[i],
                ),
            );
        }
        let endpoint = endpoint(&stack, &acme, "chainwatch", &["deposit.confirmed"]).await?;
        let instance_ports = |service: &str| -> Vec<u16> {
            (0..instances())
                .map(|i| ports[instance(service, i).as_str()])
                .collect()
        };
        let mut cluster = Cluster {
            stack,
            acme,
            node,
            db_proxy,
            node_proxy,
            rpc_recorder,
            custody,
            endpoint,
            senders: inbox_http
                .iter()
                .map(|port| Sender::new(loopback(*port)))
                .collect(),
            operations_ports: instance_ports("operations"),
            approvals_ports: instance_ports("approvals"),
            services,
            fired_at_start: BTreeSet::new(),
            turn: AtomicUsize::new(0),
            answered: Mutex::new(BTreeMap::new()),
            _dir: TempDir(dir),
        };
        for name in all_instances() {
            cluster.start_service(&name, "").await?;
        }
        Ok(cluster)
    }

    /// Starts the instance `name` (killing a running one first) with `failpoints` armed. Like a
    /// process supervisor, starts it again when it exits before it listens (its first database
    /// connection may meet a proxy fault).
    pub async fn start_service(&mut self, name: &str, failpoints: &str) -> anyhow::Result<()> {
        self.kill(name);
        let service = self.services.get_mut(name).context("no such instance")?;
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
        service.armed = !armed.is_empty();
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
            if service.armed && armed.iter().any(|line| tail.contains(line.as_str())) {
                self.fired_at_start.insert(name.to_owned());
                env.retain(|(key, _)| *key != "OPLEDGER_FAILPOINTS");
                service.armed = false;
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

    /// SIGKILLs the instance `name` if it runs.
    pub fn kill(&mut self, name: &str) {
        if let Some(service) = self.services.get_mut(name)
            && let Some(mut child) = service.child.take()
        {
            child.kill();
        }
    }

    fn running(&mut self, name: &str) -> bool {
        self.services
            .get_mut(name)
            .and_then(|s| s.child.as_mut())
            .is_some_and(ChildService::is_running)
    }

    /// How many armed instances of `service` have exited (a failpoint aborted them), once at
    /// least one has, within `timeout` (0: none did).
    pub async fn died(&mut self, service: &str, timeout: Duration) -> usize {
        let armed: Vec<String> = (0..instances())
            .map(|i| instance(service, i))
            .filter(|n| self.fired_at_start.contains(n) || self.services[n].armed)
            .collect();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mut dead = 0;
            for name in &armed {
                if self.fired_at_start.remove(name) || !self.running(name) {
                    dead += 1;
                }
            }
            if dead > 0 || tokio::time::Instant::now() >= deadline {
                return dead;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Every instance that is not running is started again, unarmed; with `disarm`, so is every
    /// instance still running armed (its step is over).
    pub async fn heal(&mut self, disarm: bool) -> anyhow::Result<()> {
        for name in all_instances() {
            let armed = self.services.get(&name).is_some_and(|s| s.armed);
            if !self.running(&name) || (disarm && armed) {
                self.start_service(&name, "").await?;
            }
        }
        Ok(())
    }

    /// The instance of `service` the next client call goes to, in turn.
    fn next(&self) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed) % instances()
    }

    /// Counts a client call `instance` answered.
    pub fn answered_by(&self, instance: &str) {
        let mut answered = self
            .answered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *answered.entry(instance.to_owned()).or_default() += 1;
    }

    /// Client calls answered so far, by instance.
    pub fn answered(&self) -> BTreeMap<String, u64> {
        self.answered
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn channel(port: u16) -> anyhow::Result<Channel> {
        Ok(Channel::from_shared(format!("http://{}", loopback(port)))?
            .timeout(Duration::from_secs(10))
            .connect_lazy())
    }

    /// A client of the operations instance `i` (`None`: the next in turn), and its name.
    pub fn operations_at(
        &self,
        i: Option<usize>,
    ) -> anyhow::Result<(String, OperationsServiceClient<Channel>)> {
        let i = i.unwrap_or_else(|| self.next());
        let channel = Self::channel(self.operations_ports[i])?;
        Ok((
            instance("operations", i),
            OperationsServiceClient::new(channel),
        ))
    }

    /// A client of the next operations instance in turn.
    pub async fn operations(&self) -> anyhow::Result<OperationsServiceClient<Channel>> {
        Ok(self.operations_at(None)?.1)
    }

    /// A client of the approvals instance `i` (`None`: the next in turn), and its name.
    pub fn approvals_at(
        &self,
        i: Option<usize>,
    ) -> anyhow::Result<(String, ApprovalsServiceClient<Channel>)> {
        let i = i.unwrap_or_else(|| self.next());
        let channel = Self::channel(self.approvals_ports[i])?;
        Ok((
            instance("approvals", i),
            ApprovalsServiceClient::new(channel),
        ))
    }

    /// A sender to the ingress of inbox instance `i` (`None`: the next in turn), and its name.
    pub fn sender_at(&self, i: Option<usize>) -> (String, &Sender) {
        let i = i.unwrap_or_else(|| self.next());
        (instance("inbox", i), &self.senders[i])
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
