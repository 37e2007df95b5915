//! `opctl`, the operator CLI, run as the real binary (a child process) against real services on
//! loopback, real PostgreSQL and a real anvil node: a withdrawal created, approved and watched to
//! CONFIRMED; an UNKNOWN listed and resolved only to what the chain shows; and the exit codes
//! (refused 1, usage 2, unreachable 3, unwanted final state 4, watch timeout 5). Approvals and
//! rejections are signed by opctl with the tenant's approver key 0 of `opledger_testkit::trust`
//! (OPLEDGER_APPROVER_KEY), registered in the trust statement v1 every test tenant gets. No output
//! of any run may contain the API key or the signing key it used. `lying.rs` plays the operations
//! host lying to approvers; `tls.rs` TLS and a man in the middle; `custodian.rs` the binding of
//! a `no_lookup` custodian withdrawal through the custodian executor's operator API.

mod credits;
mod custodian;
mod lying;
mod tls;

use opledger_domain::approval::{KeyId, SigningKey};
use opledger_domain::state::OperationState;
use opledger_store::broadcast::Due;
use opledger_testkit::trust::approver_key;
use opledger_testkit::{FaultMode, FaultProxy, binary_path, free_port};
use opledger_tests::chain::{Chain, broadcaster_config, reconciler_config};
use opledger_tests::signer::{NETWORK, approve};
use opledger_tests::{ALICE, BOB, Stack, Tenant};
use serde_json::Value;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Environment variables opctl reads; cleared so the test's environment cannot leak in.
const OPCTL_ENV: [&str; 11] = [
    "OPCTL_OPERATIONS_URL",
    "OPCTL_APPROVALS_URL",
    "OPCTL_RECONCILER_URL",
    "OPCTL_INBOX_URL",
    "OPCTL_CUSTODIAN_URL",
    "OPCTL_API_KEY",
    "OPCTL_APPROVER_KEY",
    "OPCTL_TENANT_ID",
    "OPCTL_CA_FILE",
    "OPLEDGER_APPROVER_KEY",
    "NO_COLOR",
];

/// One finished run of the binary.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Every stdout line as JSON.
    fn json_lines(&self) -> anyhow::Result<Vec<Value>> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| anyhow::anyhow!("{e}: {l:?}")))
            .collect()
    }

    /// The last stdout line as JSON (the result object).
    fn json(&self) -> anyhow::Result<Value> {
        self.json_lines()?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no JSON on stdout: {self:?}"))
    }

    /// Fails unless the run exited with `code`.
    fn expect(self, code: i32) -> anyhow::Result<Run> {
        anyhow::ensure!(
            self.code == code,
            "expected exit {code}, got {}:\nstdout: {}\nstderr: {}",
            self.code,
            self.stdout,
            self.stderr
        );
        Ok(self)
    }
}

/// The services opctl is pointed at, and the signing key and tenant it signs approvals with.
#[derive(Debug, Clone)]
struct Opctl {
    urls: Vec<(&'static str, String)>,
    env: Vec<(&'static str, String)>,
}

impl Opctl {
    /// Pointed at the stack's services, signing as approver key 0 of `tenant`.
    fn new(stack: &Stack, tenant: &Tenant) -> Opctl {
        Opctl {
            urls: vec![
                ("--operations", format!("http://{}", stack.addr)),
                ("--approvals", format!("http://{}", stack.approvals_addr)),
            ],
            env: Vec::new(),
        }
        .signing_with(tenant, &approver_key(tenant.id, 0))
    }

    /// No service and no signing key (local commands).
    fn local() -> Opctl {
        Opctl {
            urls: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Signs approvals with `key` (OPLEDGER_APPROVER_KEY) for `tenant` (OPCTL_TENANT_ID).
    fn signing_with(mut self, tenant: &Tenant, key: &SigningKey) -> Opctl {
        self.env
            .retain(|(name, _)| *name != "OPLEDGER_APPROVER_KEY");
        self.env.retain(|(name, _)| *name != "OPCTL_TENANT_ID");
        self.env
            .push(("OPLEDGER_APPROVER_KEY", hex::encode(key.to_bytes())));
        self.env.push(("OPCTL_TENANT_ID", tenant.id.to_string()));
        self
    }

    /// Points `flag` at `http://addr`.
    fn with(self, flag: &'static str, addr: SocketAddr) -> Opctl {
        self.with_url(flag, format!("http://{addr}"))
    }

    /// Points `flag` at `url`.
    fn with_url(mut self, flag: &'static str, url: String) -> Opctl {
        self.urls.retain(|(name, _)| *name != flag);
        self.urls.push((flag, url));
        self
    }

    /// Sets the environment variable `name` for every run.
    fn env(mut self, name: &'static str, value: &str) -> Opctl {
        self.env.retain(|(n, _)| *n != name);
        self.env.push((name, value.to_owned()));
        self
    }

    /// Starts `opctl <urls> <args>` with `key` in OPCTL_API_KEY; the run must never print it.
    fn spawn(&self, key: Option<&str>, args: &[&str]) -> JoinHandle<anyhow::Result<Run>> {
        let mut argv: Vec<String> = Vec::new();
        for (flag, url) in &self.urls {
            argv.push((*flag).to_owned());
            argv.push(url.clone());
        }
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let key = key.map(str::to_owned);
        let env = self.env.clone();
        tokio::task::spawn_blocking(move || {
            let mut command = Command::new(binary_path("opctl")?);
            for var in OPCTL_ENV {
                command.env_remove(var);
            }
            if let Some(key) = &key {
                command.env("OPCTL_API_KEY", key);
            }
            for (name, value) in &env {
                command.env(name, value);
            }
            let out = command.args(&argv).output()?;
            let run = Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8(out.stdout)?,
                stderr: String::from_utf8(out.stderr)?,
            };
            if let Some(key) = &key {
                anyhow::ensure!(
                    !run.stdout.contains(key.as_str()) && !run.stderr.contains(key.as_str()),
                    "the API key was printed by `opctl {}`",
                    args_text(&argv)
                );
            }
            for (name, value) in &env {
                anyhow::ensure!(
                    *name != "OPLEDGER_APPROVER_KEY"
                        || (!run.stdout.contains(value.as_str())
                            && !run.stderr.contains(value.as_str())),
                    "the signing key was printed by `opctl {}`",
                    args_text(&argv)
                );
            }
            Ok(run)
        })
    }

    async fn run(&self, key: Option<&str>, args: &[&str]) -> anyhow::Result<Run> {
        self.spawn(key, args).await?
    }
}

fn args_text(argv: &[String]) -> String {
    argv.join(" ")
}

/// `routes` served in-process as the service `name` on a loopback port.
async fn serve_routes(
    name: &'static str,
    routes: tonic::service::Routes,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let _ = opledger_server::serve::serve(listener, name, routes, std::future::pending()).await;
    });
    Ok((addr, server))
}

/// The reconciler's operator API served in-process on a loopback port.
async fn serve_operator_api(
    stack: &Stack,
    reconciler: opledger_reconciler::Reconciler,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let routes = opledger_reconciler::routes(
        stack.admin.reconciler(),
        reconciler,
        Duration::from_secs(30),
    );
    serve_routes(opledger_reconciler::SERVICE_NAME, routes).await
}

/// The inbox's operator API served in-process on a loopback port.
async fn serve_inbox_api(stack: &Stack) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let routes = opledger_inbox::routes(stack.admin.inbox(), Duration::from_secs(30));
    serve_routes(opledger_inbox::SERVICE_NAME, routes).await
}

/// Runs the broadcaster and its chain watcher in this test (mining a block per pass) until the
/// opctl run `cli` ends, and returns that run.
async fn drive_workers(
    cli: JoinHandle<anyhow::Result<Run>>,
    stack: &Stack,
    signer: &opledger_tests::signer::InProcessSigner,
    node: &opledger_testkit::Anvil,
) -> anyhow::Result<Run> {
    let cfg = broadcaster_config(stack, signer, &node.rpc_url());
    let broadcaster = opledger_broadcaster::broadcaster(&cfg, stack.admin.broadcaster())?;
    let watcher = opledger_broadcaster::watcher(&cfg, stack.admin.broadcaster())?;
    let started = tokio::time::Instant::now();
    while !cli.is_finished() {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(90),
            "opctl did not end"
        );
        broadcaster.tick(64, 8).await;
        watcher.tick(256).await;
        node.mine(1).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cli.await?
}

fn create_args<'a>(to: &'a str, amount: &'a str) -> Vec<&'a str> {
    vec![
        "create",
        "--account",
        "treasury",
        "--asset",
        "ETH",
        "--network",
        "anvil",
        "--to",
        to,
        "--amount",
        amount,
        "--fee-cap",
        "1000000000000000",
    ]
}

fn text(value: &Value) -> anyhow::Result<String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("not a string: {value}"))
}

const TEN_ETH: u128 = 10_000_000_000_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_creates_approves_and_watches_a_withdrawal_to_confirmed() -> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let opctl = Opctl::new(&stack, &acme);
    let paid_before = node.balance(ALICE).await?;

    let amount = "7000000000000000";
    let mut create = vec!["--json"];
    create.extend(create_args(ALICE, amount));
    let created = opctl.run(Some(&acme.client), &create).await?.expect(0)?;
    let w = created.json()?;
    let id = text(&w["withdrawal_id"])?;
    assert_eq!(w["state"], "REQUESTED");
    assert_eq!(w["replayed"], false);
    assert_eq!(w["idempotency_key_generated"], true);
    assert_eq!(text(&w["payload_hash"])?.len(), 64);
    assert!(
        created.stderr.contains("generated idempotency key"),
        "the generated key is announced: {}",
        created.stderr
    );

    let approved = opctl
        .run(Some(&acme.approver), &["approve", &id])
        .await?
        .expect(0)?;
    assert!(approved.stdout.contains("APPROVED"), "{}", approved.stdout);

    // The broadcaster and its chain watcher run in this test while opctl watches.
    let watch = opctl.spawn(
        Some(&acme.client),
        &[
            "--json",
            "watch",
            &id,
            "--until-timeout",
            "60",
            "--interval-ms",
            "100",
        ],
    );
    let watched = drive_workers(watch, &stack, &signer, &node)
        .await?
        .expect(0)?;
    let lines = watched.json_lines()?;
    let result = lines.last().ok_or_else(|| anyhow::anyhow!("no result"))?;
    assert_eq!(result["event"], "result");
    assert_eq!(result["outcome"], "confirmed");
    assert_eq!(result["final_state"], "CONFIRMED");
    let changes: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "state_change")
        .collect();
    assert!(!changes.is_empty());
    assert_eq!(
        changes.last().map(|c| c["state"].clone()),
        Some(Value::from("CONFIRMED"))
    );
    let timeline = result["timeline"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("no timeline"))?;
    assert_eq!(
        timeline.len(),
        changes.len(),
        "the timeline repeats the changes"
    );
    assert_eq!(stack.state(&id).await?, "CONFIRMED");

    let balance = opctl
        .run(
            Some(&acme.client),
            &[
                "--json",
                "balance",
                "--account",
                "treasury",
                "--asset",
                "ETH",
            ],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(
        (text(&balance["available"])?, text(&balance["held"])?),
        (
            (TEN_ETH - 7_000_000_000_000_000).to_string(),
            "0".to_owned()
        ),
        "settled once"
    );
    assert_eq!(
        node.balance(ALICE).await? - paid_before,
        7_000_000_000_000_000,
        "one transfer"
    );

    let listed = opctl
        .run(
            Some(&acme.client),
            &["--json", "list", "--state", "confirmed"],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(
        listed["withdrawals"][0]["withdrawal_id"],
        Value::from(id.clone())
    );
    let shown = opctl
        .run(Some(&acme.client), &["get", &id])
        .await?
        .expect(0)?;
    assert!(shown.stdout.contains("CONFIRMED"), "{}", shown.stdout);
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_lists_an_unknown_and_resolves_it_only_to_what_the_chain_shows() -> anyhow::Result<()>
{
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    // As in control 7: the node accepts the submission and the answer is lost on the way back.
    let proxy = FaultProxy::start(format!("127.0.0.1:{}", node.port()).parse()?).await?;
    let broadcaster = opledger_broadcaster::broadcaster(
        &broadcaster_config(&stack, &signer, &proxy.url("http")),
        stack.admin.broadcaster(),
    )?;
    let reconciler = opledger_reconciler::reconciler(
        &reconciler_config(&stack, &signer, &node.rpc_url()),
        stack.admin.reconciler(),
    )?;
    let w = stack.withdraw(&acme, "6000000000000000", BOB).await?;
    approve(&stack, &acme, &w).await?;
    proxy.set_mode(FaultMode::ForwardThenDropResponse);
    broadcaster
        .handle(&Due {
            tenant_id: acme.id,
            op_id: w.withdrawal_id.parse()?,
            state: OperationState::Approved,
            network: NETWORK.into(),
        })
        .await?;
    proxy.set_mode(FaultMode::Pass);
    assert_eq!(stack.state(&w.withdrawal_id).await?, "UNKNOWN");

    let (reconciler_addr, server) = serve_operator_api(&stack, reconciler).await?;
    let opctl = Opctl::new(&stack, &acme).with("--reconciler", reconciler_addr);
    let id = w.withdrawal_id.as_str();

    let listed = opctl
        .run(Some(&acme.operator), &["--json", "unresolved"])
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(listed["withdrawals"][0]["withdrawal_id"], Value::from(id));
    assert_eq!(listed["withdrawals"][0]["state"], "UNKNOWN");
    let table = opctl
        .run(Some(&acme.operator), &["unresolved"])
        .await?
        .expect(0)?;
    assert!(
        table.stdout.starts_with("ID") && table.stdout.contains(id),
        "{}",
        table.stdout
    );

    // The transfer is on chain: releasing the funds contradicts the evidence.
    let wrong = [
        "resolve",
        id,
        "--outcome",
        "VERIFIED_NOT_SENT",
        "--reason",
        "x",
    ];
    let refused = opctl.run(Some(&acme.operator), &wrong).await?.expect(1)?;
    assert!(
        refused.stderr.starts_with("error: EVIDENCE_MISMATCH: "),
        "{}",
        refused.stderr
    );
    let mut wrong_json = vec!["--json"];
    wrong_json.extend(wrong);
    let refused = opctl
        .run(Some(&acme.operator), &wrong_json)
        .await?
        .expect(1)?
        .json()?;
    assert_eq!(refused["error"]["reason"], "EVIDENCE_MISMATCH");
    assert_eq!(refused["error"]["code"], "FAILED_PRECONDITION");
    assert!(refused["error"]["metadata"]["evidence"].is_string());
    assert_eq!(stack.state(id).await?, "UNKNOWN");
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?.1,
        6_000_000_000_000_000,
        "still held"
    );

    // At final depth the evidence supports CONFIRMED.
    node.mine(opledger_tests::chain::CONFIRMATIONS - 1).await?;
    let resolved = opctl
        .run(
            Some(&acme.operator),
            &[
                "--json",
                "resolve",
                id,
                "--outcome",
                "confirmed",
                "--reason",
                "receipt checked on our node",
            ],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(resolved["state"], "CONFIRMED");
    let watched = opctl
        .run(
            Some(&acme.client),
            &["--json", "watch", id, "--until-timeout", "10"],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(watched["final_state"], "CONFIRMED");
    let listed = opctl
        .run(Some(&acme.operator), &["--json", "unresolved"])
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(listed["withdrawals"], Value::Array(vec![]));
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (TEN_ETH - 6_000_000_000_000_000, 0),
        "settled once"
    );
    server.abort();
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_exit_codes_say_how_a_command_ended() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "1000000000000000000")
        .await?;
    let (inbox_addr, inbox) = serve_inbox_api(&stack).await?;
    let opctl = Opctl::new(&stack, &acme).with("--inbox", inbox_addr);
    let nobody = uuid::Uuid::now_v7().to_string();

    // 2: usage errors, found by clap before anything is sent.
    for args in [
        &["create", "--account", "treasury"][..],
        &["resolve", &nobody, "--outcome", "PAID", "--reason", "x"],
        &["get", "not-a-withdrawal-id"],
        &["list", "--state", "PAID"],
        &["frobnicate"],
    ] {
        let run = opctl.run(Some(&acme.client), args).await?.expect(2)?;
        assert!(run.stderr.contains("error:"), "{}", run.stderr);
    }
    let mut low_entropy = create_args(ALICE, "1");
    low_entropy.extend(["--idempotency-key", "aaaaaaaaaaaaaaaaaaaaaaaa"]);
    let run = opctl
        .run(Some(&acme.client), &low_entropy)
        .await?
        .expect(2)?;
    assert!(
        !run.stderr.contains("aaaaaaaaaaaaaaaaaaaaaaaa"),
        "{}",
        run.stderr
    );

    // 3: nothing listening.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let run = opctl
        .run(Some(&acme.client), &["--operations", &dead, "get", &nobody])
        .await?
        .expect(3)?;
    assert!(
        run.stderr
            .starts_with("error: UNAVAILABLE: cannot connect to the operations service")
    );
    let run = opctl
        .run(
            Some(&acme.client),
            &["--json", "--operations", &dead, "get", &nobody],
        )
        .await?
        .expect(3)?;
    assert_eq!(run.json()?["error"]["code"], "UNAVAILABLE");

    // 1: a bad API key (given as a flag here) is refused with its reason and never printed.
    let bogus = "olk_0000000000000000_notarealsecretnotarealsecret";
    for json in [false, true] {
        let mut args = vec!["--api-key", bogus, "get", &nobody];
        if json {
            args.insert(0, "--json");
        }
        let run = opctl.run(None, &args).await?.expect(1)?;
        assert!(!run.stdout.contains(bogus) && !run.stderr.contains(bogus));
        if json {
            assert_eq!(run.json()?["error"]["reason"], "CREDENTIALS_INVALID");
        } else {
            assert!(
                run.stderr.starts_with("error: CREDENTIALS_INVALID: "),
                "{}",
                run.stderr
            );
        }
    }
    let run = opctl.run(None, &["get", &nobody]).await?.expect(1)?;
    assert!(run.stderr.starts_with("error: CREDENTIALS_MISSING: "));
    let run = opctl
        .run(Some(&acme.client), &["get", &nobody])
        .await?
        .expect(1)?;
    assert!(
        run.stderr.starts_with("error: NOT_FOUND: "),
        "{}",
        run.stderr
    );

    // Idempotency: the same key replays, a changed payload is refused; the key is never printed
    // in an error.
    let key = uuid::Uuid::new_v4().to_string();
    let mut first = vec!["--json"];
    first.extend(create_args(ALICE, "1000"));
    first.extend(["--idempotency-key", &key]);
    let one = opctl.run(Some(&acme.client), &first).await?.expect(0)?;
    assert!(!one.stderr.contains(&key), "a given key is not echoed");
    let one = one.json()?;
    let again = opctl
        .run(Some(&acme.client), &first)
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["withdrawal_id"], one["withdrawal_id"]);
    let mut changed = vec!["--json"];
    changed.extend(create_args(ALICE, "2000"));
    changed.extend(["--idempotency-key", &key]);
    let run = opctl.run(Some(&acme.client), &changed).await?.expect(1)?;
    assert!(!run.stdout.contains(&key) && !run.stderr.contains(&key));
    let error = &run.json()?["error"];
    assert_eq!(error["reason"], "IDEMPOTENCY_KEY_REUSED");
    assert!(
        error["violations"].to_string().contains("payload.amount"),
        "{error}"
    );
    let mut too_much = create_args(BOB, "5000000000000000000000");
    let other_key = uuid::Uuid::new_v4().to_string();
    too_much.extend(["--idempotency-key", &other_key]);
    let run = opctl.run(Some(&acme.client), &too_much).await?.expect(1)?;
    assert!(
        run.stderr.starts_with("error: INSUFFICIENT_FUNDS: "),
        "{}",
        run.stderr
    );

    // A second withdrawal of the same destination and amount under a generated key: flagged; it
    // is approved only with --ack-risk. A client key may not approve at all.
    let generated = opctl
        .run(Some(&acme.client), &create_args(ALICE, "1000"))
        .await?
        .expect(0)?;
    assert!(
        generated.stdout.starts_with("idempotency key  "),
        "{}",
        generated.stdout
    );
    let two = opctl
        .run(
            Some(&acme.client),
            &["--json", "list", "--state", "requested"],
        )
        .await?
        .expect(0)?
        .json()?;
    let flagged = two["withdrawals"]
        .as_array()
        .and_then(|ws| {
            ws.iter()
                .find(|w| w["withdrawal_id"] != one["withdrawal_id"])
        })
        .ok_or_else(|| anyhow::anyhow!("second withdrawal not listed: {two}"))?;
    assert_eq!(flagged["risk_flags"][0], "SAME_DESTINATION_AND_AMOUNT");
    let flagged_id = text(&flagged["withdrawal_id"])?;
    let run = opctl
        .run(Some(&acme.client), &["approve", &flagged_id, "--ack-risk"])
        .await?
        .expect(1)?;
    assert!(
        run.stderr.starts_with("error: ROLE_NOT_ALLOWED: "),
        "{}",
        run.stderr
    );
    let run = opctl
        .run(Some(&acme.approver), &["approve", &flagged_id])
        .await?
        .expect(1)?;
    assert!(
        run.stderr
            .starts_with("error: RISK_FLAGS_NOT_ACKNOWLEDGED: ")
            && run.stderr.contains("--ack-risk"),
        "{}",
        run.stderr
    );
    assert_eq!(stack.state(&flagged_id).await?, "REQUESTED");
    let approved = opctl
        .run(
            Some(&acme.approver),
            &["--json", "approve", &flagged_id, "--ack-risk"],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(approved["state"], "APPROVED");
    assert_eq!(
        approved["acknowledged_risk_flags"][0],
        "SAME_DESTINATION_AND_AMOUNT"
    );

    // 4: watch ends in an unwanted final state.
    let first_id = text(&one["withdrawal_id"])?;
    let rejected = opctl
        .run(
            Some(&acme.approver),
            &[
                "--json",
                "reject",
                &first_id,
                "--reason",
                "duplicate request",
            ],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(rejected["state"], "REJECTED");
    let watched = opctl
        .run(Some(&acme.client), &["--json", "watch", &first_id])
        .await?
        .expect(4)?
        .json()?;
    assert_eq!(
        (watched["outcome"].clone(), watched["final_state"].clone()),
        (Value::from("unwanted_final_state"), Value::from("REJECTED"))
    );

    // 5: watch times out on a withdrawal nobody moves (text mode, not a terminal: one line per
    // change, then the timeline).
    let mut waiting = create_args(BOB, "3000");
    waiting.insert(0, "--json");
    let waiting = opctl
        .run(Some(&acme.client), &waiting)
        .await?
        .expect(0)?
        .json()?;
    let waiting_id = text(&waiting["withdrawal_id"])?;
    let run = opctl
        .run(
            Some(&acme.client),
            &[
                "watch",
                &waiting_id,
                "--until-timeout",
                "1",
                "--interval-ms",
                "200",
            ],
        )
        .await?
        .expect(5)?;
    assert!(run.stdout.contains("REQUESTED (version"), "{}", run.stdout);
    assert!(
        run.stdout.contains("timed out in state REQUESTED"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains('\r'),
        "no progress line off a terminal"
    );

    // The inbox's operator API: nothing to show; an unknown item is NOT_FOUND (1).
    let run = opctl
        .run(Some(&acme.operator), &["inbox", "issues"])
        .await?
        .expect(0)?;
    assert_eq!(run.stdout, "no inbox issues\n");
    let run = opctl
        .run(
            Some(&acme.operator),
            &["--json", "inbox", "replay", "424242", "--reason", "fixed"],
        )
        .await?
        .expect(1)?;
    assert_eq!(run.json()?["error"]["reason"], "NOT_FOUND");

    let help = opctl.run(None, &["--help"]).await?.expect(0)?;
    for code in [
        "0  success",
        "1  the service refused",
        "2  usage",
        "3  cannot connect",
        "4  watch",
        "5  watch",
        "6  approve, reject",
    ] {
        assert!(help.stdout.contains(code), "--help documents {code}");
    }
    inbox.abort();
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_demo_pushes_one_withdrawal_to_confirmed_and_prints_its_trace_id()
-> anyhow::Result<()> {
    let Chain {
        stack,
        acme,
        node,
        signer,
    } = Chain::start().await?;
    let opctl = Opctl::new(&stack, &acme);
    let paid_before = node.balance(BOB).await?;
    let demo = opctl.spawn(
        Some(&acme.client),
        &[
            "demo",
            "--to",
            BOB,
            "--approver-key",
            &acme.approver,
            "--until-timeout",
            "60",
        ],
    );
    let run = drive_workers(demo, &stack, &signer, &node)
        .await?
        .expect(0)?;
    assert!(
        run.stdout.contains("created") && run.stdout.contains("CONFIRMED"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(&acme.approver) && !run.stderr.contains(&acme.approver));
    let trace = run
        .stderr
        .lines()
        .find_map(|l| l.split("trace id ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| anyhow::anyhow!("no trace id printed: {}", run.stderr))?;
    assert_eq!(trace.len(), 32);
    assert!(trace.bytes().all(|b| b.is_ascii_hexdigit()));
    let paid = node.balance(BOB).await? - paid_before;
    assert!(
        (1_000_000_000_000_000..1_000_000_000_000_000 + 1_000).contains(&paid),
        "one transfer of the demo amount (plus its jitter): {paid}"
    );
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_approver_keygen_writes_a_private_key_file_once() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("opctl-keygen-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("approver.key");
    let path_text = path.to_string_lossy().into_owned();
    let opctl = Opctl::local();
    let made = opctl
        .run(None, &["--json", "approver", "keygen", "--out", &path_text])
        .await?
        .expect(0)?
        .json()?;
    let seed_text = std::fs::read_to_string(&path)?;
    let seed_hex = seed_text.trim_end_matches('\n');
    assert_eq!(seed_text.len(), 65, "64 hex digits and a newline");
    assert!(seed_hex.bytes().all(|b| b.is_ascii_hexdigit()));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)?.permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    }
    let mut seed = [0_u8; 32];
    hex::decode_to_slice(seed_hex, &mut seed)?;
    let key = SigningKey::from_bytes(&seed);
    assert_eq!(
        made["public_key"],
        hex::encode(key.verifying_key().as_bytes())
    );
    assert_eq!(
        made["key_id"],
        KeyId::of(&key.verifying_key()).to_hex(),
        "the printed key id is KeyId::of the public key"
    );
    assert!(
        !made.to_string().contains(seed_hex),
        "the private key is not printed"
    );

    // Never overwritten: a usage error, and the file keeps its key.
    let again = opctl
        .run(None, &["approver", "keygen", "--out", &path_text])
        .await?
        .expect(2)?;
    assert!(
        again.stderr.contains("refusing to overwrite"),
        "{}",
        again.stderr
    );
    assert_eq!(std::fs::read_to_string(&path)?, seed_text);

    // Two keys are different keys.
    let other = dir.join("other.key");
    opctl
        .run(
            None,
            &["approver", "keygen", "--out", &other.to_string_lossy()],
        )
        .await?
        .expect(0)?;
    assert_ne!(std::fs::read_to_string(&other)?, seed_text);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_approve_with_a_key_outside_the_registry_is_refused_with_approver_key_unknown()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "1000000000000000000")
        .await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    let registered = Opctl::new(&stack, &acme);

    // The policy opctl signs under: version 1 of the trust statement.
    let policy = registered
        .run(
            Some(&acme.approver),
            &["--json", "policy", "--asset", "ETH"],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(policy["policy_version"], 1);

    // A well-formed key the tenant's trust statement does not list.
    let stranger = SigningKey::from_bytes(&[0x5a; 32]);
    let unknown = registered.clone().signing_with(&acme, &stranger);
    let run = unknown
        .run(Some(&acme.approver), &["approve", &w.withdrawal_id])
        .await?
        .expect(1)?;
    assert!(
        run.stderr.starts_with("error: APPROVER_KEY_UNKNOWN: "),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains(&KeyId::of(&stranger.verifying_key()).to_hex()),
        "the refused key id is named: {}",
        run.stderr
    );
    let json = unknown
        .run(
            Some(&acme.approver),
            &["--json", "approve", &w.withdrawal_id],
        )
        .await?
        .expect(1)?
        .json()?;
    assert_eq!(json["error"]["reason"], "APPROVER_KEY_UNKNOWN");
    assert_eq!(stack.state(&w.withdrawal_id).await?, "REQUESTED");

    // Nor may it reject.
    let run = unknown
        .run(
            Some(&acme.approver),
            &["reject", &w.withdrawal_id, "--reason", "not mine"],
        )
        .await?
        .expect(1)?;
    assert!(
        run.stderr.starts_with("error: APPROVER_KEY_UNKNOWN: "),
        "{}",
        run.stderr
    );

    // Without any signing key opctl sends nothing (usage, exit 2).
    let mut keyless = registered.clone();
    keyless
        .env
        .retain(|(name, _)| *name != "OPLEDGER_APPROVER_KEY");
    let run = keyless
        .run(Some(&acme.approver), &["approve", &w.withdrawal_id])
        .await?
        .expect(2)?;
    assert!(run.stderr.contains("approver key"), "{}", run.stderr);

    // The registered key approves; signing for another tenant id is refused before anything is
    // sent: the payload opctl hashes names that tenant, so its hash is not the withdrawal's.
    let other_tenant = Tenant {
        id: opledger_domain::ids::TenantId::new(),
        ..acme.clone()
    };
    let run = registered
        .clone()
        .signing_with(&other_tenant, &approver_key(acme.id, 0))
        .run(Some(&acme.approver), &["approve", &w.withdrawal_id])
        .await?
        .expect(6)?;
    assert!(
        run.stderr
            .starts_with("error: DISPLAYED_PAYLOAD_MISMATCH: ")
            && run.stderr.contains(&other_tenant.id.to_string()),
        "{}",
        run.stderr
    );
    let approved = registered
        .run(
            Some(&acme.approver),
            &["--json", "approve", &w.withdrawal_id],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(approved["state"], "APPROVED");
    assert_eq!(approved["policy_version"], 1);
    assert_eq!(
        approved["approver_key_id"],
        KeyId::of(&approver_key(acme.id, 0).verifying_key()).to_hex()
    );
    stack.assert_invariants().await
}
