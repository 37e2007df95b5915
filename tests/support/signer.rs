//! The signer in tests: its own database login role (a member of `opledger_signer` only), a hot
//! wallet holding anvil's first public dev key, and the service in-process or as a child process.

use anyhow::Context;
use opledger_domain::ids::TenantId;
use opledger_evm::signer::{KdfCost, LocalKey, encrypt_keystore};
use opledger_proto::v1 as pb;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_signer::config::{CallerConfig, Capability, Config, NetworkConfig, WalletConfig};
use opledger_signer::{Signer, Wallets};
use opledger_store::{Store, StoreConfig};
use opledger_testkit::{DEV_KEYS, TestDatabase};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::TcpListener;
use tonic::Request;
use tonic::transport::Channel;
use zeroize::Zeroizing;

/// The token tests present to the signer: a caller holding every capability.
pub const CALLER_TOKEN: &str = "test-broadcaster-token-5b0e2f7c9a41";
/// A caller scoped like the broadcaster: `sign_withdrawal` and `fee_bump`.
pub const BROADCASTER_TOKEN: &str = "test-scoped-broadcaster-token-8c1d3e";
/// A caller scoped like the reconciler: `cancel` only.
pub const RECONCILER_TOKEN: &str = "test-scoped-reconciler-token-27f4a9";
/// The hot wallet's address (anvil dev account 0), lowercase.
pub const HOT_WALLET: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
/// The network id and chain id the tests sign for.
pub const NETWORK: &str = "anvil";
/// anvil's default chain id.
pub const CHAIN_ID: u64 = 31337;
/// A token the signer knows (any address: ERC-20 bytes are checked by decoding, not mined).
pub const TOKEN: &str = "0x5fbdb2315678afecb367f032d93f642f64180aa3";

/// The URL of `db` as the signer's login role (a member of `opledger_signer` only).
pub async fn signer_url(db: &TestDatabase) -> anyhow::Result<String> {
    Ok(db.url_as(opledger_testkit::ServiceRole::Signer))
}

/// The anvil network as the signer sees it.
pub fn network() -> NetworkConfig {
    NetworkConfig {
        chain_id: CHAIN_ID,
        native_asset: "ETH".into(),
        tokens: BTreeMap::from([("USDC".to_owned(), TOKEN.to_owned())]),
        gas_limit_native: 21_000,
        gas_limit_erc20: 100_000,
        max_fee_per_gas: opledger_config::Wei(2_000_000_000),
        max_priority_fee_per_gas: opledger_config::Wei(1_000_000_000),
        fee_bump_percent: 25,
        cancel_max_fee_per_gas: opledger_config::Wei(20_000_000_000),
    }
}

/// A caller entry for `token` named `name` with `capabilities`.
pub fn caller(name: &str, token: &str, capabilities: &[Capability]) -> CallerConfig {
    CallerConfig {
        name: name.to_owned(),
        token_sha256: hex::encode(Sha256::digest(token.as_bytes())),
        capabilities: capabilities.to_vec(),
        client_cert_sha256: None,
    }
}

/// The test callers: `CALLER_TOKEN` (every capability, named "test-caller"),
/// `BROADCASTER_TOKEN` ("broadcaster": sign_withdrawal, fee_bump) and `RECONCILER_TOKEN`
/// ("reconciler": cancel).
pub fn callers() -> Vec<CallerConfig> {
    vec![
        caller(
            "test-caller",
            CALLER_TOKEN,
            &[
                Capability::SignWithdrawal,
                Capability::FeeBump,
                Capability::Cancel,
            ],
        ),
        caller(
            "broadcaster",
            BROADCASTER_TOKEN,
            &[Capability::SignWithdrawal, Capability::FeeBump],
        ),
        caller("reconciler", RECONCILER_TOKEN, &[Capability::Cancel]),
    ]
}

/// A signer configuration for one tenant's hot wallet. Its fee bump and cancel windows are 0 so
/// that worker tests may bump and cancel at once; [`production_windows`] restores the defaults.
pub fn config(
    database_url: &str,
    tenant: TenantId,
    keystore: &Path,
    passphrase: &Path,
    lease_secs: u64,
) -> Config {
    let defaults = Config::default();
    Config {
        base: opledger_config::ServiceBase {
            database_url: opledger_config::DatabaseUrl(database_url.to_owned()),
            ..defaults.base.clone()
        },
        lease_secs,
        instance_id: "signer-test".into(),
        callers: callers(),
        fee_bump_min_age_secs: 0,
        cancel_min_age_secs: 0,
        networks: BTreeMap::from([(NETWORK.to_owned(), network())]),
        wallets: vec![WalletConfig {
            tenant_id: tenant.to_string(),
            network: NETWORK.into(),
            keystore: Some(keystore.to_owned()),
            passphrase_file: Some(passphrase.to_owned()),
            passphrase_env: None,
            pkcs11: None,
            initial_nonce: 0,
            retiring: false,
        }],
        trust_roots: vec![trust_root(tenant)],
        wallet_retire_check_secs: 1,
        // Tests reorganize within the watcher's window explicitly; the store test of retirement
        // checks the grace itself.
        wallet_retire_grace_secs: 0,
        wallet_retire_min_age_secs: 0,
        ..defaults
    }
}

/// Sets the signer's fee bump and cancel windows back to the production defaults.
pub fn production_windows(config: &mut Config) {
    let defaults = Config::default();
    config.fee_bump_min_age_secs = defaults.fee_bump_min_age_secs;
    config.cancel_min_age_secs = defaults.cancel_min_age_secs;
}

/// The trust root a test signer pins for `tenant`: its `opledger_testkit::trust` admin key.
pub fn trust_root(tenant: TenantId) -> opledger_signer::config::TrustRootConfig {
    opledger_signer::config::TrustRootConfig {
        tenant_id: tenant.to_string(),
        admin_public_keys: vec![opledger_testkit::trust::admin_public_hex(tenant)],
        min_version: 1,
    }
}

fn hot_secret() -> anyhow::Result<Zeroizing<[u8; 32]>> {
    dev_secret(0)
}

/// The address of the wallet a rotation puts in service (anvil's second dev account).
pub const ROTATED_WALLET: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// Which hot wallets an in-process signer holds for its tenant.
#[derive(Debug, Clone)]
pub enum TestWallets {
    /// [`HOT_WALLET`], active, whose first transaction has this nonce.
    Hot(u64),
    /// After a rotation: [`ROTATED_WALLET`] active, and [`HOT_WALLET`] retiring when `true`
    /// (finishing its in-flight nonces) or gone when `false`.
    Rotated(bool),
    /// No wallet at all (its entry removed from the configuration).
    None,
    /// This key, active, from nonce 0 (a key in a PKCS#11 token, say).
    Key(Arc<dyn opledger_evm::signer::KeyProvider>),
}

fn dev_secret(index: usize) -> anyhow::Result<Zeroizing<[u8; 32]>> {
    let bytes = hex::decode(DEV_KEYS[index].1.trim_start_matches("0x"))?;
    let mut secret = Zeroizing::new([0_u8; 32]);
    secret.copy_from_slice(&bytes);
    Ok(secret)
}

/// Writes the hot wallet as a keystore (light KDF) and its passphrase into `dir`.
pub fn write_keystore(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let passphrase = b"test passphrase, never a real one";
    let json = encrypt_keystore(&hot_secret()?, passphrase, KdfCost::Light, &mut rand::rng())?;
    let (keystore, pass) = (dir.join("hot.json"), dir.join("hot.pass"));
    std::fs::write(&keystore, json)?;
    std::fs::write(&pass, passphrase)?;
    Ok((keystore, pass))
}

/// A signer served in-process, connected as the signer role.
#[derive(Debug)]
pub struct InProcessSigner {
    /// Its address.
    pub addr: SocketAddr,
    server: tokio::task::JoinHandle<Result<(), opledger_server::serve::ServeError>>,
    sweep: tokio::task::JoinHandle<()>,
    retirement: tokio::task::JoinHandle<()>,
}

impl Drop for InProcessSigner {
    fn drop(&mut self) {
        self.server.abort();
        self.sweep.abort();
        self.retirement.abort();
    }
}

impl InProcessSigner {
    /// Starts a signer for `tenant` on `db`.
    pub async fn start(db: &TestDatabase, tenant: TenantId) -> anyhow::Result<InProcessSigner> {
        Self::start_with(db, tenant, None).await
    }

    /// Starts a signer for `tenant` on `db` that accepts TLS only, with these settings.
    pub async fn start_tls(
        db: &TestDatabase,
        tenant: TenantId,
        tls: tonic::transport::ServerTlsConfig,
    ) -> anyhow::Result<InProcessSigner> {
        Self::start_with(db, tenant, Some(tls)).await
    }

    /// Starts a signer whose hot wallet already sent `initial_nonce` transactions.
    pub async fn start_at_nonce(
        db: &TestDatabase,
        tenant: TenantId,
        initial_nonce: u64,
    ) -> anyhow::Result<InProcessSigner> {
        Self::start_full(db, tenant, None, TestWallets::Hot(initial_nonce), |_| {}).await
    }

    /// Starts a signer holding `wallets` (a rotation, say).
    pub async fn start_with_wallets(
        db: &TestDatabase,
        tenant: TenantId,
        wallets: TestWallets,
    ) -> anyhow::Result<InProcessSigner> {
        Self::start_full(db, tenant, None, wallets, |_| {}).await
    }

    /// Starts a signer with the production fee bump and cancel windows
    /// (`fee_bump_min_age_secs` 30, `cancel_min_age_secs` 300) instead of the tests' zeros.
    pub async fn start_with_production_windows(
        db: &TestDatabase,
        tenant: TenantId,
    ) -> anyhow::Result<InProcessSigner> {
        Self::start_configured(db, tenant, None, production_windows).await
    }

    async fn start_with(
        db: &TestDatabase,
        tenant: TenantId,
        tls: Option<tonic::transport::ServerTlsConfig>,
    ) -> anyhow::Result<InProcessSigner> {
        Self::start_full(db, tenant, tls, TestWallets::Hot(0), |_| {}).await
    }

    /// Starts a signer for `tenant` on `db` (TLS when `tls` is given) whose test configuration
    /// `adjust` changes first (callers, windows, ...).
    pub async fn start_configured(
        db: &TestDatabase,
        tenant: TenantId,
        tls: Option<tonic::transport::ServerTlsConfig>,
        adjust: impl FnOnce(&mut Config),
    ) -> anyhow::Result<InProcessSigner> {
        Self::start_full(db, tenant, tls, TestWallets::Hot(0), adjust).await
    }

    async fn start_full(
        db: &TestDatabase,
        tenant: TenantId,
        tls: Option<tonic::transport::ServerTlsConfig>,
        held: TestWallets,
        adjust: impl FnOnce(&mut Config),
    ) -> anyhow::Result<InProcessSigner> {
        let url = signer_url(db).await?;
        let store = Store::connect(
            &url,
            StoreConfig {
                max_connections: 8,
                ..StoreConfig::default()
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("signer role cannot connect: {}", e.log_safe()))?;
        let mut config = config(&url, tenant, Path::new("unused"), Path::new("unused"), 30);
        adjust(&mut config);
        let mut wallets = Wallets::default();
        let hot = held_key(hot_secret()?)?;
        match held {
            TestWallets::Hot(initial_nonce) => {
                wallets.insert(tenant, NETWORK, hot, initial_nonce);
            }
            TestWallets::Rotated(keep_old) => {
                let rotated = held_key(dev_secret(1)?)?;
                wallets.insert(tenant, NETWORK, rotated, 0);
                if keep_old {
                    wallets.insert_retiring(tenant, NETWORK, hot);
                }
            }
            TestWallets::None => {}
            TestWallets::Key(key) => {
                wallets.insert(tenant, NETWORK, key, 0);
            }
        }
        let callers = opledger_signer::callers(&config);
        let sweep = tokio::spawn(opledger_signer::release_sweep(
            store.signer(),
            std::time::Duration::from_millis(config.release_sweep_ms),
        ));
        let retire_every = std::time::Duration::from_secs(config.wallet_retire_check_secs);
        let signer = Signer::new(store.signer(), Arc::new(config), Arc::new(wallets));
        signer
            .register_wallets()
            .await
            .map_err(|e| anyhow::anyhow!("cannot register the wallets: {e}"))?;
        let retirement = tokio::spawn(opledger_signer::wallet_retirement(
            signer.clone(),
            retire_every,
        ));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(opledger_server::serve::serve_tls(
            listener,
            opledger_signer::SERVICE_NAME,
            opledger_signer::routes(signer, callers),
            tls,
            std::future::pending(),
        ));
        Ok(InProcessSigner {
            addr,
            server,
            sweep,
            retirement,
        })
    }
}

/// The variable that runs the in-process signers with their keys held in a SoftHSM2 token
/// (`pkcs11`) instead of in memory: `scripts/test.sh` runs the signer's suites both ways.
pub const KEY_BACKEND_ENV: &str = "OPLEDGER_TEST_KEY_BACKEND";

/// The key of `secret` as the signer holds it: in this process's memory, or, with
/// `OPLEDGER_TEST_KEY_BACKEND=pkcs11`, imported into this test process's SoftHSM2 token under a
/// label of its own and used through it, so that the suites keep their funded test wallets.
/// (One token per process: a module initialised in a process does not see tokens made after.)
fn held_key(
    secret: Zeroizing<[u8; 32]>,
) -> anyhow::Result<Arc<dyn opledger_evm::signer::KeyProvider>> {
    static TOKEN: std::sync::OnceLock<opledger_testkit::hsm::TestToken> =
        std::sync::OnceLock::new();
    match std::env::var(KEY_BACKEND_ENV).as_deref() {
        Ok("pkcs11") => {
            let token = match TOKEN.get() {
                Some(token) => token,
                None => {
                    let made = opledger_testkit::hsm::TestToken::create()?;
                    TOKEN.get_or_init(|| made)
                }
            };
            let label = format!("wallet-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
            token.import(&label, &secret)?;
            let key = opledger_hsm::Pkcs11Key::open(
                &token.location(&label),
                std::time::Duration::from_secs(5),
            )?;
            Ok(Arc::new(key))
        }
        Ok("keystore") | Err(_) => Ok(Arc::new(LocalKey::from_secret_bytes(secret)?)),
        Ok(other) => anyhow::bail!("{KEY_BACKEND_ENV}={other}: keystore or pkcs11"),
    }
}

/// A client of a signer at `addr`.
pub async fn client(addr: SocketAddr) -> anyhow::Result<SignerServiceClient<Channel>> {
    Ok(SignerServiceClient::connect(format!("http://{addr}")).await?)
}

/// A SignWithdrawal request carrying the caller token.
pub fn sign_request(tenant: TenantId, withdrawal_id: &str) -> Request<pb::SignWithdrawalRequest> {
    crate::authed(
        CALLER_TOKEN,
        pb::SignWithdrawalRequest {
            tenant_id: tenant.to_string(),
            withdrawal_id: withdrawal_id.to_owned(),
        },
    )
}

/// Approves `w` with the tenant's approver key (one approver suffices by default).
pub async fn approve(
    stack: &crate::Stack,
    tenant: &crate::Tenant,
    w: &pb::Withdrawal,
) -> anyhow::Result<()> {
    let mut approvals = stack.approvals().await?;
    let done = approvals
        .approve_withdrawal(crate::authed(
            &tenant.approver,
            crate::approval(tenant.id, w, 0),
        ))
        .await?
        .into_inner();
    anyhow::ensure!(
        done.state == pb::WithdrawalState::Approved as i32,
        "not approved"
    );
    Ok(())
}

/// Puts an operation's released attempts back behind the signed-bytes gate, as after a lost
/// commit answer: only the database owner can, bypassing the triggers (`conn` must be the
/// owner's). Its own commit does not wait for a standby, so this works with the standby gone.
pub async fn hold_back_release(
    conn: &mut sqlx::PgConnection,
    op_id: uuid::Uuid,
) -> anyhow::Result<()> {
    use sqlx::Connection as _;
    let mut tx = conn.begin().await?;
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    sqlx::query("SET LOCAL synchronous_commit = off")
        .execute(&mut *tx)
        .await?;
    sqlx::query("UPDATE attempt_releases SET released_at = NULL WHERE op_id = $1")
        .bind(op_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Counts signed attempts of an operation.
pub async fn attempts(stack: &crate::Stack, withdrawal_id: &str) -> anyhow::Result<i64> {
    let id: uuid::Uuid = withdrawal_id.parse().context("withdrawal id")?;
    let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM tx_attempts WHERE op_id = $1")
        .bind(id)
        .fetch_one(stack.admin.pool())
        .await?;
    Ok(n)
}
