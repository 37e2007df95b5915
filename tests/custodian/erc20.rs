//! ERC-20 withdrawals through a custodian. A tenant's `USDC` on the test network is routed to a
//! provider account; the conformance double pays it from its hot wallet by calling
//! `transfer(to, amount)` on a real token deployed on its anvil (`tools/contracts/TestToken.sol`).
//! The executor, configured with the token's contract (`[payout_assets.anvil] tokens`), settles
//! the withdrawal only once its own evidence shows the transaction the provider's record names,
//! final, holding exactly one `Transfer` of that contract to the destination of the amount.
//!
//! The adversary is a custodian whose record is right while its transaction is not: it pays
//! another token, the native coin, another amount, or another address. The executor never settles
//! such a withdrawal: it escalates it (`CUSTODIAN_TRANSACTION_CONTRADICTED`, a security event
//! naming the refusal) and the hold stays.

use opledger_custodian_executor::config::{AccountRoute, PayoutAssets};
use opledger_custodian_executor::{Config, Executor};
use opledger_store::{Store, StoreConfig};
use opledger_testkit::{
    Anvil, DEV_KEYS, ServiceRole, deploy_test_token, token_balance, token_transfer,
};
use opledger_tests::custodian::{
    API_KEY, BITGO_WALLET, Books, SIM_WALLET, SIM_WALLET_KEY, books, pass_until, rsa_key,
};
use opledger_tests::signer::{NETWORK, trust_root};
use opledger_tests::{Stack, Tenant, payload};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The asset code of the tenant's token, as in the payloads.
const ASSET: &str = "USDC";
/// The token's name at the double's BitGo profile (`coin`).
const BITGO_COIN: &str = "hterc6dp";
/// 1.5 tokens of 6 decimals, in base units.
const AMOUNT: &str = "1500000";
/// Tokens minted to the deployer; half goes to the double's hot wallet.
const SUPPLY: u128 = 1_000_000_000_000;
const WITHIN: Duration = Duration::from_secs(40);
const CONTRADICTED: &str = "CUSTODIAN_TRANSACTION_CONTRADICTED";

/// What the double pays a `USDC` withdrawal with, and to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pays {
    /// The token the executor knows as `USDC`, as requested.
    Token,
    /// Another token (a second `TestToken`), as requested otherwise.
    OtherToken,
    /// The native coin, the requested amount in wei.
    Native,
    /// The token, ten times the requested amount (its decimals taken as 7, not 6).
    TenTimes,
    /// The token, the requested amount, to another address.
    Elsewhere,
    /// The token, as requested, but from a wallet that is none of the custodian's payout
    /// addresses (someone else's transfer the provider names as ours).
    OtherWallet,
    /// Nothing: the provider names a transfer its hot wallet made, of the token and the amount,
    /// to the destination, final before the request was made (an earlier payout, named as ours).
    Earlier,
    /// As [`Pays::Earlier`], the transfer made just before the request: in the head block then,
    /// not final yet.
    JustBefore,
}

/// A double on its own anvil with the Fireblocks and BitGo profiles, paying `USDC` as `pays`
/// says, and the tokens it may pay.
struct TokenSim {
    child: Child,
    base: String,
    dir: PathBuf,
    anvil: Anvil,
    /// The token the executor knows as `USDC`.
    token: String,
    /// Where [`Pays::Elsewhere`] pays.
    elsewhere: String,
    /// [`Pays::Earlier`]: the destination the earlier transfer paid, and its transaction.
    earlier: Option<(String, String)>,
}

impl Drop for TokenSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Gives the double's hot wallet half the supply of `token` (from the deployer, dev account 0).
async fn fund_wallet(anvil: &Anvil, token: &str) -> anyhow::Result<()> {
    let hash = token_transfer(anvil, token, DEV_KEYS[0].0, SIM_WALLET, SUPPLY / 2).await?;
    let receipt = anvil.wait_receipt(&hash, Duration::from_secs(30)).await?;
    anyhow::ensure!(receipt["status"] == "0x1", "funding failed: {receipt}");
    Ok(())
}

impl TokenSim {
    async fn start(pays: Pays) -> anyhow::Result<TokenSim> {
        let anvil = Anvil::start().await?;
        let token = deploy_test_token(&anvil, SUPPLY).await?;
        fund_wallet(&anvil, &token).await?;
        let paid_in = match pays {
            Pays::OtherToken => {
                let other = deploy_test_token(&anvil, SUPPLY).await?;
                fund_wallet(&anvil, &other).await?;
                Some(other)
            }
            Pays::Native => None,
            Pays::Token
            | Pays::TenTimes
            | Pays::Elsewhere
            | Pays::OtherWallet
            | Pays::Earlier
            | Pays::JustBefore => Some(token.clone()),
        };
        // Another wallet: anvil's funded development account 1, given tokens of its own.
        let hot_wallet_key = if pays == Pays::OtherWallet {
            let hash =
                token_transfer(&anvil, &token, DEV_KEYS[0].0, DEV_KEYS[1].0, SUPPLY / 4).await?;
            anvil.wait_receipt(&hash, Duration::from_secs(30)).await?;
            DEV_KEYS[1].1
        } else {
            SIM_WALLET_KEY
        };
        let dir = std::env::temp_dir().join(format!("opledger-erc20-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        rsa_key(&dir.join("api.pem"))?;
        rsa_key(&dir.join("webhook.pem"))?;
        std::fs::write(dir.join("api_key"), API_KEY)?;
        std::fs::write(dir.join("bitgo_token"), "bitgo-test-token")?;
        std::fs::write(dir.join("bitgo_passphrase"), "bitgo-test-passphrase")?;
        let elsewhere = fresh_address();
        let earlier = match pays {
            Pays::Earlier => Some(pay_earlier(&anvil, &token, 5).await?),
            Pays::JustBefore => Some(pay_earlier(&anvil, &token, 0).await?),
            _ => None,
        };
        let tokens = match &paid_in {
            Some(contract) => json!({ASSET: contract, BITGO_COIN: contract}),
            None => json!({}),
        };
        let config = json!({
            "chain": {"rpc_url": anvil.rpc_url(), "chain_id": anvil.chain_id(),
                      "hot_wallet_key": hot_wallet_key},
            "decimals": if pays == Pays::TenTimes { 7 } else { 6 },
            "confirmations": 1,
            "faults": {"seed": 1, "rules": []},
            "tokens": tokens,
            "divert_to": (pays == Pays::Elsewhere).then_some(&elsewhere),
            "names_hash": earlier.as_ref().map(|(_, hash)| hash),
            "fireblocks": {
                "api_key": API_KEY,
                "api_public_key_pem": std::fs::read_to_string(dir.join("api.pem.pub"))?,
                "vault_account_id": "0", "asset_id": ASSET, "workspace_id": "ws-test",
                "webhook_signing_keys_pem": [std::fs::read_to_string(dir.join("webhook.pem"))?],
            },
            "bitgo": {
                "coin": BITGO_COIN, "wallet_id": BITGO_WALLET,
                "access_token": "bitgo-test-token", "wallet_passphrase": "bitgo-test-passphrase",
                "webhook_secret": "bitgo-test-webhook-secret",
            },
        });
        let path = dir.join("sim.json");
        std::fs::write(&path, serde_json::to_vec(&config)?)?;
        let mut child = Command::new(opledger_testkit::binary_path("opledger-custodian-sim")?)
            .arg("--config")
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("sim stdout"))?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(addr) = line.trim().strip_prefix("listening on ") else {
            let _ = child.kill();
            anyhow::bail!("the double did not start: {line:?}");
        };
        Ok(TokenSim {
            base: format!("http://{addr}"),
            child,
            dir,
            anvil,
            token,
            elsewhere,
            earlier,
        })
    }

    /// The executor's Fireblocks account for `tenant`'s `USDC` (6 decimals).
    fn fireblocks_account(&self, tenant: &Tenant) -> anyhow::Result<AccountRoute> {
        self.route(
            "fireblocks-usdc",
            tenant,
            json!({
                "profile": "lookup_by_reference",
                "base_url": self.base,
                "api_key_file": self.dir.join("api_key"),
                "api_secret_file": self.dir.join("api.pem"),
                "vault_account_id": "0",
                "asset_id": ASSET,
                "decimals": 6,
                "timeout_secs": 2,
                "consistency_window_secs": 5,
            }),
        )
    }

    /// The executor's BitGo wallet for `tenant`'s `USDC` (amounts in base units).
    fn bitgo_account(&self, tenant: &Tenant) -> anyhow::Result<AccountRoute> {
        self.route(
            "bitgo-usdc",
            tenant,
            json!({
                "profile": "one_send_per_reference",
                "base_url": self.base,
                "access_token_file": self.dir.join("bitgo_token"),
                "wallet_passphrase_file": self.dir.join("bitgo_passphrase"),
                "coin": BITGO_COIN,
                "wallet_id": BITGO_WALLET,
                "timeout_secs": 2,
                "consistency_window_secs": 5,
            }),
        )
    }

    fn route(&self, name: &str, tenant: &Tenant, provider: Value) -> anyhow::Result<AccountRoute> {
        Ok(AccountRoute {
            name: name.to_owned(),
            tenant: tenant.id.to_string(),
            network: NETWORK.to_owned(),
            asset: ASSET.to_owned(),
            provider: serde_json::from_value(provider)?,
        })
    }

    /// The transfers the double put on chain for `reference` (`GET /sim/transfers`).
    async fn transfers_of(&self, reference: &str) -> anyhow::Result<Vec<Value>> {
        let answer = reqwest::Client::new()
            .get(format!("{}/sim/transfers", self.base))
            .send()
            .await?;
        let all: Value = serde_json::from_slice(&answer.bytes().await?)?;
        Ok(all
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t["reference"].as_str() == Some(reference))
            .collect())
    }
}

/// A transfer of `AMOUNT` of `token` from the double's hot wallet to a fresh address, `deeper`
/// blocks mined on top of it before any withdrawal exists: its destination and transaction.
async fn pay_earlier(anvil: &Anvil, token: &str, deeper: u64) -> anyhow::Result<(String, String)> {
    let to = fresh_address();
    anvil
        .rpc("anvil_impersonateAccount", json!([SIM_WALLET]))
        .await?;
    let hash = token_transfer(anvil, token, SIM_WALLET, &to, AMOUNT.parse()?).await?;
    let receipt = anvil.wait_receipt(&hash, Duration::from_secs(30)).await?;
    anyhow::ensure!(
        receipt["status"] == "0x1",
        "the earlier payout failed: {receipt}"
    );
    anvil
        .rpc("anvil_stopImpersonatingAccount", json!([SIM_WALLET]))
        .await?;
    if deeper > 0 {
        anvil.mine(deeper).await?;
    }
    Ok((to, hash))
}

/// A fresh address nobody holds anything at.
fn fresh_address() -> String {
    format!(
        "0x{}",
        hex::encode(uuid::Uuid::new_v4().as_bytes()) + "00000000"
    )
}

/// The executor's configuration with `accounts`, watching the double's node (quorum 1, three
/// confirmations) with `assets` as its `[payout_assets.anvil]` (none: the default, native ETH and
/// no token), written as TOML and loaded as the binary loads it.
fn load_config(
    stack: &Stack,
    sim: &TokenSim,
    accounts: Vec<AccountRoute>,
    assets: Option<PayoutAssets>,
) -> anyhow::Result<Result<Config, opledger_config::ConfigError>> {
    let config = Config {
        base: opledger_config::ServiceBase {
            database_url: opledger_config::DatabaseUrl(stack.url(ServiceRole::Custodian)),
            ..Config::default().base
        },
        executor_id: "executor-erc20".to_owned(),
        trust_roots: accounts
            .iter()
            .map(|a| Ok(trust_root(a.tenant.parse()?)))
            .collect::<anyhow::Result<_>>()?,
        accounts,
        evidence: BTreeMap::from([(
            NETWORK.to_owned(),
            opledger_tests::chain::evidence(&[sim.anvil.rpc_url().as_str()], 1),
        )]),
        payout_assets: assets
            .map(|a| BTreeMap::from([(NETWORK.to_owned(), a)]))
            .unwrap_or_default(),
        follow_every_secs: 1,
        ..Config::default()
    };
    let path = sim.dir.join("custodian.toml");
    std::fs::write(&path, toml::to_string(&config)?)?;
    Ok(Config::load(Some(&path)))
}

/// The executor built from its loaded configuration (`opledger_custodian_executor::executor`),
/// knowing the double's token as `USDC`.
async fn token_executor(
    stack: &Stack,
    sim: &TokenSim,
    accounts: Vec<AccountRoute>,
) -> anyhow::Result<Executor> {
    // Without the token among the network's assets, a USDC account is refused at load.
    let refused = load_config(stack, sim, accounts.clone(), None)?;
    assert!(
        matches!(
            &refused,
            Err(opledger_config::ConfigError::Invalid {
                field: "payout_assets",
                ..
            })
        ),
        "{refused:?}"
    );
    let assets = PayoutAssets {
        native: "ETH".to_owned(),
        tokens: BTreeMap::from([(ASSET.to_owned(), sim.token.clone())]),
        senders: vec![SIM_WALLET.to_owned()],
    };
    let config = load_config(stack, sim, accounts, Some(assets))??;
    let login = Store::connect(&stack.url(ServiceRole::Custodian), StoreConfig::default())
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
    Ok(opledger_custodian_executor::executor(
        &config,
        login.custodian(),
    )?)
}

/// A tenant named `name` holding `USDC` in `treasury`.
async fn usdc_tenant(stack: &Stack, name: &str) -> anyhow::Result<Tenant> {
    let tenant = stack.tenant(name).await?;
    stack.fund(&tenant, "treasury", ASSET, "1000000000").await?;
    Ok(tenant)
}

/// An approved withdrawal of `AMOUNT` `USDC` from `tenant` to a fresh address, through an
/// operations service routing the tenant's test network to a custodian; its id and destination.
async fn approved_usdc(
    stack: &Stack,
    tenant: &Tenant,
    destination: String,
) -> anyhow::Result<(String, String)> {
    let mut p = payload(AMOUNT, &destination);
    p.asset = ASSET.to_owned();
    let created = opledger_tests::custodian::approved_payload(stack, tenant, p).await?;
    Ok((created.withdrawal_id, destination))
}

fn confirmed(books: &Books) -> bool {
    books.state == "CONFIRMED"
}

#[tokio::test]
async fn a_token_withdrawal_through_a_custodian_settles_from_its_transfer_log() -> anyhow::Result<()>
{
    let sim = TokenSim::start(Pays::Token).await?;
    let stack = Stack::start().await?;
    let acme = usdc_tenant(&stack, "acme").await?;
    let globex = usdc_tenant(&stack, "globex").await?;
    let accounts = vec![sim.fireblocks_account(&acme)?, sim.bitgo_account(&globex)?];
    let executor = token_executor(&stack, &sim, accounts).await?;
    let amount: u128 = AMOUNT.parse()?;
    for tenant in [&acme, &globex] {
        let (op, destination) = approved_usdc(&stack, tenant, fresh_address()).await?;
        let done = pass_until(&stack, &executor, &op, Some(&sim.anvil), WITHIN, confirmed).await?;
        // Paid once, in the token, from the double's wallet: the destination holds exactly the
        // amount of the token and nothing of the native coin.
        let transfers = sim.transfers_of(&op).await?;
        assert_eq!(transfers.len(), 1, "{transfers:?}");
        let hash = transfers[0]["hash"].as_str().unwrap_or_default();
        assert_eq!(
            token_balance(&sim.anvil, &sim.token, &destination).await?,
            amount
        );
        assert_eq!(sim.anvil.balance(&destination).await?, 0);
        let receipt = sim
            .anvil
            .receipt(hash)
            .await?
            .ok_or_else(|| anyhow::anyhow!("no receipt"))?;
        assert_eq!(receipt["to"].as_str(), Some(sim.token.as_str()));
        // Settled once, on that transaction, in its block.
        assert_eq!(
            (done.hold.as_str(), done.settles),
            ("SETTLED", 1),
            "{done:?}"
        );
        assert_eq!((done.sends, done.releases), (1, 0), "{done:?}");
        assert!(done.escalations.is_empty(), "{done:?}");
        let live = done.live_inclusions();
        assert_eq!(live.len(), 1, "{done:?}");
        assert_eq!(live[0].tx_hash, hash);
        assert_eq!(
            receipt["blockHash"].as_str(),
            Some(live[0].block_hash.as_str())
        );
    }
    stack.assert_invariants().await
}

/// Pays a `USDC` withdrawal through a double paying as `pays` and shows it is never settled:
/// escalated as contradicted with `reason`, the hold kept, sent once and paid once.
async fn never_settled(pays: Pays, reason: &str) -> anyhow::Result<()> {
    let sim = TokenSim::start(pays).await?;
    let stack = Stack::start().await?;
    let acme = usdc_tenant(&stack, "acme").await?;
    let executor = token_executor(&stack, &sim, vec![sim.fireblocks_account(&acme)?]).await?;
    // The earlier transfer's destination, when the double names it.
    let to = sim.earlier.as_ref().map(|(to, _)| to.clone());
    let (op, destination) = approved_usdc(&stack, &acme, to.unwrap_or_else(fresh_address)).await?;
    let escalated = |b: &Books| b.escalations.iter().any(|e| e == CONTRADICTED);
    pass_until(&stack, &executor, &op, Some(&sim.anvil), WITHIN, escalated).await?;
    // The chain stays what it is: more blocks, more passes, still nothing settled.
    for _ in 0..5 {
        executor.pass(16, 4).await;
        sim.anvil.mine(1).await?;
    }
    let books = books(&stack, &op).await?;
    assert_eq!(books.state, "BROADCAST", "{books:?}");
    assert_eq!(books.hold, "OPEN", "{books:?}");
    assert_eq!((books.settles, books.releases), (0, 0), "{books:?}");
    assert!(books.live_inclusions().is_empty(), "{books:?}");
    assert_eq!(books.sends, 1, "{books:?}");
    // The provider's record named the transaction, and the chain has it, final and successful.
    // ([`Pays::Earlier`]: the double made no transfer; it named the earlier one.)
    let transfers = sim.transfers_of(&op).await?;
    let hash = match &sim.earlier {
        Some((_, earlier)) => {
            assert!(transfers.is_empty(), "{transfers:?}");
            earlier.as_str()
        }
        None => {
            assert_eq!(transfers.len(), 1, "{transfers:?}");
            transfers[0]["hash"].as_str().unwrap_or_default()
        }
    };
    assert_eq!(
        books.records.last().and_then(|r| r.tx_hash.as_deref()),
        Some(hash)
    );
    let receipt = sim
        .anvil
        .receipt(hash)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no receipt"))?;
    assert_eq!(receipt["status"], "0x1");
    // The security event says why.
    let details: Vec<String> = sqlx::query_scalar(
        "SELECT detail FROM security_events WHERE op_id = $1::uuid AND kind = $2",
    )
    .bind(&op)
    .bind(CONTRADICTED)
    .fetch_all(stack.admin.pool())
    .await?;
    assert!(!details.is_empty());
    assert!(details.iter().all(|d| d == reason), "{details:?}");
    // What the destination got of the approved token.
    let expected = match pays {
        Pays::TenTimes => AMOUNT.parse::<u128>()? * 10,
        // Paid, but by someone else, or before the request: no payout of this request.
        Pays::OtherWallet | Pays::Earlier | Pays::JustBefore => AMOUNT.parse::<u128>()?,
        _ => 0,
    };
    assert_eq!(
        token_balance(&sim.anvil, &sim.token, &destination).await?,
        expected
    );
    if pays == Pays::Elsewhere {
        assert_eq!(
            token_balance(&sim.anvil, &sim.token, &sim.elsewhere).await?,
            AMOUNT.parse::<u128>()?
        );
    }
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_transaction_paying_another_token_never_settles_a_token_withdrawal() -> anyhow::Result<()>
{
    never_settled(Pays::OtherToken, "PAYOUT_NO_TOKEN_TRANSFER").await
}

#[tokio::test]
async fn a_transaction_paying_the_native_coin_never_settles_a_token_withdrawal()
-> anyhow::Result<()> {
    never_settled(Pays::Native, "PAYOUT_NO_TOKEN_TRANSFER").await
}

#[tokio::test]
async fn a_transaction_paying_another_amount_never_settles_a_token_withdrawal() -> anyhow::Result<()>
{
    never_settled(Pays::TenTimes, "PAYOUT_AMOUNT_MISMATCH").await
}

/// The provider names a transfer of the token, of the amount, to the destination, made from a
/// wallet that is none of the custodian's payout addresses: someone else's, never ours.
#[tokio::test]
async fn a_transfer_from_another_wallet_never_settles_a_token_withdrawal() -> anyhow::Result<()> {
    never_settled(Pays::OtherWallet, "PAYOUT_SENDER_MISMATCH").await
}

/// The provider names a transfer from its own wallet, of the token and the amount, to the
/// destination, that was final before the request was made: an earlier payout, never this one.
#[tokio::test]
async fn a_transfer_made_before_the_request_never_settles_a_token_withdrawal() -> anyhow::Result<()>
{
    never_settled(Pays::Earlier, "PAYOUT_BEFORE_REQUEST").await
}

/// The same, the earlier transfer in the head block when the request is made, not final yet: it
/// was in the chain the request saw, and that chain's head is still canonical.
#[tokio::test]
async fn a_transfer_in_the_head_block_at_the_request_never_settles_a_token_withdrawal()
-> anyhow::Result<()> {
    never_settled(Pays::JustBefore, "PAYOUT_BEFORE_REQUEST").await
}

#[tokio::test]
async fn a_transaction_paying_another_address_never_settles_a_token_withdrawal()
-> anyhow::Result<()> {
    never_settled(Pays::Elsewhere, "PAYOUT_RECIPIENT_MISMATCH").await
}
