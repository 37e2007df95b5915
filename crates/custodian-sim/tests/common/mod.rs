//! The harness of the double's tests: a real anvil, the built binary on a config made here,
//! request signing written independently of the double (JWT RS256 with ring, HMACs), a webhook
//! inbox, and polling of the double's state.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use opledger_testkit::Anvil;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

mod keys;
pub mod webhook;

pub use keys::keys;

/// Anvil's 10th development account (mnemonic "test test ... junk", index 9): the double's hot
/// wallet, an account no other test sends from. Public knowledge; never holds anything real.
pub const HOT_WALLET_KEY: &str =
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6";
pub const HOT_WALLET: &str = "0xa0ee7a142d267c1f36714e4a8f75612f20a79720";

pub const API_KEY: &str = "fb-api-key-1";

pub const BITGO_COIN: &str = "hteth";
pub const BITGO_WALLET: &str = "0123456789abcdef0123456789abcdef";
pub const BITGO_TOKEN: &str = "v2x-bitgo-token";
pub const BITGO_PASSPHRASE: &str = "wallet passphrase";
pub const BITGO_WEBHOOK_SECRET: &str = "bitgo-webhook-secret";

pub const PRIME_PORTFOLIO: &str = "portfolio-1";
pub const PRIME_WALLET: &str = "wallet-1";
pub const PRIME_KEY: &str = "prime-access-key";
pub const PRIME_PASSPHRASE: &str = "prime-passphrase";
pub const PRIME_SECRET: &str = "prime-signing-secret";

/// One wei short of 1e-3 ETH: amounts used by the tests.
pub const AMOUNT_WEI: u128 = 1_000_000_000_000_000;
pub const AMOUNT_WHOLE: &str = "0.001";

/// A running double on its own anvil.
#[derive(Debug)]
pub struct Sim {
    child: Child,
    pub base: String,
    pub http: reqwest::Client,
    pub anvil: Anvil,
    config_path: std::path::PathBuf,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config_path);
    }
}

/// The configuration every test starts from; `tweak` changes it.
pub fn base_config(anvil: &Anvil) -> Value {
    let keys = keys();
    json!({
        "chain": {"rpc_url": anvil.rpc_url(), "chain_id": anvil.chain_id(), "hot_wallet_key": HOT_WALLET_KEY},
        "decimals": 18,
        "confirmations": 1,
        "faults": {"seed": 1, "rules": []},
        "fireblocks": {
            "api_key": API_KEY,
            "api_public_key_pem": keys.api_client_pub,
            "vault_account_id": "0",
            "asset_id": "ETH",
            "workspace_id": "ws-1",
            "webhook_signing_keys_pem": keys.webhook,
            "webhook_forger_key_pem": keys.webhook_forger,
        },
        "bitgo": {
            "coin": BITGO_COIN, "wallet_id": BITGO_WALLET, "access_token": BITGO_TOKEN,
            "wallet_passphrase": BITGO_PASSPHRASE, "webhook_secret": BITGO_WEBHOOK_SECRET,
        },
        "prime": {
            "portfolio_id": PRIME_PORTFOLIO, "wallet_id": PRIME_WALLET, "access_key": PRIME_KEY,
            "passphrase": PRIME_PASSPHRASE, "signing_secret": PRIME_SECRET, "currency_symbol": "ETH",
        },
    })
}

impl Sim {
    /// Anvil, then the double with the base config changed by `tweak`.
    pub async fn start(tweak: impl FnOnce(&mut Value)) -> anyhow::Result<Sim> {
        let anvil = Anvil::start().await?;
        Self::start_on(anvil, tweak).await
    }

    /// The double on `anvil`.
    pub async fn start_on(anvil: Anvil, tweak: impl FnOnce(&mut Value)) -> anyhow::Result<Sim> {
        let mut config = base_config(&anvil);
        tweak(&mut config);
        let config_path = std::env::temp_dir().join(format!(
            "custodian-sim-{}.json",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::write(&config_path, config.to_string())?;
        let mut child = Command::new(env!("CARGO_BIN_EXE_opledger-custodian-sim"))
            .arg("--config")
            .arg(&config_path)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the double")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).map(|_| line)
        })
        .await??;
        let address = line
            .trim()
            .strip_prefix("listening on ")
            .with_context(|| format!("first line: {line:?}"))?
            .to_owned();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()?;
        Ok(Sim {
            child,
            base: format!("http://{address}"),
            http,
            anvil,
            config_path,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        Ok(self.http.get(self.url(path)).send().await?.json().await?)
    }

    pub async fn post_sim(&self, path: &str, body: Value) -> anyhow::Result<(u16, Value)> {
        let answer = self.http.post(self.url(path)).json(&body).send().await?;
        Ok((answer.status().as_u16(), answer.json().await?))
    }

    pub async fn advance(&self, secs: f64) -> anyhow::Result<()> {
        self.post_sim("/sim/clock", json!({"advance_secs": secs}))
            .await?;
        Ok(())
    }

    pub async fn set_faults(&self, seed: u64, rules: Value) -> anyhow::Result<()> {
        let (status, _) = self
            .post_sim("/sim/faults", json!({"seed": seed, "rules": rules}))
            .await?;
        anyhow::ensure!(status == 200, "faults refused: {status}");
        Ok(())
    }

    /// The stored operation of `reference`.
    pub async fn op(&self, reference: &str) -> anyhow::Result<Option<Value>> {
        let ops = self.get("/sim/operations").await?;
        Ok(ops
            .as_array()
            .into_iter()
            .flatten()
            .find(|op| op["reference"] == reference)
            .cloned())
    }

    /// Waits (20 s at most) until the operation's newest view satisfies `done`.
    pub async fn wait_view(
        &self,
        reference: &str,
        done: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let op = self.op(reference).await?;
            let last = op
                .as_ref()
                .and_then(|op| op["views"].as_array().and_then(|v| v.last().cloned()));
            if let (Some(op), Some(last)) = (&op, last)
                && done(&last)
            {
                return Ok(op.clone());
            }
            if Instant::now() > deadline {
                bail!(
                    "{reference} did not get there: {:?}",
                    self.op(reference).await?
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Transactions put on chain for `reference`.
    pub async fn transfers_of(&self, reference: &str) -> anyhow::Result<Vec<Value>> {
        let all = self.get("/sim/transfers").await?;
        Ok(all
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["reference"] == reference)
            .cloned()
            .collect())
    }

    /// Request log entries for `reference`.
    pub async fn requests_of(&self, reference: &str) -> anyhow::Result<Vec<Value>> {
        let all = self.get("/sim/requests").await?;
        Ok(all
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["reference"] == reference)
            .cloned()
            .collect())
    }

    /// Exactly one transaction for `reference` was put on chain, it is mined and succeeded, and
    /// `destination` (fresh for the test) holds exactly `amount`: paid once.
    pub async fn assert_paid_once(
        &self,
        reference: &str,
        destination: &str,
        amount: u128,
    ) -> anyhow::Result<String> {
        let transfers = self.transfers_of(reference).await?;
        anyhow::ensure!(
            transfers.len() == 1,
            "transfers of {reference}: {transfers:?}"
        );
        let hash = transfers[0]["hash"].as_str().context("hash")?.to_owned();
        let receipt = self.anvil.receipt(&hash).await?.context("not mined")?;
        anyhow::ensure!(receipt["status"] == "0x1", "receipt {receipt}");
        anyhow::ensure!(
            receipt["from"]
                .as_str()
                .map(str::to_ascii_lowercase)
                .as_deref()
                == Some(HOT_WALLET),
            "from {receipt}"
        );
        let balance = self.anvil.balance(destination).await?;
        anyhow::ensure!(
            balance == amount,
            "{destination} holds {balance}, not {amount}"
        );
        Ok(hash)
    }

    // ---- Fireblocks ----

    pub async fn fb_create(
        &self,
        body: &str,
        idempotency_key: Option<&str>,
    ) -> anyhow::Result<(u16, String)> {
        let token = fb_jwt(
            &keys().api_client,
            API_KEY,
            "/v1/transactions",
            body.as_bytes(),
            FbClaims::now(),
        )?;
        let mut request = self
            .http
            .post(self.url("/v1/transactions"))
            .header("X-API-Key", API_KEY)
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .body(body.to_owned());
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let answer = request.send().await?;
        Ok((answer.status().as_u16(), answer.text().await?))
    }

    pub async fn fb_lookup(&self, reference: &str) -> anyhow::Result<(u16, Value)> {
        let path = format!("/v1/transactions/external_tx_id/{reference}");
        let token = fb_jwt(&keys().api_client, API_KEY, &path, b"", FbClaims::now())?;
        let answer = self
            .http
            .get(self.url(&path))
            .header("X-API-Key", API_KEY)
            .header("Authorization", format!("Bearer {token}"))
            .send()
            .await?;
        Ok((answer.status().as_u16(), answer.json().await?))
    }

    // ---- BitGo ----

    pub async fn bitgo_send(&self, body: &Value) -> anyhow::Result<(u16, Value)> {
        let path = format!("/api/v2/{BITGO_COIN}/wallet/{BITGO_WALLET}/sendcoins");
        let answer = self
            .http
            .post(self.url(&path))
            .bearer_auth(BITGO_TOKEN)
            .json(body)
            .send()
            .await?;
        Ok((answer.status().as_u16(), answer.json().await?))
    }

    pub async fn bitgo_lookup(&self, reference: &str) -> anyhow::Result<(u16, Value)> {
        let path =
            format!("/api/v2/{BITGO_COIN}/wallet/{BITGO_WALLET}/transfer/sequenceId/{reference}");
        let answer = self
            .http
            .get(self.url(&path))
            .bearer_auth(BITGO_TOKEN)
            .send()
            .await?;
        Ok((answer.status().as_u16(), answer.json().await?))
    }

    // ---- Prime ----

    pub async fn prime_call(
        &self,
        method: &str,
        path: &str,
        body: &str,
        timestamp: i64,
        secret: &str,
    ) -> anyhow::Result<(u16, String)> {
        let signature = prime_signature(secret, timestamp, method, path, body);
        let method = reqwest::Method::from_bytes(method.as_bytes())?;
        let answer = self
            .http
            .request(method, self.url(path))
            .header("X-CB-ACCESS-KEY", PRIME_KEY)
            .header("X-CB-ACCESS-PASSPHRASE", PRIME_PASSPHRASE)
            .header("X-CB-ACCESS-TIMESTAMP", timestamp.to_string())
            .header("X-CB-ACCESS-SIGNATURE", signature)
            .header("Content-Type", "application/json")
            .body(body.to_owned())
            .send()
            .await?;
        Ok((answer.status().as_u16(), answer.text().await?))
    }

    pub async fn prime_withdraw(&self, body: &Value) -> anyhow::Result<(u16, String)> {
        let path = format!("/v1/portfolios/{PRIME_PORTFOLIO}/wallets/{PRIME_WALLET}/withdrawals");
        self.prime_call("POST", &path, &body.to_string(), unix_now(), PRIME_SECRET)
            .await
    }

    pub async fn prime_list(&self) -> anyhow::Result<(u16, Value)> {
        let start = chrono_like(unix_now() - 3600);
        let end = chrono_like(unix_now() + 3600);
        let path = format!(
            "/v1/portfolios/{PRIME_PORTFOLIO}/transactions?types=WITHDRAWAL&start_time={start}&end_time={end}"
        );
        let (status, text) = self
            .prime_call("GET", &path, "", unix_now(), PRIME_SECRET)
            .await?;
        Ok((status, serde_json::from_str(&text)?))
    }
}

/// RFC 3339 of unix seconds (UTC).
pub fn chrono_like(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A fresh random destination address.
pub fn fresh_address() -> String {
    let a = uuid::Uuid::new_v4();
    let b = uuid::Uuid::new_v4();
    format!(
        "0x{}{}",
        hex::encode(a.as_bytes()),
        &hex::encode(b.as_bytes())[..8]
    )
}

pub fn reference() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Claims of a Fireblocks JWT.
#[derive(Debug, Clone)]
pub struct FbClaims {
    pub iat: i64,
    pub exp: i64,
    pub nonce: String,
    pub sub: String,
    pub uri: Option<String>,
    pub body_hash: Option<String>,
}

impl FbClaims {
    pub fn now() -> FbClaims {
        let iat = unix_now();
        FbClaims {
            iat,
            exp: iat + 29,
            nonce: uuid::Uuid::new_v4().to_string(),
            sub: API_KEY.to_owned(),
            uri: None,
            body_hash: None,
        }
    }
}

/// The DER inside a PEM.
pub fn pem_der(pem: &str) -> anyhow::Result<Vec<u8>> {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    Ok(STANDARD.decode(b64)?)
}

/// A Fireblocks request JWT, signed RS256 with ring from a PKCS#8 PEM.
pub fn fb_jwt(
    pem: &str,
    api_key: &str,
    uri: &str,
    body: &[u8],
    claims: FbClaims,
) -> anyhow::Result<String> {
    let _ = api_key;
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"RS256","typ":"JWT"}"#);
    let body_hash = claims
        .body_hash
        .unwrap_or_else(|| hex::encode(Sha256::digest(body)));
    let payload = json!({
        "uri": claims.uri.as_deref().unwrap_or(uri),
        "nonce": claims.nonce,
        "iat": claims.iat,
        "exp": claims.exp,
        "sub": claims.sub,
        "bodyHash": body_hash,
    });
    let payload = URL_SAFE_NO_PAD.encode(payload.to_string());
    let input = format!("{header}.{payload}");
    let pair = ring::signature::RsaKeyPair::from_pkcs8(&pem_der(pem)?)
        .map_err(|e| anyhow::anyhow!("key: {e}"))?;
    let mut signature = vec![0; pair.public().modulus_len()];
    pair.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| anyhow::anyhow!("sign"))?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// The Fireblocks create body, keys in the contract's order, no whitespace.
pub fn fb_body(reference: &str, to: &str, amount: &str) -> String {
    format!(
        r#"{{"assetId":"ETH","operation":"TRANSFER","source":{{"type":"VAULT_ACCOUNT","id":"0"}},"destination":{{"type":"ONE_TIME_ADDRESS","oneTimeAddress":{{"address":"{to}"}}}},"amount":"{amount}","externalTxId":"{reference}"}}"#
    )
}

pub fn bitgo_body(reference: &str, to: &str, amount_wei: u128) -> Value {
    json!({"address": to, "amount": amount_wei.to_string(), "sequenceId": reference, "walletPassphrase": BITGO_PASSPHRASE})
}

pub fn prime_body(reference: &str, to: &str, amount: &str) -> Value {
    json!({"amount": amount, "destination_type": "DESTINATION_BLOCKCHAIN", "idempotency_key": reference,
           "currency_symbol": "ETH", "blockchain_address": {"address": to}})
}

/// `X-CB-ACCESS-SIGNATURE`.
pub fn prime_signature(
    secret: &str,
    timestamp: i64,
    method: &str,
    path: &str,
    body: &str,
) -> String {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<Sha256>>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(format!("{timestamp}{method}{path}{body}").as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Shared list of strings for simple inboxes.
pub type Shared<T> = Arc<Mutex<T>>;
