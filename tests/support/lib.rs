//! Shared harness of the integration suites: a fresh database per test, the operations service
//! started in-process on a loopback port (connected as the application role, so the database
//! grants are exercised) with the checks a deployment configures (network registry, executor
//! check), tenants with keys, and authenticated requests.

pub mod audit;
pub mod chain;
pub mod conn;
pub mod custodian;
pub mod inbox;
pub mod kyt;
pub mod signer;
pub mod tls;

use anyhow::Context;
use opledger_domain::ids::TenantId;
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_server::serve::serve_api;
use opledger_store::keys::Role;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::{ServiceRole, TestDatabase};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::Request;
use tonic::transport::Channel;

/// One test's world: a fresh database with the operations and approvals services in front of it.
#[derive(Debug)]
pub struct Stack {
    /// The test's database.
    pub db: TestDatabase,
    /// A store on the superuser connection, for setup and for inspecting rows.
    pub admin: Store,
    /// The operations service's address.
    pub addr: SocketAddr,
    /// The approvals service's address.
    pub approvals_addr: SocketAddr,
    stop: Vec<oneshot::Sender<()>>,
    servers: Vec<JoinHandle<Result<(), opledger_server::serve::ServeError>>>,
}

/// An ApproveWithdrawal request for `w` signed by approver key `key` of the tenant
/// (`opledger_testkit::trust::approver_key`) under policy version 1, acknowledging its flags.
pub fn approval(tenant: TenantId, w: &pb::Withdrawal, key: u8) -> pb::ApproveWithdrawalRequest {
    approval_under(
        tenant,
        w,
        &opledger_testkit::trust::approver_key(tenant, key),
        1,
    )
}

/// An ApproveWithdrawal request for `w` signed by `key` under `policy_version`.
pub fn approval_under(
    tenant: TenantId,
    w: &pb::Withdrawal,
    key: &opledger_domain::approval::SigningKey,
    policy_version: u64,
) -> pb::ApproveWithdrawalRequest {
    let (approval_statement, signature) = decision(
        tenant,
        w,
        opledger_domain::approval::Decision::Approve,
        key,
        policy_version,
    );
    pb::ApproveWithdrawalRequest {
        withdrawal_id: w.withdrawal_id.clone(),
        acknowledged_risk_flags: w.risk_flags.clone(),
        approval_statement,
        signature,
    }
}

/// A RejectWithdrawal request for `w` signed by approver key `key` of the tenant.
pub fn rejection(
    tenant: TenantId,
    w: &pb::Withdrawal,
    key: u8,
    reason: &str,
) -> pb::RejectWithdrawalRequest {
    let (approval_statement, signature) = decision(
        tenant,
        w,
        opledger_domain::approval::Decision::Reject,
        &opledger_testkit::trust::approver_key(tenant, key),
        1,
    );
    pb::RejectWithdrawalRequest {
        withdrawal_id: w.withdrawal_id.clone(),
        reason: reason.to_owned(),
        approval_statement,
        signature,
    }
}

fn decision(
    tenant: TenantId,
    w: &pb::Withdrawal,
    decision: opledger_domain::approval::Decision,
    key: &opledger_domain::approval::SigningKey,
    policy_version: u64,
) -> (Vec<u8>, Vec<u8>) {
    // A malformed id or hash gives an empty statement, which the service refuses: tests that
    // send such requests assert that refusal.
    // An approval acknowledges, inside its signed bytes, the flags the withdrawal shows.
    let acknowledged = match decision {
        opledger_domain::approval::Decision::Approve => shown_flags(w),
        opledger_domain::approval::Decision::Reject => opledger_domain::RiskFlags::EMPTY,
    };
    opledger_testkit::trust::signed_decision_for(
        tenant,
        &w.withdrawal_id,
        &w.payload_hash,
        decision,
        key,
        policy_version,
        acknowledged,
    )
    .unwrap_or_default()
}

/// The risk flags a withdrawal shows, as a signed statement names them (an unknown flag, which
/// no test expects, gives none: the approval then fails to acknowledge it and is refused).
pub fn shown_flags(w: &pb::Withdrawal) -> opledger_domain::RiskFlags {
    opledger_grpc::convert::risk_flags_from_wire("risk_flags", &w.risk_flags)
        .unwrap_or(opledger_domain::RiskFlags::EMPTY)
}

/// A tenant with one key per role.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// The tenant's id.
    pub id: TenantId,
    /// Its name.
    pub name: String,
    /// A client key.
    pub client: String,
    /// An approver key.
    pub approver: String,
    /// An operator key.
    pub operator: String,
}

/// The operations service configuration of the Stack: the network registry of the test chain
/// (`anvil`, whose EVM transfers carry no memo) and the executor check on, as in production.
/// Every tenant the Stack creates gets the hot wallet a test signer holds registered
/// ([`Stack::tenant`]).
pub fn operations_config() -> opledger_operations::Config {
    opledger_operations::Config {
        networks: std::collections::BTreeMap::from([(
            signer::NETWORK.to_owned(),
            opledger_operations::config::NetworkPolicy { memo: false },
        )]),
        require_executor: true,
        ..opledger_operations::Config::default()
    }
}

impl Stack {
    /// A fresh database with the operations service in front of it, configured as
    /// [`operations_config`] says.
    pub async fn start() -> anyhow::Result<Stack> {
        Stack::start_with(operations_config()).await
    }

    /// A fresh database with the operations service configured by `operations` (its listen
    /// addresses and database URL are the Stack's own).
    pub async fn start_with(operations: opledger_operations::Config) -> anyhow::Result<Stack> {
        Stack::start_in(TestDatabase::create().await?, operations).await
    }

    /// Like [`Stack::start_with`], on `db` (a database of a highly available topology, say).
    pub async fn start_in(
        db: TestDatabase,
        operations: opledger_operations::Config,
    ) -> anyhow::Result<Stack> {
        let admin = Store::from_pool(db.admin_pool().await?, StoreConfig::default());
        let connect = |role: ServiceRole| {
            let url = db.url_as(role);
            async move {
                Store::connect(
                    &url,
                    StoreConfig {
                        max_connections: 10,
                        ..StoreConfig::default()
                    },
                )
                .await
                .map_err(|e| anyhow::anyhow!("{role:?} role cannot connect: {}", e.log_safe()))
            }
        };
        let operations_store = connect(ServiceRole::Operations).await?;
        let approvals = connect(ServiceRole::Approvals).await?;
        let (mut stop, mut servers) = (Vec::new(), Vec::new());
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        stop.push(tx);
        servers.push(tokio::spawn(async move {
            opledger_operations::serve(
                listener,
                operations_store.operations(),
                &operations,
                async move {
                    let _ = rx.await;
                },
            )
            .await
        }));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let approvals_addr = listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        stop.push(tx);
        servers.push(tokio::spawn(serve_api(
            listener,
            approvals.approvals(),
            Duration::from_secs(30),
            opledger_approvals::SERVICE_NAME,
            opledger_approvals::routes,
            async move {
                let _ = rx.await;
            },
        )));
        Ok(Stack {
            db,
            admin,
            addr,
            approvals_addr,
            stop,
            servers,
        })
    }

    /// Creates a tenant with a key of each role and version 1 of its trust statement: approver
    /// keys 0..4 of `opledger_testkit::trust`, one approver for every amount.
    pub async fn tenant(&self, name: &str) -> anyhow::Result<Tenant> {
        let tenant = self.tenant_without_trust(name).await?;
        opledger_testkit::trust::publish_default(&self.admin, tenant.id).await?;
        Ok(tenant)
    }

    /// Another API key of `role` for the tenant (a second approver, say).
    pub async fn key(&self, tenant: &Tenant, role: Role) -> anyhow::Result<String> {
        let issued = self
            .admin
            .create_api_key(tenant.id, role, "test")
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        Ok(issued.token.as_str().to_owned())
    }

    /// Creates a tenant with a key of each role and no trust statement. Its executor on the test
    /// network, the hot wallet a test signer holds ([`signer::HOT_WALLET`]), is registered as a
    /// signer registers its wallets at start (see [`Stack::register_executor`]).
    pub async fn tenant_without_trust(&self, name: &str) -> anyhow::Result<Tenant> {
        let id = self
            .admin
            .create_tenant(name)
            .await
            .context("create tenant")?;
        self.register_executor(id, signer::NETWORK, signer::HOT_WALLET)
            .await?;
        let key = |role| async move {
            self.admin
                .create_api_key(id, role, "test")
                .await
                .map(|k| k.token.as_str().to_owned())
                .context("create key")
        };
        Ok(Tenant {
            id,
            name: name.to_owned(),
            client: key(Role::Client).await?,
            approver: key(Role::Approver).await?,
            operator: key(Role::Operator).await?,
        })
    }

    /// Registers `sender` as the ACTIVE hot wallet of `tenant` on `network` (`signer_wallets`,
    /// written as the superuser, as a signer does for the wallets of its configuration), so the
    /// operations service's executor check accepts the tenant's creates there. Idempotent.
    pub async fn register_executor(
        &self,
        tenant: TenantId,
        network: &str,
        sender: &str,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO signer_wallets (tenant_id, network, sender, status) \
             VALUES ($1, $2, $3, 'ACTIVE') ON CONFLICT (tenant_id, network, sender) \
             DO UPDATE SET status = 'ACTIVE', updated_at = now()",
        )
        .bind(tenant.as_uuid())
        .bind(network)
        .bind(sender.to_ascii_lowercase())
        .execute(self.admin.pool())
        .await
        .context("register the tenant's executor")?;
        Ok(())
    }

    /// Removes every hot wallet registered for `tenant` on `network`: no signer can execute its
    /// withdrawals there any more.
    pub async fn remove_executors(&self, tenant: TenantId, network: &str) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM signer_wallets WHERE tenant_id = $1 AND network = $2")
            .bind(tenant.as_uuid())
            .bind(network)
            .execute(self.admin.pool())
            .await
            .context("remove the tenant's executors")?;
        Ok(())
    }

    /// Creates a withdrawal through the API and returns it.
    pub async fn withdraw(
        &self,
        tenant: &Tenant,
        amount: &str,
        to: &str,
    ) -> anyhow::Result<pb::Withdrawal> {
        let mut client = self.client().await?;
        let created = client
            .create_withdrawal(authed(
                &tenant.client,
                pb::CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(payload(amount, to)),
                },
            ))
            .await?
            .into_inner();
        created.withdrawal.context("no withdrawal in the response")
    }

    /// A second operations service on the Stack's database with `config`'s checks and routes;
    /// its client and its task.
    pub async fn operations_with(
        &self,
        config: opledger_operations::Config,
    ) -> anyhow::Result<(
        OperationsServiceClient<Channel>,
        tokio::task::JoinHandle<Result<(), opledger_server::serve::ServeError>>,
    )> {
        let store = Store::connect(&self.url(ServiceRole::Operations), StoreConfig::default())
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            opledger_operations::serve(
                listener,
                store.operations(),
                &config,
                std::future::pending(),
            )
            .await
        });
        Ok((
            OperationsServiceClient::connect(format!("http://{addr}")).await?,
            server,
        ))
    }

    /// The URL of the test database as `role`'s own login.
    pub fn url(&self, role: ServiceRole) -> String {
        self.db.url_as(role)
    }

    /// A client of the service.
    pub async fn client(&self) -> anyhow::Result<OperationsServiceClient<Channel>> {
        Ok(OperationsServiceClient::connect(format!("http://{}", self.addr)).await?)
    }

    /// Credits `amount` of `asset` to the tenant's `account` as the database owner does for an
    /// opening balance (`opledger-admin credit`): a service's credit needs a second principal
    /// (tests/operations/credits.rs, tests/redteam/credits.rs).
    pub async fn fund(
        &self,
        tenant: &Tenant,
        account: &str,
        asset: &str,
        amount: &str,
    ) -> anyhow::Result<()> {
        let key = opledger_domain::idempotency::IdempotencyKey::parse(&new_key())?;
        self.admin
            .credit_account(opledger_store::ledger::NewCredit {
                tenant_id: tenant.id,
                key: &key,
                account: &opledger_domain::payload::AccountName::parse(account)?,
                asset: &opledger_domain::payload::AssetCode::parse(asset)?,
                amount: opledger_domain::amount::Amount::parse(amount)?,
            })
            .await?;
        Ok(())
    }

    /// A client of the approvals service.
    pub async fn approvals(&self) -> anyhow::Result<ApprovalsServiceClient<Channel>> {
        Ok(ApprovalsServiceClient::connect(format!("http://{}", self.approvals_addr)).await?)
    }

    /// Stops the services (as a deploy would) and waits for them.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        for stop in self.stop.drain(..) {
            let _ = stop.send(());
        }
        for server in self.servers.drain(..) {
            server.await??;
        }
        Ok(())
    }

    /// Counts rows of `table` for `tenant` (table names are test constants, never input).
    pub async fn count(&self, table: &'static str, tenant: TenantId) -> anyhow::Result<i64> {
        let sql = format!("SELECT count(*) FROM {table} WHERE tenant_id = $1");
        let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(tenant.as_uuid())
            .fetch_one(self.admin.pool())
            .await?;
        Ok(n)
    }

    /// How many ledger entries of `kind` (HOLD, SETTLE, RELEASE, REOPEN) the tenant has.
    pub async fn entries(&self, tenant: TenantId, kind: &str) -> anyhow::Result<i64> {
        let (n,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM ledger_entries WHERE tenant_id = $1 AND kind = $2",
        )
        .bind(tenant.as_uuid())
        .bind(kind)
        .fetch_one(self.admin.pool())
        .await?;
        Ok(n)
    }

    /// (available, held) of an account, read directly from the database.
    pub async fn balance(
        &self,
        tenant: TenantId,
        account: &str,
        asset: &str,
    ) -> anyhow::Result<(u128, u128)> {
        let account = opledger_domain::payload::AccountName::parse(account)?;
        let asset = opledger_domain::payload::AssetCode::parse(asset)?;
        let balance = self
            .admin
            .balance(tenant, &account, &asset)
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?
            .context("no such account")?;
        Ok((balance.available.get(), balance.held.get()))
    }

    /// The state of an operation, read directly from the database.
    pub async fn state(&self, withdrawal_id: &str) -> anyhow::Result<String> {
        let (state,): (String,) =
            sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1")
                .bind(withdrawal_id.parse::<uuid::Uuid>()?)
                .fetch_one(self.admin.pool())
                .await?;
        Ok(state)
    }

    /// The state of an operation with the owner and reason code of its (one) escalation.
    pub async fn ending(&self, withdrawal_id: &str) -> anyhow::Result<(String, String, String)> {
        Ok(sqlx::query_as(
            "SELECT o.state, e.owner, e.reason_code FROM withdrawal_ops o \
             JOIN escalations e USING (tenant_id, op_id) WHERE o.op_id = $1",
        )
        .bind(withdrawal_id.parse::<uuid::Uuid>()?)
        .fetch_one(self.admin.pool())
        .await?)
    }

    /// Sets an operation's state as the database owner could (no transition check): for tests
    /// that put an operation where only a fault or a deep reorganization could.
    pub async fn force_state(&self, withdrawal_id: &str, state: &str) -> anyhow::Result<()> {
        let moved = sqlx::query(
            "UPDATE withdrawal_ops SET state = $2, version = version + 1 WHERE op_id = $1",
        )
        .bind(withdrawal_id.parse::<uuid::Uuid>()?)
        .bind(state)
        .execute(&self.db.admin_pool().await?)
        .await?
        .rows_affected();
        anyhow::ensure!(moved == 1, "no such operation");
        Ok(())
    }

    /// Relabels attempt `attempt` of an operation as `kind`, as a superuser bypassing the row's
    /// triggers would.
    pub async fn relabel_attempt(
        &self,
        withdrawal_id: &str,
        attempt: i32,
        kind: &str,
    ) -> anyhow::Result<()> {
        let admin = self.db.admin_pool().await?;
        let mut tx = admin.begin().await?;
        sqlx::query("SET LOCAL session_replication_role = replica")
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE tx_attempts SET kind = $3 WHERE op_id = $1 AND attempt = $2")
            .bind(withdrawal_id.parse::<uuid::Uuid>()?)
            .bind(attempt)
            .bind(kind)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Fails when any ledger or operation invariant is violated.
    pub async fn assert_invariants(&self) -> anyhow::Result<()> {
        let violations = self
            .admin
            .check_invariants()
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        anyhow::ensure!(violations.is_empty(), "invariants violated: {violations:?}");
        Ok(())
    }
}

/// A request carrying `authorization: Bearer <token>`.
pub fn authed<T>(token: &str, message: T) -> Request<T> {
    let mut request = Request::new(message);
    if let Ok(value) = format!("Bearer {token}").parse() {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// A fresh, valid idempotency key (a UUIDv4 string).
pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A valid payload for tests.
pub fn payload(amount: &str, destination: &str) -> pb::WithdrawalPayload {
    pb::WithdrawalPayload {
        source_account: "treasury".to_owned(),
        asset: "ETH".to_owned(),
        network: "anvil".to_owned(),
        destination: destination.to_owned(),
        memo: None,
        amount: amount.to_owned(),
        fee_cap: "1000000000000000".to_owned(),
        policy_version: 1,
    }
}

/// Destination addresses for tests.
pub const ALICE: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
/// A second destination.
pub const BOB: &str = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc";

/// The `ErrorInfo.reason` of a status, or "" when it has none.
pub fn reason(status: &tonic::Status) -> String {
    use tonic_types::StatusExt;
    status
        .get_error_details()
        .error_info()
        .map(|i| i.reason.clone())
        .unwrap_or_default()
}
