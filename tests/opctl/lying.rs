//! The operations host, toward approvers (`THREAT-MODEL.md`): every answer its API gives an
//! approver's tool is the adversary's. A lying operations service, a gRPC server in this test in
//! front of the real one, answers opctl's `GetWithdrawal` with a harmless payload and the real
//! stored hash of the attacker's withdrawal, or with another withdrawal's record. opctl must sign
//! nothing it did not show (issue 25, finding 1): it refuses with exit 6 before the approvals
//! service hears of it, no approval row is written and the withdrawal stays REQUESTED. An honest
//! answer through the same proxy is approved (the baseline).

use super::{Opctl, text};
use opledger_proto::v1 as pb;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_proto::v1::operations_service_server::{OperationsService, OperationsServiceServer};
use opledger_testkit::FaultProxy;
use opledger_tests::{ALICE, Stack, Tenant, payload};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// The attacker's address, where the operations host's own withdrawal pays.
const ATTACKER: &str = "0x00000000000000000000000000000000deadbeef";

/// What the lying operations service answers to `GetWithdrawal`.
#[derive(Debug, Clone)]
pub enum Lie {
    /// The real service's answer, unchanged.
    Honest,
    /// The stored withdrawal's id and real stored hash, with these fields shown instead.
    Harmless(pb::WithdrawalPayload),
    /// This other withdrawal's record, as stored, whatever was asked.
    Other(String),
    /// This other withdrawal's payload and hash, under the id that was asked for.
    Relabelled(String),
}

/// The lying operations service: forwards every call to the real one (with the caller's API key)
/// and rewrites `GetWithdrawal` answers as its [`Lie`] says.
#[derive(Debug, Clone)]
struct Liar {
    upstream: OperationsServiceClient<Channel>,
    lie: Arc<Mutex<Lie>>,
    answered: Arc<AtomicU64>,
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
    fn lie(&self) -> Lie {
        self.lie.lock().map(|l| l.clone()).unwrap_or(Lie::Honest)
    }

    async fn fetch<T>(&self, from: &Request<T>, id: &str) -> Result<pb::Withdrawal, Status> {
        let mut upstream = self.upstream.clone();
        Ok(upstream
            .get_withdrawal(forwarded(
                from,
                pb::GetWithdrawalRequest {
                    withdrawal_id: id.to_owned(),
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
        let asked = request.get_ref().withdrawal_id.clone();
        let answer = match self.lie() {
            Lie::Honest => self.fetch(&request, &asked).await?,
            Lie::Harmless(shown) => pb::Withdrawal {
                payload: Some(shown),
                ..self.fetch(&request, &asked).await?
            },
            Lie::Other(other) => self.fetch(&request, &other).await?,
            Lie::Relabelled(other) => pb::Withdrawal {
                withdrawal_id: asked.clone(),
                ..self.fetch(&request, &other).await?
            },
        };
        self.answered.fetch_add(1, Ordering::Relaxed);
        Ok(Response::new(answer))
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
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream.sign_credit(forwarded(&request, message)).await
    }

    async fn get_credit(
        &self,
        request: Request<pb::GetCreditRequest>,
    ) -> Result<Response<pb::Credit>, Status> {
        let message = request.get_ref().clone();
        let mut upstream = self.upstream.clone();
        upstream.get_credit(forwarded(&request, message)).await
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

/// A lying operations service on a loopback port in front of the stack's real one.
#[derive(Debug)]
pub struct LyingOperations {
    /// Where opctl is pointed (`--operations`).
    pub addr: SocketAddr,
    lie: Arc<Mutex<Lie>>,
    answered: Arc<AtomicU64>,
    server: JoinHandle<()>,
}

impl Drop for LyingOperations {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl LyingOperations {
    /// Starts it in front of `stack`'s operations service, in clear text, or over TLS with
    /// `tls`.
    pub async fn start(
        stack: &Stack,
        lie: Lie,
        tls: Option<tonic::transport::ServerTlsConfig>,
    ) -> anyhow::Result<LyingOperations> {
        let liar = Liar {
            upstream: stack.client().await?,
            lie: Arc::new(Mutex::new(lie)),
            answered: Arc::new(AtomicU64::new(0)),
        };
        let (lie, answered) = (liar.lie.clone(), liar.answered.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let routes = tonic::service::Routes::new(OperationsServiceServer::new(liar));
        let server = tokio::spawn(async move {
            let _ = opledger_server::serve::serve_tls(
                listener,
                opledger_proto::v1::operations_service_server::SERVICE_NAME,
                routes,
                tls,
                std::future::pending(),
            )
            .await;
        });
        Ok(LyingOperations {
            addr,
            lie,
            answered,
            server,
        })
    }

    /// Answers as `lie` from now on.
    pub fn set(&self, lie: Lie) {
        if let Ok(mut current) = self.lie.lock() {
            *current = lie;
        }
    }

    /// How many `GetWithdrawal` answers it gave.
    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }
}

/// A funded tenant, opctl pointed at `liar` for operations and at a counting proxy in front of
/// the real approvals service.
async fn setup(stack: &Stack) -> anyhow::Result<(Tenant, FaultProxy)> {
    let acme = stack.tenant("acme").await?;
    stack
        .fund(&acme, "treasury", "ETH", "1000000000000000000000")
        .await?;
    let approvals = FaultProxy::start(stack.approvals_addr).await?;
    Ok((acme, approvals))
}

/// Nothing reached the approvals service, no approval row exists and every withdrawal of `ids`
/// is still REQUESTED.
async fn nothing_approved(
    stack: &Stack,
    acme: &Tenant,
    approvals: &FaultProxy,
    ids: &[&str],
) -> anyhow::Result<()> {
    assert_eq!(
        approvals.stats().connections,
        0,
        "nothing was sent to the approvals service"
    );
    assert_eq!(
        stack.count("approvals", acme.id).await?,
        0,
        "no approval row"
    );
    for id in ids {
        assert_eq!(stack.state(id).await?, "REQUESTED", "{id}");
    }
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_operations_host_showing_a_harmless_payload_gets_no_approval() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, approvals) = setup(&stack).await?;
    // The operations host's own withdrawal to the attacker, stored with its true hash (it could
    // insert it with its own login; here through the API).
    let attackers = stack
        .withdraw(&acme, "900000000000000000000", ATTACKER)
        .await?;
    let id = attackers.withdrawal_id.as_str();
    let liar = LyingOperations::start(&stack, Lie::Harmless(payload("1000", ALICE)), None).await?;
    let opctl = Opctl::new(&stack, &acme)
        .with("--operations", liar.addr)
        .with("--approvals", approvals.addr());

    // The lie is what an approver reviews.
    let shown = opctl
        .run(Some(&acme.approver), &["get", id])
        .await?
        .expect(0)?;
    assert!(
        shown.stdout.contains(ALICE) && !shown.stdout.contains(&ATTACKER[2..]),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains(&attackers.payload_hash));

    // Approving it, with or without the hash the approver copied from `get`, signs nothing.
    for reviewed in [None, Some(attackers.payload_hash.as_str())] {
        let mut args = vec!["approve", id, "--ack-risk"];
        args.extend(
            reviewed
                .map(|h| ["--payload-hash", h])
                .into_iter()
                .flatten(),
        );
        let run = opctl.run(Some(&acme.approver), &args).await?.expect(6)?;
        assert!(
            run.stderr
                .starts_with("error: DISPLAYED_PAYLOAD_MISMATCH: "),
            "{}",
            run.stderr
        );
        assert_eq!(run.stdout, "", "nothing is shown as about to be signed");
        assert!(!run.stderr.contains(&ATTACKER[2..]) && !run.stderr.contains(&ALICE[2..]));
    }
    let json = opctl
        .run(Some(&acme.approver), &["--json", "approve", id])
        .await?
        .expect(6)?
        .json()?;
    assert_eq!(json["error"]["reason"], "DISPLAYED_PAYLOAD_MISMATCH");
    assert_eq!(
        json["error"]["metadata"]["answered_hash"],
        Value::from(attackers.payload_hash.clone())
    );
    assert_ne!(
        json["error"]["metadata"]["computed_hash"],
        Value::from(attackers.payload_hash.clone())
    );
    // Nor is a rejection signed over a hash opctl did not compute.
    let run = opctl
        .run(
            Some(&acme.approver),
            &["reject", id, "--reason", "looks odd"],
        )
        .await?
        .expect(6)?;
    assert!(
        run.stderr
            .starts_with("error: DISPLAYED_PAYLOAD_MISMATCH: "),
        "{}",
        run.stderr
    );

    assert!(liar.answered() >= 5, "every answer came from the liar");
    nothing_approved(&stack, &acme, &approvals, &[id]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lying_operations_host_answering_another_withdrawal_gets_no_approval() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let (acme, approvals) = setup(&stack).await?;
    // X: what the approver was asked to approve. Y: the attacker's.
    let x = stack.withdraw(&acme, "1000", ALICE).await?;
    let y = stack
        .withdraw(&acme, "900000000000000000000", ATTACKER)
        .await?;
    let (x_id, y_id) = (x.withdrawal_id.as_str(), y.withdrawal_id.as_str());
    let liar = LyingOperations::start(&stack, Lie::Other(y_id.to_owned()), None).await?;
    let opctl = Opctl::new(&stack, &acme)
        .with("--operations", liar.addr)
        .with("--approvals", approvals.addr());

    // Y's record as stored, hash and all, when X was asked for.
    for command in [&["approve", x_id][..], &["reject", x_id, "--reason", "x"]] {
        let run = opctl.run(Some(&acme.approver), command).await?.expect(6)?;
        assert!(
            run.stderr.starts_with("error: WITHDRAWAL_ID_MISMATCH: "),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains(x_id) && run.stderr.contains(y_id));
    }
    let json = opctl
        .run(Some(&acme.approver), &["--json", "approve", x_id])
        .await?
        .expect(6)?
        .json()?;
    assert_eq!(json["error"]["reason"], "WITHDRAWAL_ID_MISMATCH");
    assert_eq!(json["error"]["metadata"]["asked"], Value::from(x_id));
    assert_eq!(json["error"]["metadata"]["answered"], Value::from(y_id));
    assert!(liar.answered() >= 3);
    nothing_approved(&stack, &acme, &approvals, &[x_id, y_id]).await?;

    // Y's payload and hash relabelled as X: the shown fields do hash to the shown hash, so opctl
    // signs "approve X whose payload hash is Y's", which counts for neither: the approvals
    // service refuses it (X's stored hash differs), nothing is approved.
    liar.set(Lie::Relabelled(y_id.to_owned()));
    let run = opctl
        .run(Some(&acme.approver), &["--json", "approve", x_id])
        .await?
        .expect(1)?;
    let error = &run.json()?["error"];
    assert_eq!(error["reason"], "PAYLOAD_HASH_MISMATCH", "{error}");
    assert_eq!(
        stack.count("approvals", acme.id).await?,
        0,
        "no approval row"
    );
    assert_eq!(stack.state(x_id).await?, "REQUESTED");
    assert_eq!(stack.state(y_id).await?, "REQUESTED");
    stack.assert_invariants().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_operations_answer_through_the_same_proxy_is_approved() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let (acme, approvals) = setup(&stack).await?;
    let w = stack.withdraw(&acme, "1000", ALICE).await?;
    let id = w.withdrawal_id.as_str();
    let liar = LyingOperations::start(&stack, Lie::Honest, None).await?;
    let opctl = Opctl::new(&stack, &acme)
        .with("--operations", liar.addr)
        .with("--approvals", approvals.addr());

    // Text: what is signed is shown first, every hashed field, then the result.
    let run = opctl
        .run(
            Some(&acme.approver),
            &["approve", id, "--payload-hash", &w.payload_hash],
        )
        .await?
        .expect(0)?;
    let shown = run
        .stdout
        .split("state ")
        .next()
        .ok_or_else(|| anyhow::anyhow!("no output"))?;
    assert!(shown.starts_with("signing APPROVE for\n"), "{}", run.stdout);
    for row in [
        format!("withdrawal     {id}\n"),
        format!("tenant         {}\n", acme.id),
        "account        treasury\n".to_owned(),
        "asset          ETH\n".to_owned(),
        "network        anvil\n".to_owned(),
        format!("destination    {ALICE}\n"),
        "memo           none\n".to_owned(),
        "amount         1000\n".to_owned(),
        "fee cap        1000000000000000\n".to_owned(),
        "policy version 1\n".to_owned(),
        format!("payload hash   {} (computed by opctl", w.payload_hash),
    ] {
        assert!(shown.contains(&row), "{row:?} missing from {}", run.stdout);
    }
    assert!(run.stdout.contains("APPROVED"), "{}", run.stdout);
    assert_eq!(stack.state(id).await?, "APPROVED");
    assert_eq!(stack.count("approvals", acme.id).await?, 1);

    // JSON: the payload signed for, field by field, and opctl's own hash.
    let other = stack.withdraw(&acme, "2000", ALICE).await?;
    let approved = opctl
        .run(
            Some(&acme.approver),
            &["--json", "approve", &other.withdrawal_id, "--ack-risk"],
        )
        .await?
        .expect(0)?
        .json()?;
    assert_eq!(approved["state"], "APPROVED");
    assert_eq!(
        approved["payload_hash"],
        Value::from(other.payload_hash.clone())
    );
    assert_eq!(text(&approved["payload"]["destination"])?, ALICE);
    assert_eq!(text(&approved["payload"]["amount"])?, "2000");
    assert_eq!(
        text(&approved["payload"]["tenant_id"])?,
        acme.id.to_string()
    );
    assert!(liar.answered() >= 2, "the answers came through the proxy");
    assert!(approvals.stats().connections >= 1);
    stack.assert_invariants().await
}
