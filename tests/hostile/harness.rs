//! The world every hostile test attacks (operations, approvals, inbox, signer and the
//! reconciler's operator API, in-process on loopback over one fresh database), the seed, the tally
//! of answers by class, and the liveness check run after each batch.

use anyhow::Context;
use opledger_tests::inbox::{World, deposit, event_id};
use opledger_tests::signer::InProcessSigner;
use opledger_tests::{ALICE, Tenant};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

/// The environment variable that replays a run: the seed it printed.
pub const SEED_ENV: &str = "OPLEDGER_HOSTILE_SEED";

/// The account the liveness check's webhook deposits are proposed to (never one a test asserts
/// on; no witness ever attests them: they carry no chain evidence and no operator signs them).
pub const ALIVE_ACCOUNT: &str = "alive";

/// Classes that are never an acceptable answer, whatever was sent.
pub const NEVER: [&str; 3] = ["INTERNAL", "UNKNOWN", "timeout"];

/// Whether `class` is a gRPC status other than INTERNAL or UNKNOWN (as opposed to those, a
/// reset, a closed connection, an HTTP status without gRPC status, or a hang).
pub fn is_typed(class: &str) -> bool {
    !class.is_empty()
        && class.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        && !NEVER.contains(&class)
}

/// The run's seed: `OPLEDGER_HOSTILE_SEED` when set, else a random one. Printed by the caller.
pub fn seed() -> anyhow::Result<u64> {
    match std::env::var(SEED_ENV) {
        Ok(text) => text
            .trim()
            .parse()
            .with_context(|| format!("{SEED_ENV} must be a u64, got {text:?}")),
        Err(_) => Ok(rand::random()),
    }
}

/// A test's random source, seeded from the run's seed and the test's name (so that tests do not
/// all draw the same sequence) and its seed for the summary line.
pub fn rng_for(test: &str) -> anyhow::Result<(StdRng, u64)> {
    let seed = seed()?;
    eprintln!("hostile: {test} seed={seed} (replay with {SEED_ENV}={seed})");
    let salt = test.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Ok((StdRng::seed_from_u64(seed ^ salt), seed))
}

/// One gRPC port of the world.
#[derive(Debug, Clone, Copy)]
pub struct Port {
    /// A short label for messages.
    pub label: &'static str,
    /// Its address.
    pub addr: SocketAddr,
    /// The opledger service it serves (the health name it reports SERVING).
    pub service: &'static str,
}

/// The world: a fresh database, every gRPC service, the webhook ingress, tenant `acme` with a
/// funded treasury and an endpoint allowed every event type.
#[derive(Debug)]
pub struct Suite {
    /// Stack, tenant, inbox, endpoint and a webhook sender.
    pub world: World,
    /// The signer, holding `acme`'s hot wallet.
    pub signer: InProcessSigner,
    /// The reconciler's operator API.
    pub operator: SocketAddr,
    operator_task: JoinHandle<Result<(), opledger_server::serve::ServeError>>,
    /// The custodian executor's operator API.
    pub custodian: SocketAddr,
    custodian_task: JoinHandle<Result<(), opledger_server::serve::ServeError>>,
}

impl Drop for Suite {
    fn drop(&mut self) {
        self.operator_task.abort();
        self.custodian_task.abort();
    }
}

impl Suite {
    /// Starts everything; the treasury holds 10^30 wei so that liveness withdrawals never run dry.
    pub async fn start() -> anyhow::Result<Suite> {
        let world = World::start("hostile", &opledger_tests::inbox::ALL_TYPES).await?;
        world
            .stack
            .fund(
                &world.acme,
                "treasury",
                "ETH",
                "1000000000000000000000000000000",
            )
            .await?;
        let signer = InProcessSigner::start(&world.stack.db, world.acme.id).await?;
        let (operator, operator_task) = start_operator(&world, &signer).await?;
        let (custodian, custodian_task) = start_custodian(&world).await?;
        Ok(Suite {
            world,
            signer,
            operator,
            operator_task,
            custodian,
            custodian_task,
        })
    }

    /// The tenant.
    pub fn acme(&self) -> &Tenant {
        &self.world.acme
    }

    /// A credit witness of the world's database that verifies `acme`'s operators' statements
    /// (an operator credit reads no chain: its evidence endpoint is never called).
    pub async fn credit_witness(&self) -> anyhow::Result<opledger_witness::CreditWitness> {
        opledger_tests::chain::credit_witness(
            &self.world.stack,
            &["http://127.0.0.1:9"],
            1,
            &[self.acme().id],
        )
        .await
    }

    /// Operator 0's statement (trust statement version 1) over the credit `credit_id` of exactly
    /// these fields.
    pub fn statement(
        &self,
        credit_id: &[u8; 32],
        account: &str,
        asset: &str,
        amount: u128,
    ) -> anyhow::Result<opledger_proto::v1::SignedCreditStatement> {
        let tenant = self.acme().id;
        let signer = opledger_testkit::trust::operator_key(tenant, 0);
        Ok(opledger_proto::v1::SignedCreditStatement {
            operator_key_id: opledger_testkit::trust::key_id(&signer).to_hex(),
            policy_version: 1,
            signature: opledger_testkit::trust::signed_credit(
                tenant, credit_id, account, asset, amount, &signer, 1,
            )?,
        })
    }

    /// Every gRPC port with the service it serves.
    pub fn ports(&self) -> [Port; 6] {
        [
            Port {
                label: "operations",
                addr: self.world.stack.addr,
                service: opledger_operations::SERVICE_NAME,
            },
            Port {
                label: "approvals",
                addr: self.world.stack.approvals_addr,
                service: opledger_approvals::SERVICE_NAME,
            },
            Port {
                label: "signer",
                addr: self.signer.addr,
                service: opledger_signer::SERVICE_NAME,
            },
            Port {
                label: "reconciler",
                addr: self.operator,
                service: opledger_reconciler::SERVICE_NAME,
            },
            Port {
                label: "inbox",
                addr: self.world.inbox.grpc,
                service: opledger_inbox::SERVICE_NAME,
            },
            Port {
                label: "custodian",
                addr: self.custodian,
                service: CUSTODIAN_SERVICE,
            },
        ]
    }

    /// The port serving `service` (a full name such as `opledger.v1.SignerService`).
    pub fn port_of(&self, service: &str) -> Option<Port> {
        self.ports().into_iter().find(|p| p.service == service)
    }

    /// [`Suite::assert_alive`], recorded in `tally` as a failure rather than returned, so that the
    /// summary line is printed whatever happened.
    pub async fn check_alive(&self, tally: &mut Tally, after: &str) {
        if let Err(e) = self.assert_alive(after).await {
            tally.fail(&format!("alive after {after}"), format!("{e:#}"));
        }
    }

    /// After a batch: every service answers its health check with SERVING, a normal withdrawal
    /// is created and a normal signed webhook is acknowledged with 200.
    pub async fn assert_alive(&self, after: &str) -> anyhow::Result<()> {
        for port in self.ports() {
            let status = tokio::time::timeout(Duration::from_secs(10), health(port))
                .await
                .with_context(|| format!("{} health check hangs after {after}", port.label))?
                .with_context(|| format!("{} health check fails after {after}", port.label))?;
            anyhow::ensure!(
                status == ServingStatus::Serving as i32,
                "{} is not SERVING after {after}: {status}",
                port.label
            );
        }
        let stack = &self.world.stack;
        tokio::time::timeout(
            Duration::from_secs(15),
            stack.withdraw(self.acme(), "1", ALICE),
        )
        .await
        .with_context(|| format!("a normal CreateWithdrawal hangs after {after}"))?
        .with_context(|| format!("a normal CreateWithdrawal fails after {after}"))?;
        let body = deposit(&event_id(), ALIVE_ACCOUNT, "ETH", "1");
        let code = tokio::time::timeout(Duration::from_secs(15), self.world.post(&body))
            .await
            .with_context(|| format!("a normal webhook hangs after {after}"))??;
        anyhow::ensure!(code == 200, "a normal webhook answers {code} after {after}");
        Ok(())
    }
}

/// The reconciler's operator API over the reconciler's own login, with a signer client and an
/// evidence endpoint that nothing here ever calls (no pass runs, no withdrawal gets that far).
async fn start_operator(
    world: &World,
    signer: &InProcessSigner,
) -> anyhow::Result<(
    SocketAddr,
    JoinHandle<Result<(), opledger_server::serve::ServeError>>,
)> {
    let stack = &world.stack;
    let config = opledger_tests::chain::reconciler_config(stack, signer, "http://127.0.0.1:9");
    let store = opledger_store::Store::connect(
        &stack.url(opledger_testkit::ServiceRole::Reconciler),
        opledger_store::StoreConfig {
            max_connections: 4,
            ..opledger_store::StoreConfig::default()
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("reconciler role cannot connect: {}", e.log_safe()))?;
    let reconciler = opledger_reconciler::reconciler(&config, store.reconciler())
        .map_err(|e| anyhow::anyhow!("reconciler: {e}"))?;
    let routes =
        opledger_reconciler::routes(store.reconciler(), reconciler, Duration::from_secs(30));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(opledger_server::serve::serve(
        listener,
        opledger_reconciler::SERVICE_NAME,
        routes,
        std::future::pending(),
    ));
    Ok((addr, task))
}

/// The custodian executor's operator API, as its gRPC service names it.
const CUSTODIAN_SERVICE: &str = opledger_proto::v1::custodian_operator_service_server::SERVICE_NAME;

/// The custodian executor's operator API over its own login, without provider accounts (no
/// hostile request reaches a provider: every one is refused before).
async fn start_custodian(
    world: &World,
) -> anyhow::Result<(
    SocketAddr,
    JoinHandle<Result<(), opledger_server::serve::ServeError>>,
)> {
    let config = opledger_custodian_executor::Config {
        executor_id: "hostile".to_owned(),
        ..opledger_custodian_executor::Config::default()
    };
    let store = opledger_store::Store::connect(
        &world.stack.url(opledger_testkit::ServiceRole::Custodian),
        opledger_store::StoreConfig {
            max_connections: 4,
            ..opledger_store::StoreConfig::default()
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("custodian role cannot connect: {}", e.log_safe()))?;
    let routes = opledger_custodian_executor::operator_routes(&config, store.custodian())
        .map_err(|e| anyhow::anyhow!("custodian operator API: {e}"))?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(opledger_server::serve::serve(
        listener,
        CUSTODIAN_SERVICE,
        routes,
        std::future::pending(),
    ));
    Ok((addr, task))
}

/// The health status `port` reports for its service.
async fn health(port: Port) -> anyhow::Result<i32> {
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", port.addr))?
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    Ok(client
        .check(HealthCheckRequest {
            service: port.service.to_owned(),
        })
        .await?
        .into_inner()
        .status)
}

/// Answers counted by class, and the cases whose answer broke the contract.
#[derive(Debug)]
pub struct Tally {
    test: &'static str,
    seed: u64,
    started: Instant,
    counts: BTreeMap<String, u64>,
    requests: u64,
    failed: BTreeSet<String>,
    shown: Vec<String>,
}

/// How many failing cases a summary shows in full.
const SHOWN_FAILURES: usize = 12;

impl Tally {
    /// An empty tally for `test`.
    pub fn new(test: &'static str, seed: u64) -> Tally {
        Tally {
            test,
            seed,
            started: Instant::now(),
            counts: BTreeMap::new(),
            requests: 0,
            failed: BTreeSet::new(),
            shown: Vec::new(),
        }
    }

    /// Counts one answer of `class` (of `case`, named in the checks that follow). Any answer in
    /// [`NEVER`] fails the test at [`Tally::finish`], whatever the checks said.
    pub fn record(&mut self, _case: &str, class: &str) {
        self.requests += 1;
        *self.counts.entry(class.to_owned()).or_default() += 1;
    }

    /// Records that `case` broke the contract (a case counts once, with its first reason).
    pub fn fail(&mut self, case: &str, what: String) {
        if self.failed.insert(case.to_owned()) && self.shown.len() < SHOWN_FAILURES {
            self.shown.push(format!("{case}: {what}"));
        }
    }

    /// Checks `ok` for `case`, recording `what` as its failure when it does not hold.
    pub fn check(&mut self, ok: bool, case: &str, what: impl FnOnce() -> String) {
        if !ok {
            self.fail(case, what());
        }
    }

    /// Prints the summary line (and the first failures), then fails when any case broke the
    /// contract.
    pub fn finish(self) -> anyhow::Result<()> {
        let classes: Vec<String> = self
            .counts
            .iter()
            .map(|(class, n)| format!("{class}={n}"))
            .collect();
        eprintln!(
            "hostile: {} seed={} requests={} answers: {} ({} ms)",
            self.test,
            self.seed,
            self.requests,
            classes.join(" "),
            self.started.elapsed().as_millis()
        );
        for failure in &self.shown {
            eprintln!("hostile: {} FAILED {failure}", self.test);
        }
        let never: Vec<String> = NEVER
            .iter()
            .filter_map(|class| self.counts.get(*class).map(|n| format!("{class}={n}")))
            .collect();
        anyhow::ensure!(
            self.failed.is_empty() && never.is_empty(),
            "{}: {} cases broke the contract, answers never allowed: [{}] ({} requests, seed {}); \
             first: {}",
            self.test,
            self.failed.len(),
            never.join(" "),
            self.requests,
            self.seed,
            self.shown.first().map(String::as_str).unwrap_or("")
        );
        Ok(())
    }
}
