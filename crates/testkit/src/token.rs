//! A real ERC-20 on a test's [`Anvil`]: `TestToken` (6 decimals, the whole supply minted to the
//! deployer), deployed and driven over plain JSON-RPC with hand-encoded calldata.
//!
//! The contract is `tools/contracts/TestToken.sol`; its ABI and bytecode come from the committed
//! artifact `tools/contracts/TestToken.json`, compiled by `scripts/contracts.sh compile` (and
//! checked against the source by `scripts/contracts.sh check`), built into this crate with
//! `include_str!`: no compiler is needed to run the tests.

use std::time::Duration;

use anyhow::{Context, anyhow, bail, ensure};
use serde_json::{Value, json};

use crate::anvil::{Anvil, DEV_KEYS};

/// The compiled `TestToken` artifact: `{ contract, solc, abi, bytecode }`.
const ARTIFACT: &str = include_str!("../../../tools/contracts/TestToken.json");

/// `TestToken.decimals()`.
pub const TEST_TOKEN_DECIMALS: u8 = 6;

/// `topics[0]` of the ERC-20 `Transfer(address,uint256)` event:
/// keccak256("Transfer(address,address,uint256)").
pub const TRANSFER_EVENT_TOPIC: &str =
    "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

/// `balanceOf(address)`.
const BALANCE_OF_SELECTOR: &str = "70a08231";
/// `transfer(address,uint256)`.
const TRANSFER_SELECTOR: &str = "a9059cbb";

/// How long [`deploy_test_token`] waits for the deployment's receipt.
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Deploys a new `TestToken` from dev account 0 ([`DEV_KEYS`]), which receives the whole
/// `initial_supply` (in base units: 6 decimals), and returns the contract's address (`0x`,
/// lowercase).
///
/// Waits for the receipt, so the node must mine by itself: automine (the default) or a block
/// time. Fails if the deployment reverted.
pub async fn deploy_test_token(anvil: &Anvil, initial_supply: u128) -> anyhow::Result<String> {
    let bytecode = artifact_bytecode(ARTIFACT)?;
    let data = format!("{bytecode}{}", encode_uint(initial_supply));
    let (deployer, _) = DEV_KEYS[0];
    let hash = anvil
        .send_transaction(json!({ "from": deployer, "data": data }))
        .await
        .context("deploying TestToken (eth_sendTransaction)")?;
    let receipt = anvil
        .wait_receipt(&hash, RECEIPT_TIMEOUT)
        .await
        .context("waiting for the TestToken deployment")?;
    ensure!(
        receipt.get("status") == Some(&json!("0x1")),
        "the TestToken deployment {hash} failed: {receipt}"
    );
    let address = receipt
        .get("contractAddress")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            anyhow!("the receipt of TestToken deployment {hash} has no contractAddress: {receipt}")
        })?;
    address_hex(address).with_context(|| format!("contractAddress of deployment {hash}"))?;
    Ok(address.to_ascii_lowercase())
}

/// `token.balanceOf(holder)` at the latest block (`eth_call`), in base units.
pub async fn token_balance(anvil: &Anvil, token: &str, holder: &str) -> anyhow::Result<u128> {
    address_hex(token).context("token address")?;
    let data = format!(
        "0x{BALANCE_OF_SELECTOR}{}",
        encode_address(holder).context("holder address")?
    );
    let result = anvil
        .rpc("eth_call", json!([{ "to": token, "data": data }, "latest"]))
        .await
        .with_context(|| format!("balanceOf({holder}) on token {token} (eth_call)"))?;
    decode_uint(&result).with_context(|| format!("balanceOf({holder}) on token {token}"))
}

/// Sends `token.transfer(to, amount)` from the unlocked account `from_unlocked` (a dev account
/// of anvil, e.g. `DEV_KEYS[0].0`, the deployer holding the supply) with `eth_sendTransaction`,
/// e.g. to fund a hot wallet with tokens; the transaction hash.
///
/// Does not wait for the receipt (pass the hash to [`Anvil::wait_receipt`]), so it also works with
/// automine off. A transfer that would revert (amount above the sender's balance, recipient
/// zero) is refused before it is sent, with the contract's message: anvil's
/// `eth_sendTransaction` would otherwise mine it, reverted, and return its hash like any other.
/// The check runs `eth_call` against the pending state, so transfers still waiting in the pool
/// count.
pub async fn token_transfer(
    anvil: &Anvil,
    token: &str,
    from_unlocked: &str,
    to: &str,
    amount: u128,
) -> anyhow::Result<String> {
    address_hex(token).context("token address")?;
    address_hex(from_unlocked).context("sender address")?;
    let data = format!(
        "0x{TRANSFER_SELECTOR}{}{}",
        encode_address(to).context("recipient address")?,
        encode_uint(amount)
    );
    let what = || format!("transfer({to}, {amount}) from {from_unlocked} on token {token}");
    let tx = json!({ "from": from_unlocked, "to": token, "data": data });
    let returned = anvil
        .rpc("eth_call", json!([tx, "pending"]))
        .await
        .with_context(|| format!("simulating {} (eth_call on the pending block)", what()))?;
    ensure!(
        decode_uint(&returned).ok() == Some(1),
        "{} would return {returned}, not true",
        what()
    );
    let hash = anvil
        .send_transaction(tx)
        .await
        .with_context(|| format!("{} (eth_sendTransaction)", what()))?;
    Ok(hash)
}

/// The `0x`-prefixed creation bytecode of the artifact.
fn artifact_bytecode(artifact: &str) -> anyhow::Result<String> {
    let artifact: Value =
        serde_json::from_str(artifact).context("tools/contracts/TestToken.json is not JSON")?;
    let bytecode = artifact
        .get("bytecode")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("tools/contracts/TestToken.json has no \"bytecode\" string"))?;
    let digits = bytecode
        .strip_prefix("0x")
        .filter(|d| !d.is_empty() && d.len() % 2 == 0)
        .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            anyhow!("the bytecode of tools/contracts/TestToken.json is not 0x-prefixed hex bytes")
        })?;
    Ok(format!("0x{digits}"))
}

/// The 40 hex digits of a `0x`-prefixed 20-byte address (any case), lowercased.
fn address_hex(address: &str) -> anyhow::Result<String> {
    match address.strip_prefix("0x") {
        Some(digits) if digits.len() == 40 && digits.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Ok(digits.to_ascii_lowercase())
        }
        _ => bail!("{address:?} is not a 0x-prefixed 20-byte hex address"),
    }
}

/// An address as one ABI word: 12 zero bytes, then the address.
fn encode_address(address: &str) -> anyhow::Result<String> {
    Ok(format!("{:0>64}", address_hex(address)?))
}

/// A `uint256` ABI word (big-endian, 32 bytes) holding `value`.
fn encode_uint(value: u128) -> String {
    format!("{value:064x}")
}

/// A `uint256` returned by `eth_call` (exactly one ABI word), which must fit in 128 bits.
fn decode_uint(result: &Value) -> anyhow::Result<u128> {
    let text = result
        .as_str()
        .ok_or_else(|| anyhow!("expected hex return data, got {result}"))?;
    let digits = text
        .strip_prefix("0x")
        .filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| anyhow!("expected one 32-byte ABI word, got {text:?}"))?;
    let (high, low) = digits.split_at(32);
    ensure!(
        high.bytes().all(|b| b == b'0'),
        "{text} does not fit in 128 bits"
    );
    u128::from_str_radix(low, 16).with_context(|| format!("{text} is not hex"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEI_PER_ETH: u128 = 1_000_000_000_000_000_000;
    /// 5 * 10^18 tokens of 6 decimals: more base units than fit in 64 bits.
    const SUPPLY: u128 = 5 * 10u128.pow(24);

    /// A `uint256` view of the token without arguments (`totalSupply()`, `decimals()`).
    async fn call_uint(anvil: &Anvil, token: &str, selector: &str) -> anyhow::Result<u128> {
        let result = anvil
            .rpc(
                "eth_call",
                json!([{ "to": token, "data": format!("0x{selector}") }, "latest"]),
            )
            .await?;
        decode_uint(&result)
    }

    #[test]
    fn artifact_is_the_test_token() -> anyhow::Result<()> {
        let artifact: Value = serde_json::from_str(ARTIFACT)?;
        assert_eq!(artifact.get("contract"), Some(&json!("TestToken")));
        let solc = artifact.get("solc").and_then(Value::as_str).unwrap_or("");
        assert!(solc.starts_with("0.8."), "{solc}");
        let abi = artifact
            .get("abi")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("no abi array"))?;
        let signature = |entry: &Value| {
            let name = entry.get("name").and_then(Value::as_str).unwrap_or("");
            let inputs: Vec<&str> = entry
                .get("inputs")
                .and_then(Value::as_array)
                .map(|inputs| {
                    inputs
                        .iter()
                        .filter_map(|i| i.get("type").and_then(Value::as_str))
                        .collect()
                })
                .unwrap_or_default();
            format!("{name}({})", inputs.join(","))
        };
        let signatures: Vec<String> = abi.iter().map(signature).collect();
        for expected in [
            "name()",
            "symbol()",
            "decimals()",
            "totalSupply()",
            "balanceOf(address)",
            "transfer(address,uint256)",
            "transferFrom(address,address,uint256)",
            "approve(address,uint256)",
            "allowance(address,address)",
            "Transfer(address,address,uint256)",
            "Approval(address,address,uint256)",
        ] {
            assert!(
                signatures.iter().any(|s| s == expected),
                "{expected} missing from the ABI: {signatures:?}"
            );
        }
        let bytecode = artifact_bytecode(ARTIFACT)?;
        assert!(bytecode.len() > 1000, "{bytecode}");
        Ok(())
    }

    #[test]
    fn calldata_words_encode_and_decode() -> anyhow::Result<()> {
        assert_eq!(
            encode_address(DEV_KEYS[1].0)?,
            "00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c8"
        );
        assert_eq!(encode_uint(0), "0".repeat(64));
        assert_eq!(
            encode_uint(u128::MAX),
            format!("{}{}", "0".repeat(32), "f".repeat(32))
        );
        assert_eq!(encode_uint(0x1234).len(), 64);
        for value in [0, 1, 6, SUPPLY, u128::MAX] {
            assert_eq!(
                decode_uint(&json!(format!("0x{}", encode_uint(value))))?,
                value
            );
        }
        let too_big = format!("0x{}{}", "0".repeat(31), "1".repeat(33));
        assert!(decode_uint(&json!(too_big)).is_err());
        assert!(decode_uint(&json!("0x")).is_err());
        assert!(decode_uint(&json!("0x01")).is_err());
        assert!(decode_uint(&json!(1)).is_err());
        for bad in [
            "",
            "0x",
            "70997970C51812dc3A010C7d01b50e0d17dc79C8",
            "0x70997970C51812dc3A010C7d01b50e0d17dc79C",
            "0x70997970C51812dc3A010C7d01b50e0d17dc79CZ",
        ] {
            assert!(address_hex(bad).is_err(), "{bad:?}");
        }
        assert!(artifact_bytecode(r#"{"bytecode": "0x0"}"#).is_err());
        assert!(artifact_bytecode(r#"{"bytecode": "6080"}"#).is_err());
        assert!(artifact_bytecode(r#"{"abi": []}"#).is_err());
        Ok(())
    }

    #[tokio::test]
    async fn deploy_balance_and_transfer() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;
        let (deployer, _) = DEV_KEYS[0];
        let (hot_wallet, _) = DEV_KEYS[1];

        let token = deploy_test_token(&anvil, SUPPLY).await?;
        assert_eq!(address_hex(&token)?.len(), 40);
        assert_eq!(token, token.to_ascii_lowercase());
        let code = anvil.rpc("eth_getCode", json!([token, "latest"])).await?;
        assert!(
            code.as_str().is_some_and(|c| c.len() > 2),
            "no code at {token}: {code}"
        );
        assert_eq!(call_uint(&anvil, &token, "18160ddd").await?, SUPPLY); // totalSupply()
        assert_eq!(
            call_uint(&anvil, &token, "313ce567").await?, // decimals()
            u128::from(TEST_TOKEN_DECIMALS)
        );
        assert_eq!(token_balance(&anvil, &token, deployer).await?, SUPPLY);
        assert_eq!(token_balance(&anvil, &token, hot_wallet).await?, 0);

        let amount = 1_234_567_890; // 1234.56789 tokens
        let hash = token_transfer(&anvil, &token, deployer, hot_wallet, amount).await?;
        let receipt = anvil.wait_receipt(&hash, RECEIPT_TIMEOUT).await?;
        assert_eq!(receipt.get("status"), Some(&json!("0x1")), "{receipt}");
        assert_eq!(
            token_balance(&anvil, &token, deployer).await?,
            SUPPLY - amount
        );
        assert_eq!(token_balance(&anvil, &token, hot_wallet).await?, amount);
        // Token transfers move no ether to the recipient.
        assert_eq!(anvil.balance(hot_wallet).await?, 10_000 * WEI_PER_ETH);

        // The receipt carries exactly one log: Transfer(deployer, hot wallet, amount) emitted by
        // the token.
        let logs = receipt
            .get("logs")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("no logs in {receipt}"))?;
        assert_eq!(logs.len(), 1, "{receipt}");
        let log = &logs[0];
        assert_eq!(log.get("address"), Some(&json!(token)), "{log}");
        let word = |address: &str| encode_address(address).map(|w| format!("0x{w}"));
        assert_eq!(
            log.get("topics"),
            Some(&json!([
                TRANSFER_EVENT_TOPIC,
                word(deployer)?,
                word(hot_wallet)?
            ])),
            "{log}"
        );
        assert_eq!(
            log.get("data"),
            Some(&json!(format!("0x{}", encode_uint(amount)))),
            "{log}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn deployment_mints_and_overdrafts_are_refused_before_sending() -> anyhow::Result<()> {
        let anvil = Anvil::start().await?;
        let (deployer, _) = DEV_KEYS[0];
        let (other, _) = DEV_KEYS[1];
        let token = deploy_test_token(&anvil, 1_000).await?;

        // The mint is a Transfer from the zero address, in the deployment's receipt.
        let block = anvil.block_number().await?;
        let logs = anvil
            .rpc(
                "eth_getLogs",
                json!([{ "address": token, "fromBlock": format!("{block:#x}"),
                         "toBlock": format!("{block:#x}") }]),
            )
            .await?;
        let topics: Vec<Value> = logs
            .as_array()
            .map(|logs| {
                logs.iter()
                    .filter_map(|l| l.get("topics").cloned())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(
            topics,
            vec![json!([
                TRANSFER_EVENT_TOPIC,
                format!("0x{}", "0".repeat(64)),
                format!("0x{}", encode_address(deployer)?)
            ])],
            "{logs}"
        );

        // More than the balance: refused when sending, nothing moves.
        let err = token_transfer(&anvil, &token, other, deployer, 1)
            .await
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(err.contains("insufficient balance"), "{err}");
        let err = token_transfer(&anvil, &token, deployer, other, 1_001)
            .await
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(err.contains("insufficient balance"), "{err}");
        assert_eq!(token_balance(&anvil, &token, deployer).await?, 1_000);
        assert_eq!(token_balance(&anvil, &token, other).await?, 0);
        assert_eq!(
            anvil.nonce(other, "latest").await?,
            0,
            "a reverted transfer was sent"
        );

        // Automine off: transfers waiting in the pool count.
        anvil.set_automine(false).await?;
        let first = token_transfer(&anvil, &token, deployer, other, 600).await?;
        let err = token_transfer(&anvil, &token, deployer, other, 600)
            .await
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(err.contains("insufficient balance"), "{err}");
        assert_eq!(anvil.txpool_status().await?.pending, 1);
        assert_eq!(token_balance(&anvil, &token, other).await?, 0);
        anvil.mine(1).await?;
        let receipt = anvil.wait_receipt(&first, RECEIPT_TIMEOUT).await?;
        assert_eq!(receipt.get("status"), Some(&json!("0x1")), "{receipt}");
        assert_eq!(token_balance(&anvil, &token, deployer).await?, 400);
        assert_eq!(token_balance(&anvil, &token, other).await?, 600);

        // Bad addresses never reach the node.
        assert!(token_balance(&anvil, "0x1234", deployer).await.is_err());
        assert!(
            token_transfer(&anvil, &token, deployer, "not an address", 1)
                .await
                .is_err()
        );
        Ok(())
    }
}
