//! The Coinbase Prime profile: withdrawals replayed by idempotency_key, the transaction list,
//! authentication, TRANSACTION_RETRIED (fault 11).

mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn happy_path_replay_and_list() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let (reference, to) = (reference(), fresh_address());
    let body = prime_body(&reference, &to, AMOUNT_WHOLE);
    let (status, first) = sim.prime_withdraw(&body).await?;
    assert_eq!(status, 200, "{first}");
    let answer: Value = serde_json::from_str(&first)?;
    assert!(answer["activity_id"].is_string());
    assert_eq!(answer["symbol"], "ETH");
    assert_eq!(answer["amount"], AMOUNT_WHOLE);
    assert_eq!(answer["destination_type"], "DESTINATION_BLOCKCHAIN");
    assert_eq!(answer["blockchain_destination"]["address"], to.as_str());
    assert_eq!(answer.get("id"), None);
    // Another body under the same key: the first answer, never a second withdrawal.
    let other = prime_body(&reference, &fresh_address(), "2");
    assert_eq!(sim.prime_withdraw(&other).await?, (200, first));
    sim.wait_view(&reference, |v| v["status"] == "TRANSACTION_DONE")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let (status, list) = sim.prime_list().await?;
    assert_eq!(status, 200);
    assert_eq!(list["pagination"]["has_next"], false);
    let transactions = list["transactions"].as_array().cloned().unwrap_or_default();
    assert_eq!(transactions.len(), 1);
    let tx = &transactions[0];
    assert_eq!(tx["type"], "WITHDRAWAL");
    assert_eq!(tx["status"], "TRANSACTION_DONE");
    assert_eq!(tx["wallet_id"], PRIME_WALLET);
    assert_eq!(tx["symbol"], "ETH");
    assert_eq!(tx["amount"], AMOUNT_WHOLE);
    assert_eq!(tx["blockchain_ids"], json!([hash]));
    assert_eq!(tx["destination_address"], to.as_str());
    assert!(!tx["completed_at"].as_str().unwrap_or_default().is_empty());
    assert!(tx.get("idempotency_key").is_none());
    // A window before the withdrawal finds nothing.
    let (start, end) = (
        chrono_like(unix_now() - 7200),
        chrono_like(unix_now() - 3600),
    );
    let path = format!(
        "/v1/portfolios/{PRIME_PORTFOLIO}/transactions?types=WITHDRAWAL&start_time={start}&end_time={end}"
    );
    let (status, text) = sim
        .prime_call("GET", &path, "", unix_now(), PRIME_SECRET)
        .await?;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&text)?["transactions"],
        json!([])
    );
    let bad = format!("/v1/portfolios/{PRIME_PORTFOLIO}/transactions?start_time=yesterday");
    let (status, _) = sim
        .prime_call("GET", &bad, "", unix_now(), PRIME_SECRET)
        .await?;
    assert_eq!(status, 400);
    Ok(())
}

#[tokio::test]
async fn authentication_and_refusals() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let (reference, to) = (reference(), fresh_address());
    let path = format!("/v1/portfolios/{PRIME_PORTFOLIO}/wallets/{PRIME_WALLET}/withdrawals");
    let body = prime_body(&reference, &to, AMOUNT_WHOLE).to_string();
    let unauthorized = (401, r#"{"message":"unauthorized"}"#.to_owned());
    assert_eq!(
        sim.prime_call("POST", &path, &body, unix_now(), "wrong secret")
            .await?,
        unauthorized
    );
    assert_eq!(
        sim.prime_call("POST", &path, &body, unix_now() - 31, PRIME_SECRET)
            .await?,
        unauthorized
    );
    assert_eq!(
        sim.prime_call("POST", &path, &body, unix_now() + 31, PRIME_SECRET)
            .await?,
        unauthorized
    );
    let signature = prime_signature(PRIME_SECRET, unix_now(), "POST", &path, "{}");
    let answer = sim
        .http
        .post(sim.url(&path))
        .header("X-CB-ACCESS-KEY", PRIME_KEY)
        .header("X-CB-ACCESS-PASSPHRASE", PRIME_PASSPHRASE)
        .header("X-CB-ACCESS-TIMESTAMP", unix_now().to_string())
        .header("X-CB-ACCESS-SIGNATURE", signature)
        .body(body.clone())
        .send()
        .await?;
    assert_eq!(answer.status().as_u16(), 401, "a signature of another body");
    for bad in [
        prime_body(&reference, &to, "0"),
        prime_body(&reference, "0x12", AMOUNT_WHOLE),
        json!({"amount": "1", "destination_type": "DESTINATION_BLOCKCHAIN", "idempotency_key": reference, "currency_symbol": "BTC", "blockchain_address": {"address": to}}),
        json!({"amount": "1"}),
    ] {
        let (status, text) = sim.prime_withdraw(&bad).await?;
        assert_eq!(status, 400, "{bad}");
        assert!(serde_json::from_str::<Value>(&text)?["message"].is_string());
    }
    assert_eq!(sim.get("/sim/operations").await?, json!([]));
    Ok(())
}

/// Fault 11: the first transaction ends TRANSACTION_RETRIED without a hash; a new one (new id)
/// carries the only broadcast.
#[tokio::test]
async fn fault_11_transaction_retried() -> anyhow::Result<()> {
    let sim =
        Sim::start(|c| c["faults"]["rules"] = json!([{"kind": "retried", "profile": "prime"}]))
            .await?;
    let (reference, to) = (reference(), fresh_address());
    let (status, _) = sim
        .prime_withdraw(&prime_body(&reference, &to, AMOUNT_WHOLE))
        .await?;
    assert_eq!(status, 200);
    sim.wait_view(&reference, |v| v["status"] == "TRANSACTION_DONE")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let (_, list) = sim.prime_list().await?;
    let transactions = list["transactions"].as_array().cloned().unwrap_or_default();
    assert_eq!(transactions.len(), 2, "{list}");
    let retried = transactions
        .iter()
        .find(|t| t["status"] == "TRANSACTION_RETRIED")
        .cloned()
        .unwrap_or_default();
    let done = transactions
        .iter()
        .find(|t| t["status"] == "TRANSACTION_DONE")
        .cloned()
        .unwrap_or_default();
    assert_eq!(retried["blockchain_ids"], json!([]));
    assert_eq!(done["blockchain_ids"], json!([hash]));
    assert_ne!(retried["id"], done["id"]);
    assert_eq!(
        sim.transfers_of(&reference).await?[0]["provider_id"],
        done["id"]
    );
    let log = sim.requests_of(&reference).await?;
    assert_eq!(log[0]["faults"], json!(["retried#0"]));
    Ok(())
}

/// Faults 4 and 5 on the list: absent during the lag, then an older status for a while.
#[tokio::test]
async fn list_lags() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] =
            json!([{"kind": "lookup_lag", "secs": 10}, {"kind": "status_lag", "secs": 20}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    sim.prime_withdraw(&prime_body(&reference, &to, AMOUNT_WHOLE))
        .await?;
    sim.wait_view(&reference, |v| v["status"] == "TRANSACTION_DONE")
        .await?;
    assert_eq!(sim.prime_list().await?.1["transactions"], json!([]));
    sim.advance(11.0).await?;
    assert_eq!(
        sim.prime_list().await?.1["transactions"][0]["status"],
        "TRANSACTION_CREATED"
    );
    sim.advance(10.0).await?;
    assert_eq!(
        sim.prime_list().await?.1["transactions"][0]["status"],
        "TRANSACTION_DONE"
    );
    Ok(())
}

/// Fault 9 on Prime: `blockchain_ids` holds the replaced hash and the one broadcast, in order.
#[tokio::test]
async fn replacement_lists_both_hashes() -> anyhow::Result<()> {
    let sim = Sim::start(|c| c["faults"]["rules"] = json!([{"kind": "replacement"}])).await?;
    let (reference, to) = (reference(), fresh_address());
    sim.prime_withdraw(&prime_body(&reference, &to, AMOUNT_WHOLE))
        .await?;
    sim.wait_view(&reference, |v| v["status"] == "TRANSACTION_DONE")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let (_, list) = sim.prime_list().await?;
    let ids = list["transactions"][0]["blockchain_ids"].clone();
    let first = ids[0].as_str().unwrap_or_default();
    assert_eq!(ids[1], hash.as_str());
    assert_ne!(first, hash);
    assert_eq!(sim.anvil.receipt(first).await?, None);
    Ok(())
}
