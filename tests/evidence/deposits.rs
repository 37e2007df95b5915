//! A deposit verified from chain evidence (`Pinned::deposit` judged by
//! `opledger_domain::witness::deposit::judge_deposit`) against a real anvil node: native and
//! ERC-20 deposits confirmed only at final depth, every contradiction refused with its exact
//! reason, nothing concluded from absence, and never a confirmation on one lying node's word.

use std::collections::HashMap;

use anyhow::{Context, anyhow};
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use opledger_chain::evidence::{
    B256, BlockRef, EvidenceReader, Finality, NoAgreement, ObservedDeposit, Pinned,
};
use opledger_domain::evidence::content::Asset;
use opledger_domain::evidence::{Address, Hash32, parse_address};
use opledger_domain::witness::deposit::{
    DepositClaim, DepositRefusal, DepositVerdict, ERC20_TRANSFER_TOPIC, NotYet, judge_deposit,
};
use opledger_testkit::{
    DEV_KEYS, RpcMode, TRANSFER_EVENT_TOPIC, deploy_test_token, token_transfer,
};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::{RECEIPT_TIMEOUT, World, b256, config, quantity};

/// The deposit address of the tests (an account nobody holds a key for).
const RECIPIENT: &str = "0x00000000000000000000000000000000d3905175";
/// Another account.
const SOMEONE_ELSE: &str = "0x0000000000000000000000000000000000e15e00";

fn address(text: &str) -> anyhow::Result<Address> {
    parse_address(text).ok_or_else(|| anyhow!("{text} is not an address"))
}

/// The witness's verdict on `claim` at `pass`: its endpoints' agreed observation, judged against
/// the pass's final block (exactly what the witness service does).
async fn verdict(pass: &Pinned, claim: &DepositClaim) -> DepositVerdict {
    let observed = pass
        .deposit(B256::from(claim.tx_hash), claim.log_index)
        .await;
    judge_deposit(claim, observed.as_ref().map_err(|e| *e), pass.final_block)
}

fn refused(refusal: DepositRefusal) -> DepositVerdict {
    DepositVerdict::Contradicted(refusal)
}

/// Sends `tx` from an unlocked dev account and waits for it to be mined: its hash, its including
/// block and its receipt.
async fn mined(world: &World, tx: Value) -> anyhow::Result<(Hash32, BlockRef, Value)> {
    let hash = world.anvil.send_transaction(tx).await?;
    let receipt = world.anvil.wait_receipt(&hash, RECEIPT_TIMEOUT).await?;
    let block = BlockRef {
        number: quantity(&receipt["blockNumber"])?,
        hash: b256(&receipt["blockHash"])?.0,
    };
    Ok((b256(&json!(hash))?.0, block, receipt))
}

/// Pays `value` wei from dev account 0 to `to`, mined at once.
async fn pay(world: &World, to: &str, value: u128) -> anyhow::Result<(Hash32, BlockRef)> {
    let (from, _) = DEV_KEYS[0];
    let (hash, block, receipt) = mined(
        world,
        json!({ "from": from, "to": to, "value": format!("{value:#x}") }),
    )
    .await?;
    anyhow::ensure!(receipt["status"] == json!("0x1"), "{receipt}");
    Ok((hash, block))
}

fn native_claim(tx_hash: Hash32, recipient: &str, amount: u128) -> anyhow::Result<DepositClaim> {
    Ok(DepositClaim {
        tx_hash,
        log_index: None,
        recipient: address(recipient)?,
        asset: Asset::Native,
        amount,
    })
}

fn token_claim(
    tx_hash: Hash32,
    log_index: u32,
    token: &str,
    recipient: &str,
    amount: u128,
) -> anyhow::Result<DepositClaim> {
    Ok(DepositClaim {
        tx_hash,
        log_index: Some(log_index),
        recipient: address(recipient)?,
        asset: Asset::Token(address(token)?),
        amount,
    })
}

/// `transfer(to, amount)` calldata of an ERC-20.
fn transfer_calldata(to: &str, amount: u128) -> String {
    format!(
        "0xa9059cbb{:0>64}{amount:064x}",
        to.trim_start_matches("0x").to_ascii_lowercase()
    )
}

#[tokio::test]
async fn a_native_deposit_is_not_yet_before_final_depth_and_confirmed_after() -> anyhow::Result<()>
{
    let world = World::start(2).await?;
    let reader = world.reader(2, Finality::Confirmations(3), 0)?;
    let (tx, included) = pay(&world, RECIPIENT, 1234).await?;
    assert_eq!(included.number, 1);
    let claim = native_claim(tx, RECIPIENT, 1234)?;

    // One and two confirmations: included, not final.
    for head in [1, 2] {
        let pass = reader.pin().await?;
        assert_eq!(pass.pinned.number, head);
        assert_eq!(
            verdict(&pass, &claim).await,
            DepositVerdict::NotYet(NotYet::NotFinal { block: included })
        );
        world.anvil.mine(1).await?;
    }
    // Three, the including block counted: final, and exactly the claimed transfer.
    let pass = reader.pin().await?;
    assert_eq!(pass.final_block, included);
    assert_eq!(
        pass.deposit(B256::from(tx), None).await?,
        ObservedDeposit::Included {
            tx_hash: tx,
            block: included,
            success: true,
            to: Some(address(RECIPIENT)?),
            value: Some(1234),
            log: None,
        }
    );
    assert_eq!(
        verdict(&pass, &claim).await,
        DepositVerdict::Confirmed { block: included }
    );
    Ok(())
}

#[tokio::test]
async fn a_native_deposit_claimed_otherwise_is_refused_with_the_exact_reason() -> anyhow::Result<()>
{
    let world = World::start(2).await?;
    let (tx, included) = pay(&world, RECIPIENT, 1234).await?;
    world.anvil.mine(1).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;
    assert_eq!(pass.final_block, included);
    let honest = native_claim(tx, RECIPIENT, 1234)?;
    assert_eq!(
        verdict(&pass, &honest).await,
        DepositVerdict::Confirmed { block: included }
    );

    let cases = [
        (
            native_claim(tx, SOMEONE_ELSE, 1234)?,
            DepositRefusal::RecipientMismatch,
        ),
        (
            native_claim(tx, RECIPIENT, 1235)?,
            DepositRefusal::AmountMismatch,
        ),
        (
            native_claim(tx, RECIPIENT, 1233)?,
            DepositRefusal::AmountMismatch,
        ),
        // A native transfer claimed as a token's: no log at the index, and no log at all.
        (
            token_claim(tx, 0, SOMEONE_ELSE, RECIPIENT, 1234)?,
            DepositRefusal::LogMissing,
        ),
        (
            DepositClaim {
                log_index: Some(0),
                ..honest.clone()
            },
            DepositRefusal::AssetMismatch,
        ),
        (
            DepositClaim {
                log_index: None,
                asset: Asset::Token(address(SOMEONE_ELSE)?),
                ..honest.clone()
            },
            DepositRefusal::AssetMismatch,
        ),
    ];
    for (claim, refusal) in cases {
        let found = verdict(&pass, &claim).await;
        assert_eq!(found, refused(refusal), "{claim:?}");
        if let DepositVerdict::Contradicted(refusal) = found {
            assert!(refusal.reason_code().starts_with("DEPOSIT_"));
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_reverted_deposit_is_refused_as_reverted() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let token = deploy_test_token(&world.anvil, 1_000_000).await?;
    let (rich, _) = DEV_KEYS[0];
    let (poor, _) = DEV_KEYS[1];
    // Value sent to the token contract, which accepts none: mined, reverted.
    let (native, native_block, receipt) = mined(
        &world,
        json!({ "from": rich, "to": token, "value": "0x5", "gas": "0x30000" }),
    )
    .await?;
    assert_eq!(receipt["status"], json!("0x0"));
    // A token transfer by an account that holds none of the token: mined, reverted, no log.
    let (transfer, _, receipt) = mined(
        &world,
        json!({ "from": poor, "to": token, "gas": "0x30000",
                "data": transfer_calldata(RECIPIENT, 7) }),
    )
    .await?;
    assert_eq!(receipt["status"], json!("0x0"));
    world.anvil.mine(1).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;

    assert!(matches!(
        pass.deposit(B256::from(native), None).await?,
        ObservedDeposit::Included { success: false, value: Some(5), block, .. } if block == native_block
    ));
    assert_eq!(
        verdict(&pass, &native_claim(native, &token, 5)?).await,
        refused(DepositRefusal::Reverted)
    );
    assert_eq!(
        verdict(&pass, &token_claim(transfer, 0, &token, RECIPIENT, 7)?).await,
        refused(DepositRefusal::Reverted)
    );
    Ok(())
}

#[tokio::test]
async fn an_unknown_transaction_is_not_yet_never_refused() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    pay(&world, RECIPIENT, 1).await?;
    world.anvil.mine(3).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;
    let unknown = [0x42; 32];
    assert_eq!(
        pass.deposit(B256::from(unknown), None).await?,
        ObservedDeposit::Absent
    );
    for claim in [
        native_claim(unknown, RECIPIENT, 1)?,
        token_claim(unknown, 0, SOMEONE_ELSE, RECIPIENT, 1)?,
    ] {
        assert_eq!(
            verdict(&pass, &claim).await,
            DepositVerdict::NotYet(NotYet::Absent)
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_token_deposit_is_confirmed_by_its_block_wide_log_index() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let token = deploy_test_token(&world.anvil, 1_000_000_000).await?;
    let (holder, _) = DEV_KEYS[0];
    // Two transfers in one block: the second's only log is at position 0 of its receipt and at
    // index 1 of the block.
    world.anvil.set_automine(false).await?;
    let first = token_transfer(&world.anvil, &token, holder, SOMEONE_ELSE, 5).await?;
    let second = token_transfer(&world.anvil, &token, holder, RECIPIENT, 7).await?;
    world.anvil.mine(1).await?;
    let first_receipt = world.anvil.wait_receipt(&first, RECEIPT_TIMEOUT).await?;
    let receipt = world.anvil.wait_receipt(&second, RECEIPT_TIMEOUT).await?;
    assert_eq!(receipt["blockNumber"], first_receipt["blockNumber"]);
    assert_eq!(receipt["logs"].as_array().map(Vec::len), Some(1));
    assert_eq!(quantity(&receipt["logs"][0]["logIndex"])?, 1);
    assert_eq!(receipt["logs"][0]["topics"][0], json!(TRANSFER_EVENT_TOPIC));
    let included = BlockRef {
        number: quantity(&receipt["blockNumber"])?,
        hash: b256(&receipt["blockHash"])?.0,
    };
    let (first, second) = (b256(&json!(first))?.0, b256(&json!(second))?.0);
    world.anvil.mine(1).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;
    assert_eq!(pass.final_block, included);

    let observed = pass.deposit(B256::from(second), Some(1)).await?;
    let ObservedDeposit::Included {
        log: Some(log),
        success: true,
        ..
    } = &observed
    else {
        panic!("no log at index 1: {observed:?}");
    };
    assert_eq!(
        (log.index, log.address, log.topics.len(), log.data.len()),
        (1, address(&token)?, 3, 32)
    );
    assert_eq!(log.topics[0], ERC20_TRANSFER_TOPIC);

    let honest = token_claim(second, 1, &token, RECIPIENT, 7)?;
    assert_eq!(
        verdict(&pass, &honest).await,
        DepositVerdict::Confirmed { block: included }
    );
    // The first transfer, by its own index.
    assert_eq!(
        verdict(&pass, &token_claim(first, 0, &token, SOMEONE_ELSE, 5)?).await,
        DepositVerdict::Confirmed { block: included }
    );
    let cases = [
        // Index 0 of the block is the first transfer's log, not this transaction's.
        (
            token_claim(second, 0, &token, RECIPIENT, 7)?,
            DepositRefusal::LogMissing,
        ),
        (
            token_claim(second, 2, &token, RECIPIENT, 7)?,
            DepositRefusal::LogMissing,
        ),
        // Claimed as another token.
        (
            token_claim(second, 1, SOMEONE_ELSE, RECIPIENT, 7)?,
            DepositRefusal::AssetMismatch,
        ),
        // Claimed as a native deposit, with or without the log.
        (
            DepositClaim {
                asset: Asset::Native,
                ..honest.clone()
            },
            DepositRefusal::AssetMismatch,
        ),
        (
            native_claim(second, RECIPIENT, 7)?,
            DepositRefusal::RecipientMismatch,
        ),
        (
            token_claim(second, 1, &token, SOMEONE_ELSE, 7)?,
            DepositRefusal::RecipientMismatch,
        ),
        (
            token_claim(second, 1, &token, RECIPIENT, 70)?,
            DepositRefusal::AmountMismatch,
        ),
        // Another transaction's transfer claimed for this recipient.
        (
            token_claim(first, 0, &token, RECIPIENT, 5)?,
            DepositRefusal::RecipientMismatch,
        ),
    ];
    for (claim, refusal) in cases {
        assert_eq!(verdict(&pass, &claim).await, refused(refusal), "{claim:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_deposit_reorganized_away_is_not_confirmed_any_more() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    world.anvil.mine(1).await?;
    let (tx, included) = pay(&world, RECIPIENT, 99).await?;
    assert_eq!(included.number, 2);
    world.anvil.mine(1).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let claim = native_claim(tx, RECIPIENT, 99)?;
    let before = reader.pin().await?;
    assert_eq!(
        verdict(&before, &claim).await,
        DepositVerdict::Confirmed { block: included }
    );

    // Blocks 2 and 3 are replaced by empty ones: the transfer is gone with them.
    world.anvil.reorg(2).await?;
    let after = reader.pin().await?;
    assert_eq!(after.pinned.number, 3);
    assert_eq!(
        verdict(&after, &claim).await,
        DepositVerdict::NotYet(NotYet::Absent)
    );
    // The pass pinned before reads nothing at its replaced pinned block.
    assert_eq!(
        verdict(&before, &claim).await,
        DepositVerdict::NotYet(NotYet::NoAgreement(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum: 2
        }))
    );
    Ok(())
}

#[tokio::test]
async fn a_deposit_read_is_one_request_per_endpoint_and_one_more_below_the_pinned_block()
-> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = pay(&world, RECIPIENT, 3).await?;
    let reader = world.reader(2, Finality::Confirmations(1), 0)?;
    let requests =
        |world: &World| -> Vec<u64> { world.proxies.iter().map(|p| p.requests()).collect() };
    let grew = |before: &[u64], after: &[u64]| -> Vec<u64> {
        after.iter().zip(before).map(|(a, b)| a - b).collect()
    };

    // Included in the pinned block itself: receipt, transaction and the pinned block's recheck
    // in one batch.
    let pass = reader.pin().await?;
    let before = requests(&world);
    assert!(matches!(
        pass.deposit(B256::from(tx), None).await?,
        ObservedDeposit::Included { .. }
    ));
    assert_eq!(grew(&before, &requests(&world)), vec![1, 1]);
    // Below it: one more for the canonical hash at its height.
    world.anvil.mine(2).await?;
    let pass = reader.pin().await?;
    let before = requests(&world);
    assert!(matches!(
        pass.deposit(B256::from(tx), None).await?,
        ObservedDeposit::Included { .. }
    ));
    assert_eq!(grew(&before, &requests(&world)), vec![2, 2]);
    // Absent: one.
    let before = requests(&world);
    assert_eq!(
        pass.deposit(B256::repeat_byte(7), None).await?,
        ObservedDeposit::Absent
    );
    assert_eq!(grew(&before, &requests(&world)), vec![1, 1]);
    Ok(())
}

#[tokio::test]
async fn a_node_hiding_or_forking_the_receipt_never_confirms_nor_refuses() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = pay(&world, RECIPIENT, 10).await?;
    world.anvil.mine(1).await?;
    let reader = world.reader(2, Finality::Confirmations(2), 0)?;
    let pass = reader.pin().await?;
    let claim = native_claim(tx, RECIPIENT, 10)?;
    let wrong = native_claim(tx, RECIPIENT, 11)?;

    // Its transaction is mined at or below the pinned block and it has no receipt for it (a
    // pruned or lying receipt index); or its receipt names a block that is not the
    // transaction's: no answer either way, and one answer is no quorum of two.
    for mode in [RpcMode::HideReceipts, RpcMode::ForkedReceipts] {
        world.proxies[1].set_mode(mode);
        let no_quorum = DepositVerdict::NotYet(NotYet::NoAgreement(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2,
        }));
        assert_eq!(verdict(&pass, &claim).await, no_quorum, "{mode:?}");
        assert_eq!(verdict(&pass, &wrong).await, no_quorum, "{mode:?}");
    }
    world.proxies[1].set_mode(RpcMode::Honest);
    assert!(matches!(
        verdict(&pass, &claim).await,
        DepositVerdict::Confirmed { .. }
    ));
    Ok(())
}

#[tokio::test]
async fn a_node_inflating_a_deposit_never_gets_it_confirmed() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = pay(&world, RECIPIENT, 10).await?;
    // The claim: ten thousand, where the chain shows ten.
    let inflated = native_claim(tx, RECIPIENT, 10_000)?;
    let honest_claim = native_claim(tx, RECIPIENT, 10)?;
    let liar = Liar::start(&world.anvil.rpc_url(), Lie::Value(10_000)).await?;
    let reader = |urls: Vec<String>, quorum| {
        EvidenceReader::new(&config(urls, quorum, Finality::Confirmations(1), 0))
    };

    // Alone (a quorum of 1, set explicitly), its word would confirm the inflated claim: the lie
    // is real, and only the quorum stands in its way.
    let alone = reader(vec![liar.url.clone()], 1)?.pin().await?;
    assert!(matches!(
        verdict(&alone, &inflated).await,
        DepositVerdict::Confirmed { .. }
    ));

    // Beside an honest node, quorum 2: they differ, so neither the inflated claim nor the honest
    // one is confirmed (or refused); the witness reads again later.
    let pair = reader(vec![world.proxies[0].url(), liar.url.clone()], 2)?;
    let pass = pair.pin().await?;
    for claim in [&inflated, &honest_claim] {
        assert_eq!(
            verdict(&pass, claim).await,
            DepositVerdict::NotYet(NotYet::NoAgreement(NoAgreement::Disagreement))
        );
    }
    // The honest node down: one answer, the liar's, is no quorum of two.
    world.proxies[0].set_mode(RpcMode::Down);
    assert_eq!(
        verdict(&pass, &inflated).await,
        DepositVerdict::NotYet(NotYet::NoAgreement(NoAgreement::TooFewAnswers {
            answered: 1,
            quorum: 2
        }))
    );
    world.proxies[0].set_mode(RpcMode::Honest);

    // Three nodes, quorum 2, one of them the liar: every answer must agree, so the two honest
    // ones do not outvote it into a verdict either way.
    let three = reader(
        vec![
            world.proxies[0].url(),
            world.proxies[1].url(),
            liar.url.clone(),
        ],
        2,
    )?;
    let pass = three.pin().await?;
    assert_eq!(
        verdict(&pass, &inflated).await,
        DepositVerdict::NotYet(NotYet::NoAgreement(NoAgreement::Disagreement))
    );
    Ok(())
}

#[tokio::test]
async fn a_node_hiding_a_deposit_delays_it_and_never_refuses_it() -> anyhow::Result<()> {
    let world = World::start(2).await?;
    let (tx, _) = pay(&world, RECIPIENT, 10).await?;
    let claim = native_claim(tx, RECIPIENT, 10)?;
    let liar = Liar::start(&world.anvil.rpc_url(), Lie::Hide).await?;

    // It says "no such transaction" (receipt and transaction both): an answer, absent.
    let alone = EvidenceReader::new(&config(
        vec![liar.url.clone()],
        1,
        Finality::Confirmations(1),
        0,
    ))?
    .pin()
    .await?;
    assert_eq!(
        verdict(&alone, &claim).await,
        DepositVerdict::NotYet(NotYet::Absent)
    );
    let pair = EvidenceReader::new(&config(
        vec![world.proxies[0].url(), liar.url.clone()],
        2,
        Finality::Confirmations(1),
        0,
    ))?;
    assert_eq!(
        verdict(&pair.pin().await?, &claim).await,
        DepositVerdict::NotYet(NotYet::NoAgreement(NoAgreement::Disagreement))
    );
    Ok(())
}

/// How a [`Liar`] lies about transactions (`RpcProxy` lies about receipts, heads and nonces).
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// Every `eth_getTransactionByHash` answer names this value: a node inflating a deposit.
    Value(u128),
    /// Every receipt and transaction is `null`: a node hiding a deposit.
    Hide,
}

/// A JSON-RPC node on 127.0.0.1 in front of anvil that forwards every call, single or batched,
/// and rewrites the answers about transactions as its [`Lie`] says; stopped when dropped.
struct Liar {
    url: String,
    task: JoinHandle<()>,
}

impl Drop for Liar {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Liar {
    async fn start(upstream: &str, lie: Lie) -> anyhow::Result<Liar> {
        let client = opledger_testkit::http_client()
            .no_proxy()
            .build()
            .context("building the liar's upstream client")?;
        let upstream = upstream.to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(move |body: Bytes| {
                let (client, upstream) = (client.clone(), upstream.clone());
                async move { lie_about(&client, &upstream, lie, body).await }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Liar { url, task })
    }
}

async fn lie_about(client: &reqwest::Client, upstream: &str, lie: Lie, body: Bytes) -> Response {
    let answer = async {
        let request: Value = serde_json::from_slice(&body)?;
        let calls = match &request {
            Value::Array(calls) => calls.clone(),
            single => vec![single.clone()],
        };
        let methods: HashMap<String, String> = calls
            .iter()
            .map(|c| {
                let method = c["method"].as_str().unwrap_or_default().to_owned();
                (c["id"].to_string(), method)
            })
            .collect();
        let forwarded = client
            .post(upstream)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await?
            .bytes()
            .await?;
        let mut answer: Value = serde_json::from_slice(&forwarded)?;
        let answers: Vec<&mut Value> = match &mut answer {
            Value::Array(answers) => answers.iter_mut().collect(),
            single => vec![single],
        };
        for answer in answers {
            let method = methods
                .get(&answer["id"].to_string())
                .map_or("", String::as_str);
            let Some(result) = answer.get_mut("result") else {
                continue;
            };
            match (lie, method) {
                (Lie::Value(value), "eth_getTransactionByHash") if result.is_object() => {
                    result["value"] = json!(format!("{value:#x}"));
                }
                (Lie::Hide, "eth_getTransactionByHash" | "eth_getTransactionReceipt") => {
                    *result = Value::Null;
                }
                _ => {}
            }
        }
        anyhow::Ok(answer.to_string())
    }
    .await;
    match answer {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            text,
        )
            .into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, format!("upstream failed: {e:#}")).into_response(),
    }
}
