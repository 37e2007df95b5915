//! The custodian path end to end: the conformance double (`opledger-custodian-sim`, a real process
//! executing real transfers on its own anvil), a tenant whose test network is routed to it, and
//! the custodian executor in process as the `opledger_custodian` login, driven pass by pass.

use crate::signer::{NETWORK, approve};
use crate::{Stack, Tenant, authed, new_key, operations_config, payload};
use anyhow::{Context, bail};
use opledger_custodian_executor::config::AccountRoute;
use opledger_custodian_executor::{Accounts, Cadence, Config, Executor};
use opledger_proto::v1 as pb;
use opledger_store::{Store, StoreConfig};
use opledger_testkit::{Anvil, ServiceRole};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Anvil's 9th development account: the double's hot wallet (no other test sends from it).
/// Public knowledge; never holds anything real.
pub const SIM_WALLET_KEY: &str =
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97";

/// The address of [`SIM_WALLET_KEY`].
pub const SIM_WALLET: &str = "0x23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f";

/// The Fireblocks API key the executor presents.
pub const API_KEY: &str = "opledger-test-api-key";

/// A running double on its own anvil (or on a node it was given), with the files its account
/// needs.
#[derive(Debug)]
pub struct Sim {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// Its node's JSON-RPC URL.
    pub rpc_url: String,
    /// Its node, when it started its own.
    anvil: Option<Anvil>,
    /// Where its keys and the executor's secret files are.
    pub dir: PathBuf,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("openssl")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("run openssl")?;
    anyhow::ensure!(status.success(), "openssl {args:?} failed");
    Ok(())
}

/// A fresh 2048-bit RSA key (PKCS#8 PEM) at `path`, and its public key (SPKI PEM) at
/// `path.pub`.
pub fn rsa_key(path: &Path) -> anyhow::Result<()> {
    let key = path.to_str().context("path")?;
    openssl(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        key,
    ])?;
    openssl(&["pkey", "-in", key, "-pubout", "-out", &format!("{key}.pub")])
}

impl Sim {
    /// Starts anvil and the double with the Fireblocks profile, `faults` as its schedule
    /// (`{"seed":..,"rules":[..]}`) and `lag_secs` of consistency lag.
    pub async fn start(faults: Value, lag_secs: u64) -> anyhow::Result<Sim> {
        let anvil = Anvil::start().await?;
        let (url, chain_id) = (anvil.rpc_url(), anvil.chain_id());
        let mut sim = Sim::start_on(&url, chain_id, faults, lag_secs).await?;
        sim.anvil = Some(anvil);
        Ok(sim)
    }

    /// [`Sim::start`] on the node at `rpc_url` (chain `chain_id`), which the caller runs: the
    /// double's hot wallet is anvil's 9th development account.
    pub async fn start_on(
        rpc_url: &str,
        chain_id: u64,
        faults: Value,
        lag_secs: u64,
    ) -> anyhow::Result<Sim> {
        let dir = std::env::temp_dir().join(format!("opledger-sim-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        rsa_key(&dir.join("api.pem"))?;
        rsa_key(&dir.join("webhook.pem"))?;
        std::fs::write(dir.join("api_key"), API_KEY)?;
        let config = json!({
            "chain": {"rpc_url": rpc_url, "chain_id": chain_id,
                      "hot_wallet_key": SIM_WALLET_KEY},
            "decimals": 18,
            "confirmations": 1,
            "faults": faults,
            "fireblocks": {
                "api_key": API_KEY,
                "api_public_key_pem": std::fs::read_to_string(dir.join("api.pem.pub"))?,
                "vault_account_id": "0", "asset_id": "ETH", "workspace_id": "ws-test",
                "webhook_signing_keys_pem": [std::fs::read_to_string(dir.join("webhook.pem"))?],
                "consistency_lag_secs": lag_secs, "authorization_delay_secs": 0
            }
        });
        Sim::launch(dir, &config, rpc_url)
    }

    /// Runs the double with `config` (written into `dir`) and reads the address it listens on.
    fn launch(dir: PathBuf, config: &Value, rpc_url: &str) -> anyhow::Result<Sim> {
        let path = dir.join("sim.json");
        std::fs::write(&path, serde_json::to_vec(config)?)?;
        let bin = opledger_testkit::binary_path("opledger-custodian-sim")?;
        let mut child = Command::new(bin)
            .arg("--config")
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("start opledger-custodian-sim")?;
        let stdout = child.stdout.take().context("sim stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            bail!("the double did not start: {line:?}");
        };
        Ok(Sim {
            child,
            base: format!("http://{addr}"),
            rpc_url: rpc_url.to_owned(),
            anvil: None,
            dir,
        })
    }

    /// The node the double started for itself.
    pub fn anvil(&self) -> anyhow::Result<&Anvil> {
        self.anvil
            .as_ref()
            .context("the double runs on a node it was given")
    }

    /// `GET /sim/<path>` as JSON.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let client = reqwest::Client::new();
        let answer = client
            .get(format!("{}/sim/{path}", self.base))
            .send()
            .await?;
        Ok(serde_json::from_slice(&answer.bytes().await?)?)
    }

    /// Replaces the double's fault schedule (`{"seed":..,"rules":[..]}`).
    pub async fn set_faults(&self, faults: &Value) -> anyhow::Result<()> {
        let client = reqwest::Client::new();
        let answer = client
            .post(format!("{}/sim/faults", self.base))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(faults)?)
            .send()
            .await?;
        anyhow::ensure!(
            answer.status().is_success(),
            "faults refused: {}",
            answer.status()
        );
        Ok(())
    }

    /// The transfers the double put on chain for `reference`.
    pub async fn transfers_of(&self, reference: &str) -> anyhow::Result<Vec<Value>> {
        let all = self.get("transfers").await?;
        let list = all.as_array().cloned().unwrap_or_default();
        Ok(list
            .into_iter()
            .filter(|t| t["reference"].as_str() == Some(reference))
            .collect())
    }

    /// The executor's account at this double for `tenant` (ETH on the test network).
    pub fn account(&self, tenant: &Tenant, window_secs: u64) -> anyhow::Result<AccountRoute> {
        let provider = json!({
            "profile": "lookup_by_reference",
            "base_url": self.base,
            "api_key_file": self.dir.join("api_key"),
            "api_secret_file": self.dir.join("api.pem"),
            "vault_account_id": "0",
            "asset_id": "ETH",
            "decimals": 18,
            "timeout_secs": 2,
            "consistency_window_secs": window_secs,
        });
        Ok(AccountRoute {
            name: "fireblocks-test".to_owned(),
            tenant: tenant.id.to_string(),
            network: NETWORK.to_owned(),
            asset: "ETH".to_owned(),
            provider: serde_json::from_value(provider)?,
        })
    }
}

/// A custodian executor in process as the `opledger_custodian` login, verifying the approvals
/// of the accounts' tenants against their test trust roots, following each withdrawal at most
/// every 200 ms.
pub async fn executor(
    stack: &Stack,
    id: &str,
    accounts: Vec<AccountRoute>,
) -> anyhow::Result<Executor> {
    executor_with(stack, id, accounts, cadence(Duration::from_millis(200))).await
}

/// The test cadence: following every `follow_every`, the default lease, and a final record whose
/// transaction the chain does not show escalated after the default two hours.
pub fn cadence(follow_every: Duration) -> Cadence {
    let defaults = Config::default();
    Cadence {
        follow_every,
        lease: Duration::from_secs(defaults.lease_secs),
        stuck_after: Duration::from_secs(defaults.stuck_after_secs),
    }
}

/// [`executor`] with `cadence`.
pub async fn executor_with(
    stack: &Stack,
    id: &str,
    accounts: Vec<AccountRoute>,
    cadence: Cadence,
) -> anyhow::Result<Executor> {
    let mut trust_roots = Vec::new();
    for account in &accounts {
        trust_roots.push(crate::signer::trust_root(account.tenant.parse()?));
    }
    let config = Config {
        executor_id: id.to_owned(),
        accounts,
        trust_roots,
        ..Config::default()
    };
    let store = Store::connect(&stack.url(ServiceRole::Custodian), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok(Executor::new(
        store.custodian(),
        Accounts::from_config(&config)?,
        opledger_trust::TrustRoots::new(&config.trust_roots),
        config.executor_id.clone(),
        cadence,
    ))
}

/// The executor's operator API (`CustodianOperatorService`) over its own login, with `account`
/// as its one provider account: the routes the executor serves.
pub async fn operator_routes(
    stack: &Stack,
    account: AccountRoute,
) -> anyhow::Result<tonic::service::Routes> {
    let config = Config {
        executor_id: "executor-api".to_owned(),
        accounts: vec![account],
        ..Config::default()
    };
    let login = Store::connect(&stack.url(ServiceRole::Custodian), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok(opledger_custodian_executor::operator_routes(
        &config,
        login.custodian(),
    )?)
}

/// The evidence of the double's node for the executor: quorum 1 (one node here), 3 blocks deep.
pub fn chains(sim: &Sim) -> anyhow::Result<opledger_custodian_executor::chain::Chains> {
    chains_at(&sim.rpc_url)
}

/// [`chains`] reading the double's network through `url` (a proxy in front of its node, say).
pub fn chains_at(url: &str) -> anyhow::Result<opledger_custodian_executor::chain::Chains> {
    let settings = crate::chain::evidence(&[url], 1);
    let reader = opledger_chain::evidence::service_reader(
        NETWORK,
        Some(&settings),
        Duration::from_secs(5),
        None,
        std::iter::empty(),
    )?;
    Ok(
        opledger_custodian_executor::chain::Chains::new(std::collections::HashMap::from([(
            NETWORK.to_owned(),
            reader,
        )]))
        .with_assets(payout_assets()),
    )
}

/// The executor's `[payout_assets]` for the double's network: its coin is ETH, paid from the
/// double's hot wallet only.
pub fn payout_assets()
-> std::collections::BTreeMap<String, opledger_custodian_executor::config::PayoutAssets> {
    let assets = opledger_custodian_executor::config::PayoutAssets {
        native: "ETH".to_owned(),
        tokens: std::collections::BTreeMap::new(),
        senders: vec![SIM_WALLET.to_owned()],
    };
    std::collections::BTreeMap::from([(NETWORK.to_owned(), assets)])
}

/// A withdrawal of `amount` wei to a fresh address through a service routing `tenant`'s test
/// network to the custodian, left REQUESTED; its id.
pub async fn requested_withdrawal(
    stack: &Stack,
    tenant: &Tenant,
    amount: &str,
) -> anyhow::Result<String> {
    Ok(create_routed(stack, tenant, amount).await?.0.withdrawal_id)
}

/// [`requested_withdrawal`], approved by the tenant's approver; the withdrawal and its
/// destination.
pub async fn approved_withdrawal(
    stack: &Stack,
    tenant: &Tenant,
    amount: &str,
) -> anyhow::Result<(pb::Withdrawal, String)> {
    let (created, destination) = create_routed(stack, tenant, amount).await?;
    approve(stack, tenant, &created).await?;
    Ok((created, destination))
}

/// [`approved_withdrawal`] paying `destination`.
pub async fn approved_withdrawal_to(
    stack: &Stack,
    tenant: &Tenant,
    amount: &str,
    destination: &str,
) -> anyhow::Result<pb::Withdrawal> {
    let created = create_routed_to(stack, tenant, amount, destination).await?;
    approve(stack, tenant, &created).await?;
    Ok(created)
}

async fn create_routed(
    stack: &Stack,
    tenant: &Tenant,
    amount: &str,
) -> anyhow::Result<(pb::Withdrawal, String)> {
    let destination = format!(
        "0x{}",
        hex::encode(uuid::Uuid::new_v4().as_bytes()) + "00000000"
    );
    let created = create_routed_to(stack, tenant, amount, &destination).await?;
    Ok((created, destination))
}

async fn create_routed_to(
    stack: &Stack,
    tenant: &Tenant,
    amount: &str,
    destination: &str,
) -> anyhow::Result<pb::Withdrawal> {
    create_routed_payload(stack, tenant, payload(amount, destination)).await
}

/// `payload` (of the test network) created through a service routing `tenant`'s test network
/// to the custodian, then approved by the tenant's approver.
pub async fn approved_payload(
    stack: &Stack,
    tenant: &Tenant,
    payload: pb::WithdrawalPayload,
) -> anyhow::Result<pb::Withdrawal> {
    let created = create_routed_payload(stack, tenant, payload).await?;
    approve(stack, tenant, &created).await?;
    Ok(created)
}

async fn create_routed_payload(
    stack: &Stack,
    tenant: &Tenant,
    payload: pb::WithdrawalPayload,
) -> anyhow::Result<pb::Withdrawal> {
    let config = opledger_operations::Config {
        custodian_routes: vec![opledger_operations::config::CustodianRoute {
            tenant: tenant.id.to_string(),
            network: NETWORK.to_owned(),
        }],
        ..operations_config()
    };
    let (mut client, server) = stack.operations_with(config).await?;
    let created = client
        .create_withdrawal(authed(
            &tenant.client,
            pb::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(payload),
            },
        ))
        .await?
        .into_inner()
        .withdrawal
        .context("no withdrawal")?;
    server.abort();
    anyhow::ensure!(created.executor == pb::Executor::Custodian as i32);
    Ok(created)
}

/// The withdrawal's state by the database.
pub async fn state(stack: &Stack, op: &str) -> anyhow::Result<String> {
    let (state,): (String,) =
        sqlx::query_as("SELECT state FROM withdrawal_ops WHERE op_id = $1::uuid")
            .bind(op)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(state)
}

/// Runs passes of `executors` until `op` is in `want` (or `within` passes).
pub async fn drive_until(
    stack: &Stack,
    executors: &[&Executor],
    op: &str,
    want: &[&str],
    within: Duration,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + within;
    loop {
        for executor in executors {
            executor.pass(16, 4).await;
        }
        let now = state(stack, op).await?;
        if want.contains(&now.as_str()) {
            return Ok(now);
        }
        if Instant::now() > deadline {
            bail!("withdrawal still {now}, wanted {want:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Sim {
    /// The witness's own account at this double for `tenant`: its own copies of the credential
    /// files (under `witness/`, never the executor's files) and its own configuration. The double
    /// registers one API key, so the key is the same one; a real deployment gives the witness a
    /// read-only key of its own.
    pub fn witness_account(&self, tenant: &Tenant) -> anyhow::Result<AccountRoute> {
        let own = self.dir.join("witness");
        std::fs::create_dir_all(&own)?;
        std::fs::copy(self.dir.join("api_key"), own.join("api_key"))?;
        std::fs::copy(self.dir.join("api.pem"), own.join("api.pem"))?;
        let provider = json!({
            "profile": "lookup_by_reference",
            "base_url": self.base,
            "api_key_file": own.join("api_key"),
            "api_secret_file": own.join("api.pem"),
            "vault_account_id": "0",
            "asset_id": "ETH",
            "decimals": 18,
            "timeout_secs": 2,
            "consistency_window_secs": 0,
        });
        Ok(AccountRoute {
            name: "fireblocks-witness".to_owned(),
            tenant: tenant.id.to_string(),
            network: NETWORK.to_owned(),
            asset: "ETH".to_owned(),
            provider: serde_json::from_value(provider)?,
        })
    }
}

/// The witness's custodian pass in process as the `opledger_witness` login, with `accounts` as
/// its own `[[custodian_accounts]]` (its configuration validated as at load; its chain evidence
/// is the double's node).
pub async fn custodian_witness(
    stack: &Stack,
    sim: &Sim,
    accounts: Vec<AccountRoute>,
) -> anyhow::Result<opledger_witness::CustodianWitness> {
    let config = opledger_witness::Config {
        custodian_accounts: accounts,
        ..crate::chain::witness_config(stack, &[sim.rpc_url.as_str()], 1)
    };
    config.validate()?;
    let store = Store::connect(&config.base.database_url.0, StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!("the witness login cannot connect: {}", e.log_safe()))?;
    Ok(opledger_witness::custodian_witness(
        &config,
        store.witness(),
        Default::default(),
    )?)
}

/// What a double started by [`Sim::start_webhooks`] is: the Fireblocks profile of [`Sim::start`]
/// (two webhook signing keys given, so that a rotation is instant, and a forger key), with its
/// webhooks posted to `fireblocks_webhook_url`, and optionally the BitGo and Prime profiles.
#[derive(Debug, Clone)]
pub struct SimWebhooks {
    /// The fault schedule (`{"seed":..,"rules":[..]}`).
    pub faults: Value,
    /// Seconds (double's clock) a transfer stays in authorization (`POST /sim/clock` ends it).
    pub authorization_delay_secs: u64,
    /// Where Fireblocks webhooks go (none sent when absent).
    pub fireblocks_webhook_url: Option<String>,
    /// The BitGo profile: where its webhooks go, and the secret it signs them with.
    pub bitgo: Option<(Option<String>, String)>,
    /// The Prime profile: where its webhooks go, and its signing secret (requests and webhooks).
    pub prime: Option<(Option<String>, String)>,
}

/// The BitGo wallet id of [`Sim::start_webhooks`].
pub const BITGO_WALLET: &str = "0123456789abcdef0123456789abcdef";

impl Sim {
    /// Starts anvil and the double as [`SimWebhooks`] says.
    pub async fn start_webhooks(setup: SimWebhooks) -> anyhow::Result<Sim> {
        let anvil = Anvil::start().await?;
        let dir = std::env::temp_dir().join(format!("opledger-sim-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        for key in ["api.pem", "webhook.pem", "webhook-next.pem", "forger.pem"] {
            rsa_key(&dir.join(key))?;
        }
        std::fs::write(dir.join("api_key"), API_KEY)?;
        let read = |name: &str| std::fs::read_to_string(dir.join(name));
        let mut config = json!({
            "chain": {"rpc_url": anvil.rpc_url(), "chain_id": anvil.chain_id(),
                      "hot_wallet_key": SIM_WALLET_KEY},
            "decimals": 18,
            "confirmations": 1,
            "faults": setup.faults,
            "fireblocks": {
                "api_key": API_KEY,
                "api_public_key_pem": read("api.pem.pub")?,
                "vault_account_id": "0", "asset_id": "ETH", "workspace_id": "ws-test",
                "webhook_signing_keys_pem": [read("webhook.pem")?, read("webhook-next.pem")?],
                "webhook_forger_key_pem": read("forger.pem")?,
                "webhook_url": setup.fireblocks_webhook_url,
                "authorization_delay_secs": setup.authorization_delay_secs
            }
        });
        if let Some((url, secret)) = &setup.bitgo {
            std::fs::write(dir.join("bitgo_token"), "bitgo-test-token")?;
            std::fs::write(dir.join("bitgo_passphrase"), "bitgo-test-passphrase")?;
            config["bitgo"] = json!({
                "coin": "hteth", "wallet_id": BITGO_WALLET,
                "access_token": "bitgo-test-token", "wallet_passphrase": "bitgo-test-passphrase",
                "webhook_secret": secret, "webhook_url": url,
                "authorization_delay_secs": setup.authorization_delay_secs
            });
        }
        if let Some((url, secret)) = &setup.prime {
            std::fs::write(dir.join("prime_key"), "prime-test-key")?;
            std::fs::write(dir.join("prime_passphrase"), "prime-test-passphrase")?;
            std::fs::write(dir.join("prime_secret"), secret)?;
            config["prime"] = json!({
                "portfolio_id": "portfolio-test", "wallet_id": "wallet-test",
                "access_key": "prime-test-key", "passphrase": "prime-test-passphrase",
                "signing_secret": secret, "currency_symbol": "ETH",
                "webhook_url": url,
                "authorization_delay_secs": setup.authorization_delay_secs
            });
        }
        let url = anvil.rpc_url();
        let mut sim = Sim::launch(dir, &config, &url)?;
        sim.anvil = Some(anvil);
        Ok(sim)
    }

    /// `POST /sim/<path>` with a JSON body; the answer as JSON (`null` when empty).
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        let answer = reqwest::Client::new()
            .post(format!("{}/sim/{path}", self.base))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body)?)
            .send()
            .await?;
        let status = answer.status();
        let bytes = answer.bytes().await?;
        anyhow::ensure!(status.is_success(), "POST /sim/{path}: {status}");
        Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// The provider requests the double received, as `GET /sim/requests` lists them.
    pub async fn requests(&self) -> anyhow::Result<Vec<Value>> {
        Ok(self
            .get("requests")
            .await?
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// How many lookups of `reference` (GETs naming it) the double answered.
    pub async fn lookups_of(&self, reference: &str) -> anyhow::Result<usize> {
        Ok(self
            .requests()
            .await?
            .iter()
            .filter(|r| {
                r["method"] == "GET" && r["path"].as_str().is_some_and(|p| p.contains(reference))
            })
            .count())
    }

    /// The webhook events the double made about `reference` (`GET /sim/webhooks`).
    pub async fn webhooks_of(&self, reference: &str) -> anyhow::Result<Vec<Value>> {
        let all = self.get("webhooks").await?;
        Ok(all
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["reference"].as_str() == Some(reference))
            .collect())
    }

    /// The executor's BitGo wallet at this double for `tenant` (a [`Sim::start_webhooks`] with
    /// `bitgo`).
    pub fn bitgo_account(&self, tenant: &Tenant) -> anyhow::Result<AccountRoute> {
        let provider = json!({
            "profile": "one_send_per_reference",
            "base_url": self.base,
            "access_token_file": self.dir.join("bitgo_token"),
            "wallet_passphrase_file": self.dir.join("bitgo_passphrase"),
            "coin": "hteth",
            "wallet_id": BITGO_WALLET,
            "timeout_secs": 2,
            "consistency_window_secs": 5,
        });
        Ok(AccountRoute {
            name: "bitgo-test".to_owned(),
            tenant: tenant.id.to_string(),
            network: NETWORK.to_owned(),
            asset: "ETH".to_owned(),
            provider: serde_json::from_value(provider)?,
        })
    }

    /// The executor's Prime wallet at this double for `tenant` (a [`Sim::start_webhooks`] with
    /// `prime`).
    pub fn prime_account(&self, tenant: &Tenant) -> anyhow::Result<AccountRoute> {
        let provider = json!({
            "profile": "no_lookup",
            "base_url": self.base,
            "access_key_file": self.dir.join("prime_key"),
            "passphrase_file": self.dir.join("prime_passphrase"),
            "signing_key_file": self.dir.join("prime_secret"),
            "portfolio_id": "portfolio-test",
            "wallet_id": "wallet-test",
            "currency_symbol": "ETH",
            "decimals": 18,
            "timeout_secs": 2,
            "consistency_window_secs": 5,
        });
        Ok(AccountRoute {
            name: "prime-test".to_owned(),
            tenant: tenant.id.to_string(),
            network: NETWORK.to_owned(),
            asset: "ETH".to_owned(),
            provider: serde_json::from_value(provider)?,
        })
    }
}

/// [`executor`] following each withdrawal at most once per `follow_every` (unless a hint wakes
/// it).
pub async fn executor_following_every(
    stack: &Stack,
    id: &str,
    accounts: Vec<AccountRoute>,
    follow_every: Duration,
) -> anyhow::Result<Executor> {
    executor_with(stack, id, accounts, cadence(follow_every)).await
}

/// One record of the provider's that a lookup of the executor's stored (`custodian_records`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredRecord {
    /// Its status (our names).
    pub status: String,
    /// Its sub-status.
    pub sub_status: Option<String>,
    /// The transaction it named.
    pub tx_hash: Option<String>,
    /// The hashes it named as replaced.
    pub replaced: Vec<String>,
}

/// One inclusion recorded for a withdrawal (`inclusions`).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Included {
    /// The transaction.
    pub tx_hash: String,
    /// Its block.
    pub block_number: i64,
    /// Its block's hash.
    pub block_hash: String,
    /// Whether a reorganization removed it.
    pub reorged: bool,
}

/// Everything the database holds about one custodian withdrawal, read together so that a test
/// asserts exact outcomes: its state and hold, the request, sends, answers and records of the
/// executor, the release's proposals and attestations, its ledger entries, escalations and
/// inclusions.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Books {
    /// `withdrawal_ops.state`.
    pub state: String,
    /// `ledger_holds.status`: OPEN, SETTLED or RELEASED.
    pub hold: String,
    /// Stored requests: one is one reference, ours.
    pub requests: i64,
    /// Sends of the stored request.
    pub sends: i64,
    /// The answer classes, by send.
    pub answers: Vec<String>,
    /// The provider's records as the lookups found them, oldest first.
    #[sqlx(skip)]
    pub records: Vec<StoredRecord>,
    /// Release proposals (the executor's).
    pub proposals: i64,
    /// Release attestations (the witness's).
    pub attestations: i64,
    /// SETTLE ledger entries.
    pub settles: i64,
    /// RELEASE ledger entries.
    pub releases: i64,
    /// REOPEN ledger entries.
    pub reopens: i64,
    /// The reason codes of its escalations, oldest first.
    pub escalations: Vec<String>,
    /// Its inclusions, oldest first.
    #[sqlx(skip)]
    pub inclusions: Vec<Included>,
}

impl Books {
    /// The records that named a transaction.
    pub fn records_with_hash(&self) -> usize {
        self.records.iter().filter(|r| r.tx_hash.is_some()).count()
    }

    /// The records in `status`.
    pub fn records_in(&self, status: &str) -> usize {
        self.records.iter().filter(|r| r.status == status).count()
    }

    /// The inclusions no reorganization removed.
    pub fn live_inclusions(&self) -> Vec<&Included> {
        self.inclusions.iter().filter(|i| !i.reorged).collect()
    }
}

/// The [`Books`] of withdrawal `op`.
pub async fn books(stack: &Stack, op: &str) -> anyhow::Result<Books> {
    let pool = stack.admin.pool();
    let mut books: Books = sqlx::query_as(
        "SELECT o.state, h.status AS hold, \
           (SELECT count(*) FROM custodian_requests x WHERE x.op_id = o.op_id) AS requests, \
           (SELECT count(*) FROM custodian_sends x WHERE x.op_id = o.op_id) AS sends, \
           (SELECT coalesce(array_agg(x.answer ORDER BY x.send_no), '{}') \
              FROM custodian_answers x WHERE x.op_id = o.op_id) AS answers, \
           (SELECT count(*) FROM custodian_release_proposals x WHERE x.op_id = o.op_id) \
              AS proposals, \
           (SELECT count(*) FROM custodian_release_attestations x WHERE x.op_id = o.op_id) \
              AS attestations, \
           (SELECT count(*) FROM ledger_entries x WHERE x.op_id = o.op_id AND x.kind = 'SETTLE') \
              AS settles, \
           (SELECT count(*) FROM ledger_entries x WHERE x.op_id = o.op_id AND x.kind = 'RELEASE') \
              AS releases, \
           (SELECT count(*) FROM ledger_entries x WHERE x.op_id = o.op_id AND x.kind = 'REOPEN') \
              AS reopens, \
           (SELECT coalesce(array_agg(x.reason_code ORDER BY x.escalation_id), '{}') \
              FROM escalations x WHERE x.op_id = o.op_id) AS escalations \
         FROM withdrawal_ops o JOIN ledger_holds h USING (tenant_id, op_id) \
         WHERE o.op_id = $1::uuid",
    )
    .bind(op)
    .fetch_one(pool)
    .await?;
    books.records = sqlx::query_as(
        "SELECT status, sub_status, tx_hash, replaced_hashes AS replaced FROM custodian_records \
         WHERE op_id = $1::uuid ORDER BY record_id",
    )
    .bind(op)
    .fetch_all(pool)
    .await?;
    books.inclusions = sqlx::query_as(
        "SELECT tx_hash, block_number, block_hash, reorged_at IS NOT NULL AS reorged \
         FROM inclusions WHERE op_id = $1::uuid ORDER BY inclusion_id",
    )
    .bind(op)
    .fetch_all(pool)
    .await?;
    Ok(books)
}

/// Runs passes of `executor` until the [`Books`] of `op` satisfy `done` (or fails after
/// `within`, showing them), mining a block on `mine_on` after each pass that did not.
pub async fn pass_until(
    stack: &Stack,
    executor: &Executor,
    op: &str,
    mine_on: Option<&Anvil>,
    within: Duration,
    done: impl Fn(&Books) -> bool,
) -> anyhow::Result<Books> {
    let deadline = Instant::now() + within;
    loop {
        executor.pass(16, 4).await;
        let now = books(stack, op).await?;
        if done(&now) {
            return Ok(now);
        }
        if Instant::now() > deadline {
            bail!("not reached within {within:?}: {now:?}");
        }
        if let Some(node) = mine_on {
            node.mine(1).await?;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Sim {
    /// [`Sim::prime_account`] with a consistency window of `secs`.
    pub fn prime_account_within(&self, tenant: &Tenant, secs: u64) -> anyhow::Result<AccountRoute> {
        let mut account = self.prime_account(tenant)?;
        if let opledger_custodian::AccountConfig::NoLookup(prime) = &mut account.provider {
            prime.consistency_window_secs = secs;
        }
        Ok(account)
    }

    /// Moves the double's clock forward by `secs` (`POST /sim/clock`): its lags, holds and
    /// windows end without a real wait.
    pub async fn advance_clock(&self, secs: u64) -> anyhow::Result<()> {
        self.post("clock", &json!({"advance_secs": secs})).await?;
        Ok(())
    }

    /// The create calls the double received for `reference`, in order: the status each was
    /// answered (`None`: the connection closed without an answer) and the faults applied.
    pub async fn creates_of(
        &self,
        reference: &str,
    ) -> anyhow::Result<Vec<(Option<u64>, Vec<String>)>> {
        Ok(self
            .requests()
            .await?
            .iter()
            .filter(|r| r["method"] == "POST" && r["reference"].as_str() == Some(reference))
            .map(|r| {
                let faults = r["faults"].as_array().cloned().unwrap_or_default();
                let faults = faults.iter().filter_map(|f| f.as_str().map(str::to_owned));
                (r["status"].as_u64(), faults.collect())
            })
            .collect())
    }

    /// The one transfer the double put on chain for `reference`, checked against its node:
    /// mined and successful, to `destination`, whose balance is exactly `amount` (a fresh
    /// address: paid once). Gives the transfer and the receipt's block hash.
    /// The hash of the double's first transfer for `reference`, once it is mined (within
    /// `within`).
    pub async fn mined_transfer(
        &self,
        reference: &str,
        within: Duration,
    ) -> anyhow::Result<String> {
        let deadline = std::time::Instant::now() + within;
        let hash = loop {
            let transfers = self.transfers_of(reference).await?;
            if let Some(hash) = transfers.first().and_then(|t| t["hash"].as_str()) {
                break hash.to_owned();
            }
            anyhow::ensure!(std::time::Instant::now() < deadline, "never paid");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        self.anvil()?.wait_receipt(&hash, within).await?;
        Ok(hash)
    }

    pub async fn paid_once(
        &self,
        reference: &str,
        destination: &str,
        amount: &str,
    ) -> anyhow::Result<(Value, String)> {
        let transfers = self.transfers_of(reference).await?;
        anyhow::ensure!(transfers.len() == 1, "not one transfer: {transfers:?}");
        let transfer = transfers[0].clone();
        anyhow::ensure!(transfer["destination"] == destination, "{transfer}");
        anyhow::ensure!(transfer["amount_wei"] == amount, "{transfer}");
        let hash = transfer["hash"].as_str().context("no hash")?;
        let node = self.anvil()?;
        let receipt = node.receipt(hash).await?.context("transfer not mined")?;
        anyhow::ensure!(receipt["status"] == "0x1", "{receipt}");
        anyhow::ensure!(
            node.balance(destination).await? == amount.parse::<u128>()?,
            "the destination does not hold exactly {amount}"
        );
        let block_hash = receipt["blockHash"].as_str().context("no block hash")?;
        Ok((transfer, block_hash.to_owned()))
    }
}

/// The broadcaster's chain watcher as its own login (`opledger_broadcaster`), watching the test
/// network on the double's node (quorum 1, [`crate::chain::CONFIRMATIONS`] deep): the watcher
/// that re-checks every CONFIRMED inclusion of the network, a custodian's included.
pub async fn chain_watcher(
    stack: &Stack,
    sim: &Sim,
) -> anyhow::Result<opledger_broadcaster::watcher::Watcher> {
    let defaults = opledger_broadcaster::Config::default();
    let rpc = sim.rpc_url.as_str();
    let config = opledger_broadcaster::Config {
        base: crate::chain::test_base(stack.url(ServiceRole::Broadcaster), defaults.base.clone()),
        chain: opledger_chain::ChainLinks {
            rpc: std::collections::BTreeMap::from([(NETWORK.to_owned(), rpc.to_owned())]),
            evidence: std::collections::BTreeMap::from([(
                NETWORK.to_owned(),
                crate::chain::evidence(&[rpc], 1),
            )]),
            ..Default::default()
        },
        worker_id: "watcher-custodian-test".into(),
        ..defaults
    };
    let store = Store::connect(&config.base.database_url.0, StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok(opledger_broadcaster::watcher(&config, store.broadcaster())?)
}
