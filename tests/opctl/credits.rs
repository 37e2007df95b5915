//! `opctl credit ...` as the real binary against the real operations and approvals services and a
//! real credit witness pass (issue 25: every credit needs two principals). An operator proposes a
//! credit signed with their own OPERATOR key (a key file, as `opctl approver keygen` writes it):
//! it is PENDING, shown as pending by `opctl balance`, until the witness has verified enough
//! operators' statements; then it is CREDITED once. Above the tenant's credit threshold a second
//! operator co-signs with `opctl credit sign`. A lying operations service in front of the real
//! one shows `credit sign` another amount (opctl signs what it showed, so the service refuses the
//! statement and nothing counts) or another credit (exit 6, nothing signed or sent). An approver
//! key signs no credit. No run may print the API key or any signing key.

use super::{Opctl, Run, text};
use opledger_domain::amount::Amount;
use opledger_domain::approval::{CreditRule, SigningKey};
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::payload::AssetCode;
use opledger_proto::v1 as pb;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_proto::v1::operations_service_server::{OperationsService, OperationsServiceServer};
use opledger_testkit::trust::{approver_key, default_parts, key_id, operator_key, publish};
use opledger_tests::chain::credit_witness;
use opledger_tests::{Stack, Tenant};
use opledger_witness::{CreditWitness, Outcome};
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// Key files in a private temporary directory, removed on drop.
struct KeyFiles {
    dir: PathBuf,
}

impl KeyFiles {
    fn new() -> anyhow::Result<KeyFiles> {
        let dir = std::env::temp_dir().join(format!("opctl-credit-keys-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        Ok(KeyFiles { dir })
    }

    /// Writes `key` as `opctl approver keygen` does (64 hex digits and a newline, mode 0600).
    fn write(&self, name: &str, key: &SigningKey) -> anyhow::Result<String> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join(name);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        writeln!(file, "{}", hex::encode(key.to_bytes()))?;
        Ok(path.to_string_lossy().into_owned())
    }
}

impl Drop for KeyFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// opctl as one operator of a tenant: its operator API key, and every signing key of the test,
/// none of which any run may print.
struct Operator {
    opctl: Opctl,
    api_key: String,
    secrets: Vec<String>,
}

impl Operator {
    fn new(opctl: Opctl, tenant: &Tenant) -> Operator {
        let secrets = [
            operator_key(tenant.id, 0),
            operator_key(tenant.id, 1),
            approver_key(tenant.id, 0),
        ]
        .iter()
        .map(|k| hex::encode(k.to_bytes()))
        .collect();
        Operator {
            opctl,
            api_key: tenant.operator.clone(),
            secrets,
        }
    }

    async fn run(&self, args: &[&str]) -> anyhow::Result<Run> {
        let run = self.opctl.run(Some(&self.api_key), args).await?;
        for secret in &self.secrets {
            anyhow::ensure!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "a signing key was printed by `opctl {}`",
                args.join(" ")
            );
        }
        Ok(run)
    }

    /// `--json` `args`, expecting `code`; the result object.
    async fn json(&self, code: i32, args: &[&str]) -> anyhow::Result<Value> {
        let mut all = vec!["--json"];
        all.extend(args);
        self.run(&all).await?.expect(code)?.json()
    }

    /// The account's balance: (available, held, pending).
    async fn balance(&self) -> anyhow::Result<(String, String, String)> {
        let b = self
            .json(0, &["balance", "--account", "treasury", "--asset", "ETH"])
            .await?;
        Ok((
            text(&b["available"])?,
            text(&b["held"])?,
            text(&b["pending"])?,
        ))
    }

    /// The credit's state and operator statement count as `credit get` shows them.
    async fn credit(&self, id: &str) -> anyhow::Result<(String, u64)> {
        let c = self.json(0, &["credit", "get", id]).await?;
        Ok((
            text(&c["state"])?,
            c["operator_statements"].as_u64().unwrap_or(u64::MAX),
        ))
    }
}

/// `credit create` of `amount` ETH to the treasury under `key` (if given), signed with `file`.
fn create<'a>(amount: &'a str, key: Option<&'a str>, file: &'a str) -> Vec<&'a str> {
    let mut args = vec![
        "credit",
        "create",
        "--account",
        "treasury",
        "--asset",
        "ETH",
        "--amount",
        amount,
        "--key-file",
        file,
    ];
    if let Some(key) = key {
        args.extend(["--idempotency-key", key]);
    }
    args
}

/// The hex credit id of the operator credit proposed under `key`.
fn credit_id_of(key: &str) -> anyhow::Result<String> {
    Ok(hex::encode(IdempotencyKey::parse(key)?.digest()))
}

/// A funded tenant with 1000 in its treasury and a credit witness for it (operator credits read
/// no chain; the witness still needs a network to start).
async fn world() -> anyhow::Result<(Stack, Tenant, CreditWitness, opledger_testkit::Anvil)> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let node = opledger_testkit::Anvil::start().await?;
    let witness = credit_witness(&stack, &[&node.rpc_url()], 1, &[acme.id]).await?;
    Ok((stack, acme, witness, node))
}

/// Publishes trust statement version 2: the default keys, and ETH credits from 1000 on need two
/// operators.
async fn two_operators_from_1000(stack: &Stack, tenant: &Tenant) -> anyhow::Result<()> {
    let mut parts = default_parts(tenant.id);
    let eth = AssetCode::parse("ETH")?;
    for (min_amount, required_operators) in [(0, 1), (1000, 2)] {
        parts.credit_rules.push((
            eth.clone(),
            CreditRule {
                min_amount: Amount::new(min_amount),
                required_operators,
            },
        ));
    }
    publish(&stack.admin, tenant.id, 2, parts).await
}

/// opctl pointed at the stack, with no operator key in its environment (an empty
/// OPLEDGER_OPERATOR_KEY is no key), OPCTL_TENANT_ID naming `tenant`.
fn opctl(stack: &Stack, tenant: &Tenant) -> Opctl {
    Opctl::new(stack, tenant).env("OPLEDGER_OPERATOR_KEY", "")
}

/// The `label value` row opctl prints for a signed field.
fn row(label: &str, value: &str) -> String {
    format!("{label:<15}{value}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_credit_create_is_pending_until_the_witness_credits_it_once() -> anyhow::Result<()> {
    let (stack, acme, witness, _node) = world().await?;
    let files = KeyFiles::new()?;
    let op0 = files.write("operator-0.key", &operator_key(acme.id, 0))?;
    let op1 = files.write("operator-1.key", &operator_key(acme.id, 1))?;
    let operator = Operator::new(opctl(&stack, &acme), &acme);

    // Without a key opctl sends nothing (usage, exit 2).
    let run = operator
        .run(&[
            "credit",
            "create",
            "--account",
            "treasury",
            "--asset",
            "ETH",
            "--amount",
            "500",
        ])
        .await?
        .expect(2)?;
    assert!(run.stderr.contains("operator key"), "{}", run.stderr);

    // Proposed with operator key 0 under the tenant's current policy version (1): PENDING, not
    // spendable, shown as pending.
    let run = operator
        .run(&[
            "--json",
            "credit",
            "create",
            "--account",
            "treasury",
            "--asset",
            "ETH",
            "--amount",
            "500",
            "--key-file",
            &op0,
        ])
        .await?
        .expect(0)?;
    let created = run.json()?;
    let generated = run
        .stderr
        .split("generated idempotency key ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .ok_or_else(|| anyhow::anyhow!("the generated key is announced: {}", run.stderr))?
        .to_owned();
    let id = text(&created["credit_id"])?;
    assert_eq!(
        id,
        credit_id_of(&generated)?,
        "the credit id is the key's digest"
    );
    assert_eq!(created["state"], "PENDING");
    assert_eq!(created["kind"], "OPERATOR");
    assert_eq!(created["operator_statements"], 1);
    assert_eq!(created["replayed"], false);
    assert_eq!(created["idempotency_key_generated"], true);
    let statement = &created["statement"];
    assert_eq!(text(&statement["tenant_id"])?, acme.id.to_string());
    assert_eq!(text(&statement["credit_id"])?, id);
    assert_eq!(
        (
            text(&statement["account"])?,
            text(&statement["asset"])?,
            text(&statement["amount"])?
        ),
        ("treasury".to_owned(), "ETH".to_owned(), "500".to_owned())
    );
    assert_eq!(
        text(&statement["operator_key_id"])?,
        key_id(&operator_key(acme.id, 0)).to_hex()
    );
    assert_eq!(statement["policy_version"], 1);
    assert_eq!(created["balance"]["pending"], "500");
    assert_eq!(
        operator.balance().await?,
        ("1000".to_owned(), "0".to_owned(), "500".to_owned())
    );
    let pending = operator.json(0, &["credit", "pending"]).await?;
    assert_eq!(pending["credits"][0]["credit_id"], Value::from(id.clone()));
    assert_eq!(operator.credit(&id).await?, ("PENDING".to_owned(), 1));

    // The witness credits it, once.
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(operator.credit(&id).await?, ("CREDITED".to_owned(), 1));
    let shown = operator.run(&["credit", "get", &id]).await?.expect(0)?;
    assert!(
        shown.stdout.contains(&row("state", "CREDITED")),
        "{}",
        shown.stdout
    );
    assert_eq!(
        operator.balance().await?,
        ("1500".to_owned(), "0".to_owned(), "0".to_owned())
    );
    assert_eq!(witness.tick(16).await, []);
    let none = operator.run(&["credit", "pending"]).await?.expect(0)?;
    assert_eq!(none.stdout, "no pending credits\n");

    // A retry with the same key replays: nothing is credited again.
    let again = operator
        .json(0, &create("500", Some(&generated), &op0))
        .await?;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["state"], "CREDITED");
    assert_eq!(witness.tick(16).await, []);
    assert_eq!(
        operator.balance().await?,
        ("1500".to_owned(), "0".to_owned(), "0".to_owned())
    );
    // A credited credit takes no more statements: refused before anything is signed or sent.
    let refused = operator
        .json(1, &["credit", "sign", &id, "--key-file", &op1])
        .await?;
    assert_eq!(refused["error"]["reason"], "CREDIT_NOT_PENDING");
    assert_eq!(stack.count("credit_statements", acme.id).await?, 1);
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_credit_above_the_threshold_is_credited_only_after_a_second_operator_signs()
-> anyhow::Result<()> {
    let (stack, acme, witness, _node) = world().await?;
    two_operators_from_1000(&stack, &acme).await?;
    let files = KeyFiles::new()?;
    let op0 = files.write("operator-0.key", &operator_key(acme.id, 0))?;
    let op1 = files.write("operator-1.key", &operator_key(acme.id, 1))?;
    let operator = Operator::new(opctl(&stack, &acme), &acme);

    // Text: the fields signed are shown first, every one of them, then the credit and balance.
    let key = uuid::Uuid::new_v4().to_string();
    let id = credit_id_of(&key)?;
    let run = operator
        .run(&create("1000", Some(&key), &op0))
        .await?
        .expect(0)?;
    let (signed, result) = run
        .stdout
        .split_once("proposed\n")
        .ok_or_else(|| anyhow::anyhow!("no result: {}", run.stdout))?;
    assert!(
        signed.starts_with("signing CREDIT statement"),
        "{}",
        run.stdout
    );
    for expected in [
        row("tenant", &acme.id.to_string()),
        row("credit id", &id),
        row("account", "treasury"),
        row("asset", "ETH"),
        row("amount", "1000"),
        row("operator key", &key_id(&operator_key(acme.id, 0)).to_hex()),
        row("policy version", "2"),
    ] {
        assert!(
            signed.contains(&expected),
            "{expected:?} missing from {}",
            run.stdout
        );
    }
    assert!(!run.stdout.contains(&key), "a given key is not echoed");
    assert!(result.contains(&row("state", "PENDING")), "{}", run.stdout);
    assert!(result.contains("pending    1000\n"), "{}", run.stdout);

    // One operator is not enough at the threshold.
    assert_eq!(witness.tick(16).await, [Outcome::NoVerdict]);
    assert_eq!(operator.credit(&id).await?, ("PENDING".to_owned(), 1));
    let table = operator.run(&["credit", "pending"]).await?.expect(0)?;
    assert!(
        table.stdout.starts_with("CREDIT_ID") && table.stdout.contains(&id),
        "{}",
        table.stdout
    );

    // Operator key 1 co-signs what opctl shows it.
    let run = operator
        .run(&["--json", "credit", "sign", &id, "--key-file", &op1])
        .await?
        .expect(0)?;
    let cosigned = run.json()?;
    assert_eq!(cosigned["operator_statements"], 2);
    assert_eq!(cosigned["state"], "PENDING");
    assert_eq!(
        text(&cosigned["statement"]["operator_key_id"])?,
        key_id(&operator_key(acme.id, 1)).to_hex()
    );
    assert_eq!(cosigned["statement"]["amount"], "1000");
    assert_eq!(cosigned["statement"]["policy_version"], 2);
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(operator.credit(&id).await?, ("CREDITED".to_owned(), 2));
    assert_eq!(
        operator.balance().await?,
        ("2000".to_owned(), "0".to_owned(), "0".to_owned())
    );
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opctl_credit_signed_with_an_approver_key_is_refused_by_the_service() -> anyhow::Result<()>
{
    let (stack, acme, witness, _node) = world().await?;
    let files = KeyFiles::new()?;
    let approver = files.write("approver-0.key", &approver_key(acme.id, 0))?;
    let operator = Operator::new(opctl(&stack, &acme), &acme);

    let refused = operator.json(1, &create("500", None, &approver)).await?;
    assert_eq!(refused["error"]["reason"], "CREDIT_STATEMENT_INVALID");
    assert_eq!(
        refused["error"]["metadata"]["refusal"],
        "CREDIT_KEY_NOT_OPERATOR"
    );
    let run = operator
        .run(&create("500", None, &approver))
        .await?
        .expect(1)?;
    assert!(
        run.stderr.starts_with("error: CREDIT_STATEMENT_INVALID: "),
        "{}",
        run.stderr
    );
    assert_eq!(
        stack.count("credit_proposals", acme.id).await?,
        0,
        "nothing recorded"
    );

    // Nor may it co-sign (the key from OPLEDGER_OPERATOR_KEY this time; never printed).
    let op0 = files.write("operator-0.key", &operator_key(acme.id, 0))?;
    let two = operator.json(0, &create("500", None, &op0)).await?;
    let id = text(&two["credit_id"])?;
    let with_approver_key = Operator::new(
        opctl(&stack, &acme).env(
            "OPLEDGER_OPERATOR_KEY",
            &hex::encode(approver_key(acme.id, 0).to_bytes()),
        ),
        &acme,
    );
    let refused = with_approver_key.json(1, &["credit", "sign", &id]).await?;
    assert_eq!(refused["error"]["reason"], "CREDIT_STATEMENT_INVALID");
    assert_eq!(operator.credit(&id).await?, ("PENDING".to_owned(), 1));
    assert_eq!(
        operator.balance().await?,
        ("1000".to_owned(), "0".to_owned(), "500".to_owned())
    );
    assert_eq!(witness.tick(16).await, [Outcome::Attested]);
    assert_eq!(
        operator.balance().await?,
        ("1500".to_owned(), "0".to_owned(), "0".to_owned())
    );
    stack.assert_invariants().await
}

/// What the lying operations service answers to `GetCredit`.
#[derive(Debug, Clone)]
enum Lie {
    /// The real service's answer, unchanged.
    Honest,
    /// The asked credit's record with this amount shown instead.
    Amount(String),
    /// This other credit's record, as stored, whatever was asked.
    Other(String),
}

/// The lying operations service: forwards every call to the real one (with the caller's API key),
/// rewrites `GetCredit` answers as its [`Lie`] says and counts the `SignCredit` calls it hears.
#[derive(Debug, Clone)]
struct Liar {
    upstream: OperationsServiceClient<Channel>,
    lie: Arc<Mutex<Lie>>,
    signs: Arc<AtomicU64>,
}

/// `message` with the caller's `authorization` metadata.
fn forwarded<T, U>(from: &Request<T>, message: U) -> Request<U> {
    let mut request = Request::new(message);
    if let Some(value) = from.metadata().get("authorization") {
        request
            .metadata_mut()
            .insert("authorization", value.clone());
    }
    request
}

impl Liar {
    async fn fetch<T>(&self, from: &Request<T>, id: &str) -> Result<pb::Credit, Status> {
        let mut upstream = self.upstream.clone();
        Ok(upstream
            .get_credit(forwarded(
                from,
                pb::GetCreditRequest {
                    credit_id: id.to_owned(),
                },
            ))
            .await?
            .into_inner())
    }
}

#[tonic::async_trait]
impl OperationsService for Liar {
    async fn create_withdrawal(
        &self,
        request: Request<pb::CreateWithdrawalRequest>,
    ) -> Result<Response<pb::CreateWithdrawalResponse>, Status> {
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream
            .create_withdrawal(forwarded(&request, message))
            .await
    }

    async fn get_withdrawal(
        &self,
        request: Request<pb::GetWithdrawalRequest>,
    ) -> Result<Response<pb::Withdrawal>, Status> {
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream.get_withdrawal(forwarded(&request, message)).await
    }

    async fn list_withdrawals(
        &self,
        request: Request<pb::ListWithdrawalsRequest>,
    ) -> Result<Response<pb::ListWithdrawalsResponse>, Status> {
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream
            .list_withdrawals(forwarded(&request, message))
            .await
    }

    async fn get_balance(
        &self,
        request: Request<pb::GetBalanceRequest>,
    ) -> Result<Response<pb::Balance>, Status> {
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream.get_balance(forwarded(&request, message)).await
    }

    async fn credit_account(
        &self,
        request: Request<pb::CreditAccountRequest>,
    ) -> Result<Response<pb::CreditAccountResponse>, Status> {
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream.credit_account(forwarded(&request, message)).await
    }

    async fn sign_credit(
        &self,
        request: Request<pb::SignCreditRequest>,
    ) -> Result<Response<pb::Credit>, Status> {
        self.signs.fetch_add(1, Ordering::Relaxed);
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream.sign_credit(forwarded(&request, message)).await
    }

    async fn get_credit(
        &self,
        request: Request<pb::GetCreditRequest>,
    ) -> Result<Response<pb::Credit>, Status> {
        let asked = request.get_ref().credit_id.clone();
        let lie = self.lie.lock().map(|l| l.clone()).unwrap_or(Lie::Honest);
        let answer = match lie {
            Lie::Honest => self.fetch(&request, &asked).await?,
            Lie::Amount(amount) => pb::Credit {
                amount,
                ..self.fetch(&request, &asked).await?
            },
            Lie::Other(other) => self.fetch(&request, &other).await?,
        };
        Ok(Response::new(answer))
    }

    async fn list_pending_credits(
        &self,
        request: Request<pb::ListPendingCreditsRequest>,
    ) -> Result<Response<pb::ListPendingCreditsResponse>, Status> {
        let message = *request.get_ref();
        let mut upstream = self.upstream.clone();
        upstream
            .list_pending_credits(forwarded(&request, message))
            .await
    }
}

/// A lying operations service on a loopback port in front of a stack's real one.
struct LyingOperations {
    /// Where opctl is pointed (`--operations`).
    addr: SocketAddr,
    lie: Arc<Mutex<Lie>>,
    signs: Arc<AtomicU64>,
    server: JoinHandle<()>,
}

impl Drop for LyingOperations {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl LyingOperations {
    async fn start(stack: &Stack, lie: Lie) -> anyhow::Result<LyingOperations> {
        let liar = Liar {
            upstream: stack.client().await?,
            lie: Arc::new(Mutex::new(lie)),
            signs: Arc::new(AtomicU64::new(0)),
        };
        let (lie, signs) = (liar.lie.clone(), liar.signs.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let routes = tonic::service::Routes::new(OperationsServiceServer::new(liar));
        let server = tokio::spawn(async move {
            let _ = opledger_server::serve::serve(
                listener,
                opledger_proto::v1::operations_service_server::SERVICE_NAME,
                routes,
                std::future::pending(),
            )
            .await;
        });
        Ok(LyingOperations {
            addr,
            lie,
            signs,
            server,
        })
    }

    /// Answers as `lie` from now on.
    fn set(&self, lie: Lie) {
        if let Ok(mut current) = self.lie.lock() {
            *current = lie;
        }
    }

    /// How many `SignCredit` calls reached it.
    fn signs(&self) -> u64 {
        self.signs.load(Ordering::Relaxed)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_operations_host_gets_no_countable_credit_signature_from_opctl() -> anyhow::Result<()>
{
    let (stack, acme, witness, _node) = world().await?;
    two_operators_from_1000(&stack, &acme).await?;
    let files = KeyFiles::new()?;
    let op0 = files.write("operator-0.key", &operator_key(acme.id, 0))?;
    let op1 = files.write("operator-1.key", &operator_key(acme.id, 1))?;
    let honest = Operator::new(opctl(&stack, &acme), &acme);
    // X: the credit on operator 1's ticket. Y: the one the operations host wants co-signed.
    let x = honest.json(0, &create("1000", None, &op0)).await?;
    let y = honest.json(0, &create("900000", None, &op0)).await?;
    let (x_id, y_id) = (text(&x["credit_id"])?, text(&y["credit_id"])?);
    let liar = LyingOperations::start(&stack, Lie::Amount("1".to_owned())).await?;
    let operator = Operator::new(opctl(&stack, &acme).with("--operations", liar.addr), &acme);

    // Another amount shown for X: opctl signs what it showed (amount 1), which is not X's
    // statement; the service refuses it and nothing is recorded.
    let run = operator
        .run(&["credit", "sign", &x_id, "--key-file", &op1])
        .await?
        .expect(1)?;
    assert!(run.stdout.contains(&row("amount", "1")), "{}", run.stdout);
    assert!(
        run.stdout.contains(&row("credit id", &x_id)),
        "{}",
        run.stdout
    );
    assert!(
        run.stderr.starts_with("error: CREDIT_STATEMENT_INVALID: "),
        "{}",
        run.stderr
    );
    let refused = operator
        .json(1, &["credit", "sign", &x_id, "--key-file", &op1])
        .await?;
    assert_eq!(refused["error"]["reason"], "CREDIT_STATEMENT_INVALID");
    assert_eq!(
        refused["error"]["metadata"]["refusal"],
        "CREDIT_SIGNATURE_INVALID"
    );
    assert_eq!(liar.signs(), 2, "sent, and refused");
    assert_eq!(honest.credit(&x_id).await?, ("PENDING".to_owned(), 1));

    // Y's record when X was asked for: exit 6, nothing shown as signed, nothing sent.
    liar.set(Lie::Other(y_id.clone()));
    for json in [false, true] {
        let mut args = vec!["credit", "sign", x_id.as_str(), "--key-file", op1.as_str()];
        if json {
            args.insert(0, "--json");
        }
        let run = operator.run(&args).await?.expect(6)?;
        if json {
            let error = &run.json()?["error"];
            assert_eq!(error["reason"], "CREDIT_ID_MISMATCH");
            assert_eq!(error["metadata"]["asked"], Value::from(x_id.clone()));
            assert_eq!(error["metadata"]["answered"], Value::from(y_id.clone()));
        } else {
            assert_eq!(run.stdout, "", "nothing is shown as about to be signed");
            assert!(
                run.stderr.starts_with("error: CREDIT_ID_MISMATCH: "),
                "{}",
                run.stderr
            );
        }
    }
    assert_eq!(liar.signs(), 2, "nothing more was sent");
    assert_eq!(honest.credit(&y_id).await?, ("PENDING".to_owned(), 1));
    assert_eq!(stack.count("credit_statements", acme.id).await?, 2);
    assert_eq!(
        witness.tick(16).await,
        [Outcome::NoVerdict, Outcome::NoVerdict]
    );
    assert_eq!(
        honest.balance().await?,
        ("1000".to_owned(), "0".to_owned(), "901000".to_owned())
    );

    // The same proxy answering honestly: operator 1's statement counts and X is credited.
    liar.set(Lie::Honest);
    let cosigned = operator
        .json(0, &["credit", "sign", &x_id, "--key-file", &op1])
        .await?;
    assert_eq!(cosigned["operator_statements"], 2);
    let mut outcomes = witness.tick(16).await;
    outcomes.sort_by_key(|o| format!("{o:?}"));
    assert_eq!(outcomes, [Outcome::Attested, Outcome::NoVerdict]);
    assert_eq!(honest.credit(&x_id).await?, ("CREDITED".to_owned(), 2));
    assert_eq!(honest.credit(&y_id).await?, ("PENDING".to_owned(), 1));
    assert_eq!(
        honest.balance().await?,
        ("2000".to_owned(), "0".to_owned(), "900000".to_owned())
    );
    drop(liar);
    stack.assert_invariants().await
}
