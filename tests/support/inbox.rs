//! The webhook inbox in tests: the service in-process (or its configuration for a real process),
//! endpoints with their secrets, and a Standard Webhooks sender over real HTTP on loopback.

use crate::{Stack, Tenant};
use anyhow::Context;
use opledger_inbox::Config;
use opledger_inbox::keys::KeyRing;
use opledger_webhook::seal::BodyKey;
use opledger_webhook::secret::SigningSecret;
use opledger_webhook::verify::sign_v1;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The body-encryption key of every test inbox (`id 1`), in configuration form.
pub fn body_keys() -> String {
    BodyKey::from_bytes(1, &[0x42; 32])
        .to_config_string()
        .as_str()
        .to_owned()
}

/// The ring of [`body_keys`], for sealing endpoint secrets in setup.
pub fn ring() -> anyhow::Result<KeyRing> {
    let key = BodyKey::parse(&body_keys()).map_err(|_| anyhow::anyhow!("test body key"))?;
    KeyRing::new(vec![key]).context("empty ring")
}

/// A test configuration: fast polling and retries, the test key.
pub fn config(stack: &Stack) -> Config {
    let defaults = Config::default();
    Config {
        base: opledger_config::ServiceBase {
            database_url: opledger_config::DatabaseUrl(
                stack.url(opledger_testkit::ServiceRole::Inbox),
            ),
            ..defaults.base.clone()
        },
        body_keys: opledger_config::Secret(body_keys()),
        poll_interval_ms: 20,
        retry_base_ms: 50,
        max_attempts: 3,
        endpoint_cache_ttl_secs: 1,
        ..defaults
    }
}

/// The inbox service running in-process.
#[derive(Debug)]
pub struct Inbox {
    /// The ingress address.
    pub http: SocketAddr,
    /// The operator API address.
    pub grpc: SocketAddr,
    /// The metrics address.
    pub metrics: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), opledger_inbox::StartError>>>,
}

async fn loopback() -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    Ok((listener, addr))
}

impl Inbox {
    /// Starts the inbox with [`config`].
    pub async fn start(stack: &Stack) -> anyhow::Result<Inbox> {
        Inbox::start_with(stack, config(stack)).await
    }

    /// Starts the inbox with `config` (its listen addresses are ignored: loopback, free ports).
    pub async fn start_with(stack: &Stack, config: Config) -> anyhow::Result<Inbox> {
        config.validate()?;
        let store = opledger_store::Store::connect(
            &stack.url(opledger_testkit::ServiceRole::Inbox),
            opledger_server::store_config(&config.base),
        )
        .await
        .map_err(|e| anyhow::anyhow!("app role cannot connect: {}", e.log_safe()))?;
        let (grpc, grpc_addr) = loopback().await?;
        let (http, http_addr) = loopback().await?;
        let (metrics, metrics_addr) = loopback().await?;
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let runtime = opledger_server::Runtime::new(
                opledger_inbox::SERVICE_NAME,
                grpc,
                metrics,
                store,
                config.base.listener.limits(),
            );
            opledger_inbox::serve(&config, runtime, http, async move {
                let _ = rx.await;
            })
            .await
        });
        Ok(Inbox {
            http: http_addr,
            grpc: grpc_addr,
            metrics: metrics_addr,
            stop: Some(tx),
            task: Some(task),
        })
    }

    /// A client of the operator API.
    pub async fn operator(
        &self,
    ) -> anyhow::Result<
        opledger_proto::v1::inbox_service_client::InboxServiceClient<tonic::transport::Channel>,
    > {
        Ok(
            opledger_proto::v1::inbox_service_client::InboxServiceClient::connect(format!(
                "http://{}",
                self.grpc
            ))
            .await?,
        )
    }

    /// The value of one un-labelled or labelled sample of `/metrics`, e.g.
    /// `opledger_inbox_requests_total{outcome="quarantined"}`.
    pub async fn metric(&self, sample: &str) -> anyhow::Result<f64> {
        scrape(self.metrics, sample).await
    }

    /// Stops the service and waits for it.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await??;
        }
        Ok(())
    }
}

/// Reads one sample from a Prometheus text endpoint.
pub async fn scrape(addr: SocketAddr, sample: &str) -> anyhow::Result<f64> {
    let text = opledger_testkit::http_client()
        .build()?
        .get(format!("http://{addr}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix(sample)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
        })
        .with_context(|| format!("no sample {sample} in /metrics"))
}

/// An endpoint of a tenant with its first secret.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `whe_...`.
    pub id: String,
    /// Provider label.
    pub source: String,
    /// Its current secret.
    pub secret: SigningSecret,
}

/// Creates an endpoint for `tenant` that may send `types`.
pub async fn endpoint(
    stack: &Stack,
    tenant: &Tenant,
    source: &str,
    types: &[&str],
) -> anyhow::Result<Endpoint> {
    let id = opledger_store::inbox::new_endpoint_id();
    let (first, secret) = ring()?.new_hmac_secret(&id).context("seal")?;
    let types: Vec<String> = types.iter().map(|t| (*t).to_owned()).collect();
    stack
        .admin
        .create_webhook_endpoint_with_id(&id, tenant.id, source, &types, &first)
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok(Endpoint {
        id,
        source: source.to_owned(),
        secret,
    })
}

/// Every event type.
pub const ALL_TYPES: [&str; 3] = ["deposit.confirmed", "transfer.status", "kyt.result"];

/// Sends Standard Webhooks requests to an ingress.
#[derive(Debug, Clone)]
pub struct Sender {
    /// The ingress address.
    pub http: SocketAddr,
    client: reqwest::Client,
}

/// An answer: status code and body text.
pub type Answer = (u16, String);

impl Sender {
    /// A sender to the ingress at `http`.
    pub fn new(http: SocketAddr) -> Sender {
        Sender {
            http,
            client: opledger_testkit::http_client()
                .timeout(Duration::from_secs(15))
                .build()
                .unwrap_or_default(),
        }
    }

    /// The URL of an endpoint.
    pub fn url(&self, endpoint: &Endpoint) -> String {
        format!(
            "http://{}/webhooks/{}/{}",
            self.http, endpoint.source, endpoint.id
        )
    }

    /// Signs `body` with the endpoint's secret now and posts it.
    pub async fn send(&self, endpoint: &Endpoint, id: &str, body: &str) -> anyhow::Result<Answer> {
        let now = chrono::Utc::now().timestamp();
        self.send_signed(endpoint, &endpoint.secret, id, now, body)
            .await
    }

    /// Posts `body` signed with `secret` at `timestamp`.
    pub async fn send_signed(
        &self,
        endpoint: &Endpoint,
        secret: &SigningSecret,
        id: &str,
        timestamp: i64,
        body: &str,
    ) -> anyhow::Result<Answer> {
        let signature = sign_v1(secret, id, timestamp, body.as_bytes());
        self.send_raw(
            &self.url(endpoint),
            &[
                ("webhook-id", id.to_owned()),
                ("webhook-timestamp", timestamp.to_string()),
                ("webhook-signature", signature),
            ],
            body.as_bytes().to_vec(),
        )
        .await
    }

    /// Posts `body` to `url` with exactly these headers.
    pub async fn send_raw(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: Vec<u8>,
    ) -> anyhow::Result<Answer> {
        let mut request = self
            .client
            .post(url)
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.body(body).send().await?;
        let status = response.status().as_u16();
        Ok((status, response.text().await?))
    }
}

/// A `deposit.confirmed` body.
pub fn deposit(deposit_id: &str, account: &str, asset: &str, amount: &str) -> String {
    serde_json::json!({
        "type": "deposit.confirmed",
        "timestamp": "2026-12-01T00:00:00Z",
        "data": {"deposit_id": deposit_id, "account": account, "asset": asset, "amount": amount}
    })
    .to_string()
}

/// A `transfer.status` body.
pub fn transfer_status(operation_id: &str, status: &str, tx_hash: &str) -> String {
    serde_json::json!({
        "type": "transfer.status",
        "data": {"operation_id": operation_id, "status": status, "tx_hash": tx_hash}
    })
    .to_string()
}

/// A `kyt.result` body.
pub fn kyt(operation_id: &str, result: &str, provider_ref: &str) -> String {
    serde_json::json!({
        "type": "kyt.result",
        "data": {"operation_id": operation_id, "result": result, "provider_ref": provider_ref}
    })
    .to_string()
}

/// A fresh event id.
pub fn event_id() -> String {
    format!("msg_{}", uuid::Uuid::new_v4().simple())
}

/// Polls `check` until it returns true or `timeout` passes.
pub async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "condition not reached in {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Rows of an inbox table for a tenant with an optional extra condition (test constants only).
pub async fn rows(
    stack: &Stack,
    table: &'static str,
    condition: &'static str,
    tenant: opledger_domain::ids::TenantId,
) -> anyhow::Result<i64> {
    let sql = format!("SELECT count(*) FROM {table} WHERE tenant_id = $1 {condition}");
    let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant.as_uuid())
        .fetch_one(stack.admin.pool())
        .await?;
    Ok(n)
}

/// Pending (proposed, neither attested nor refused) credits of a tenant's account: what its
/// deposits added that is not spendable yet (0 when there is none).
pub async fn pending(
    stack: &Stack,
    tenant: opledger_domain::ids::TenantId,
    account: &str,
    asset: &str,
) -> anyhow::Result<u128> {
    let balance = stack
        .admin
        .balance(
            tenant,
            &opledger_domain::payload::AccountName::parse(account)?,
            &opledger_domain::payload::AssetCode::parse(asset)?,
        )
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok(balance.map_or(0, |b| b.pending.get()))
}

/// How many deposit credits were proposed for `deposit_id` from the endpoint source `source`
/// (at most one: a deposit id is proposed once, whatever event carried it).
pub async fn proposals(
    stack: &Stack,
    tenant: opledger_domain::ids::TenantId,
    source: &str,
    deposit_id: &str,
) -> anyhow::Result<i64> {
    let credit_id = opledger_store::inbox::deposit_credit_digest(source, deposit_id);
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM credit_proposals \
         WHERE tenant_id = $1 AND credit_id = $2 AND kind = 'DEPOSIT'",
    )
    .bind(tenant.as_uuid())
    .bind(credit_id.as_slice())
    .fetch_one(stack.admin.pool())
    .await?;
    Ok(n)
}

/// One inbox test's world: a stack, a tenant `acme`, the inbox in-process, one endpoint of
/// `acme` and a sender pointed at the ingress.
#[derive(Debug)]
pub struct World {
    /// The stack (database, operations and approvals services).
    pub stack: Stack,
    /// The tenant.
    pub acme: Tenant,
    /// The inbox.
    pub inbox: Inbox,
    /// The tenant's endpoint.
    pub ep: Endpoint,
    /// A sender to the ingress.
    pub sender: Sender,
}

impl World {
    /// A world whose endpoint is `source` and may send `types`.
    pub async fn start(source: &str, types: &[&str]) -> anyhow::Result<World> {
        let stack = Stack::start().await?;
        let acme = stack.tenant("acme").await?;
        let inbox = Inbox::start(&stack).await?;
        let ep = endpoint(&stack, &acme, source, types).await?;
        let sender = Sender::new(inbox.http);
        Ok(World {
            stack,
            acme,
            inbox,
            ep,
            sender,
        })
    }

    /// Posts `body` under a fresh event id; returns the status code.
    pub async fn post(&self, body: &str) -> anyhow::Result<u16> {
        Ok(self.sender.send(&self.ep, &event_id(), body).await?.0)
    }

    /// Posts `body` under `id`; returns status and answer text.
    pub async fn post_as(&self, id: &str, body: &str) -> anyhow::Result<Answer> {
        self.sender.send(&self.ep, id, body).await
    }

    /// Rows of an inbox table for the tenant matching `condition` (test constants only).
    pub async fn rows(&self, table: &'static str, condition: &'static str) -> anyhow::Result<i64> {
        rows(&self.stack, table, condition, self.acme.id).await
    }

    /// Waits until exactly `n` rows of `table` match `condition`.
    pub async fn wait_rows(
        &self,
        table: &'static str,
        condition: &'static str,
        n: i64,
    ) -> anyhow::Result<()> {
        eventually(Duration::from_secs(15), || async {
            Ok(self.rows(table, condition).await? == n)
        })
        .await
        .with_context(|| format!("waiting for {n} rows of {table} {condition}"))
    }

    /// (available, held) of the tenant's `treasury` ETH account.
    pub async fn treasury(&self) -> anyhow::Result<(u128, u128)> {
        self.stack.balance(self.acme.id, "treasury", "ETH").await
    }

    /// Pending credits of the tenant's `treasury` ETH account ([`pending`]).
    pub async fn pending(&self) -> anyhow::Result<u128> {
        pending(&self.stack, self.acme.id, "treasury", "ETH").await
    }

    /// The credit id the inbox proposes a deposit of this world's endpoint under.
    pub fn deposit_credit_id(&self, deposit_id: &str) -> [u8; 32] {
        opledger_store::inbox::deposit_credit_digest(&self.ep.source, deposit_id)
    }

    /// How many credits were proposed for `deposit_id` of this world's endpoint ([`proposals`]).
    pub async fn proposals(&self, deposit_id: &str) -> anyhow::Result<i64> {
        proposals(&self.stack, self.acme.id, &self.ep.source, deposit_id).await
    }

    /// Operator 0 of the tenant signs, through the operations API, the pending credit of a
    /// deposit without chain evidence (of `amount` ETH to `account`): what lets a witness
    /// attest it.
    pub async fn sign_deposit(
        &self,
        deposit_id: &str,
        account: &str,
        amount: u128,
    ) -> anyhow::Result<opledger_proto::v1::Credit> {
        let credit_id = self.deposit_credit_id(deposit_id);
        let signer = opledger_testkit::trust::operator_key(self.acme.id, 0);
        let statement = opledger_proto::v1::SignedCreditStatement {
            operator_key_id: opledger_testkit::trust::key_id(&signer).to_hex(),
            policy_version: 1,
            signature: opledger_testkit::trust::signed_credit(
                self.acme.id,
                &credit_id,
                account,
                "ETH",
                amount,
                &signer,
                1,
            )?,
        };
        let mut client = self.stack.client().await?;
        Ok(client
            .sign_credit(crate::authed(
                &self.acme.operator,
                opledger_proto::v1::SignCreditRequest {
                    credit_id: hex::encode(credit_id),
                    statement: Some(statement),
                },
            ))
            .await?
            .into_inner())
    }

    /// `status:outcome` of every work item, oldest first.
    pub async fn outcomes(&self) -> anyhow::Result<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT status || ':' || COALESCE(outcome, '') FROM inbox_work WHERE tenant_id = $1 \
             ORDER BY inbox_id",
        )
        .bind(self.acme.id.as_uuid())
        .fetch_all(self.stack.admin.pool())
        .await?;
        Ok(rows.into_iter().map(|(s,)| s).collect())
    }

    /// Stops the inbox.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.inbox.stop().await
    }
}

/// A withdrawal of `tenant` read back through the API (for approving it in setup).
pub async fn withdrawal(
    stack: &Stack,
    tenant: &Tenant,
    withdrawal_id: &str,
) -> anyhow::Result<opledger_proto::v1::Withdrawal> {
    let mut client = stack.client().await?;
    Ok(client
        .get_withdrawal(crate::authed(
            &tenant.client,
            opledger_proto::v1::GetWithdrawalRequest {
                withdrawal_id: withdrawal_id.to_owned(),
            },
        ))
        .await?
        .into_inner())
}
