//! Faults of the Fireblocks profile's create and lookup (1-5, 7-10), each with its exact
//! observable outcome and exactly one payment (or none) on chain.

mod common;

use common::*;
use serde_json::{Value, json};

/// Fault 1: stored, then the connection closed without an answer; the lookup finds it, one
/// transfer; the same Idempotency-Key later gets the answer the client never saw.
#[tokio::test]
async fn fault_1_accept_then_drop() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] =
            json!([{"kind": "drop_response", "profile": "fireblocks", "nth": 1}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    let body = fb_body(&reference, &to, AMOUNT_WHOLE);
    let error = sim
        .fb_create(&body, Some(&reference))
        .await
        .expect_err("no answer");
    assert!(
        error.to_string().contains("error sending request")
            || format!("{error:?}").contains("connection"),
        "{error:?}"
    );
    let (status, record) = sim.fb_lookup(&reference).await?;
    assert_eq!(status, 200);
    assert_eq!(record["externalTxId"], reference.as_str());
    let (status, replayed) = sim.fb_create(&body, Some(&reference)).await?;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&replayed)?["id"],
        record["id"]
    );
    sim.wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let log = sim.requests_of(&reference).await?;
    assert_eq!(log[0]["status"], Value::Null);
    assert_eq!(log[0]["faults"], json!(["drop_response#0"]));
    assert_eq!(log[2]["faults"], json!([]));
    Ok(())
}

/// Fault 1, late variant: the answer comes after the client's timeout.
#[tokio::test]
async fn fault_1_answer_after_timeout() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([{"kind": "drop_response", "delay_ms": 3000}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    let body = fb_body(&reference, &to, AMOUNT_WHOLE);
    let token = fb_jwt(
        &keys().api_client,
        API_KEY,
        "/v1/transactions",
        body.as_bytes(),
        FbClaims::now(),
    )?;
    let answer = sim
        .http
        .post(sim.url("/v1/transactions"))
        .timeout(std::time::Duration::from_millis(500))
        .header("X-API-Key", API_KEY)
        .header("Authorization", format!("Bearer {token}"))
        .body(body)
        .send()
        .await;
    assert!(
        answer.as_ref().is_err_and(reqwest::Error::is_timeout),
        "{answer:?}"
    );
    sim.wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    Ok(())
}

/// Fault 2 and the 1439 of fault 3: a 5xx after the accept; the same key then answers 1439,
/// another key 1438; the transfer still runs once.
#[tokio::test]
async fn fault_2_error_after_accept_then_1439_and_1438() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([{"kind": "error_after_accept", "status": 503}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    let body = fb_body(&reference, &to, AMOUNT_WHOLE);
    let (status, _) = sim.fb_create(&body, Some(&reference)).await?;
    assert_eq!(status, 503);
    let (status, answer) = sim.fb_create(&body, Some(&reference)).await?;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&answer)?["code"].clone()
        ),
        (400, json!(1439))
    );
    let (status, answer) = sim.fb_create(&body, Some("other-key")).await?;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&answer)?["code"].clone()
        ),
        (400, json!(1438))
    );
    sim.wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let log = sim.requests_of(&reference).await?;
    assert_eq!(log[0]["faults"], json!(["error_after_accept#0"]));
    Ok(())
}

/// Fault 3: duplicates answered 409, replayed, or 400 1439, as the schedule says.
#[tokio::test]
async fn fault_3_duplicate_answers() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([
            {"kind": "duplicate", "answer": "conflict", "nth": 2},
            {"kind": "duplicate", "answer": "replay", "nth": 3},
            {"kind": "duplicate", "answer": "after_error", "nth": 4},
        ]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    let body = fb_body(&reference, &to, AMOUNT_WHOLE);
    let (status, first) = sim.fb_create(&body, None).await?;
    assert_eq!(status, 200);
    let (status, answer) = sim.fb_create(&body, None).await?;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&answer)?["code"].clone()
        ),
        (409, json!(1438))
    );
    assert_eq!(sim.fb_create(&body, None).await?, (200, first));
    let (status, answer) = sim.fb_create(&body, None).await?;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&answer)?["code"].clone()
        ),
        (400, json!(1439))
    );
    let (status, answer) = sim.fb_create(&body, None).await?;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&answer)?["code"].clone()
        ),
        (400, json!(1438))
    );
    sim.wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let faults: Vec<Value> = sim
        .requests_of(&reference)
        .await?
        .iter()
        .map(|r| r["faults"].clone())
        .collect();
    assert_eq!(
        faults,
        [
            json!([]),
            json!(["duplicate#0"]),
            json!(["duplicate#1"]),
            json!(["duplicate#2"]),
            json!([])
        ]
    );
    Ok(())
}

/// Fault 4 and the profile's consistency lag: not found until the lag has passed on the
/// double's clock.
#[tokio::test]
async fn fault_4_lookup_lag() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["fireblocks"]["consistency_lag_secs"] = json!(5);
        c["faults"]["rules"] = json!([{"kind": "lookup_lag", "secs": 60}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    let not_found = json!({"message": "Transaction not found", "code": 1401});
    assert_eq!(sim.fb_lookup(&reference).await?, (404, not_found.clone()));
    sim.advance(60.0).await?;
    assert_eq!(sim.fb_lookup(&reference).await?, (404, not_found));
    sim.advance(5.0).await?;
    assert_eq!(sim.fb_lookup(&reference).await?.0, 200);
    let (status, _) = sim.fb_lookup(&common::reference()).await?;
    assert_eq!(status, 404, "an unknown reference");
    Ok(())
}

/// Fault 5: lookups show the status the record had 30 s earlier.
#[tokio::test]
async fn fault_5_status_lag() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([{"kind": "status_lag", "secs": 30}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    sim.wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    let (status, record) = sim.fb_lookup(&reference).await?;
    assert_eq!(status, 200);
    assert_eq!(record["status"], "SUBMITTED");
    assert_eq!(record["txHash"], "");
    sim.advance(31.0).await?;
    let (_, record) = sim.fb_lookup(&reference).await?;
    assert_eq!(record["status"], "COMPLETED");
    Ok(())
}

/// Fault 7: held in PENDING_AUTHORIZATION, then REJECTED or BLOCKED, no hash, nothing sent.
#[tokio::test]
async fn fault_7_rejected_and_blocked_after_authorization() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["fireblocks"]["authorization_delay_secs"] = json!(600);
        c["faults"]["rules"] = json!([
            {"kind": "reject", "nth": 1, "rate": 1.0, "hold_secs": 3600},
        ]);
    })
    .await?;
    let (rejected, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&rejected, &to, AMOUNT_WHOLE), None)
        .await?;
    sim.set_faults(1, json!([{"kind": "reject", "blocked": true}]))
        .await?;
    let blocked = reference();
    sim.fb_create(&fb_body(&blocked, &to, AMOUNT_WHOLE), None)
        .await?;
    sim.wait_view(&blocked, |v| v["status"] == "PENDING_AUTHORIZATION")
        .await?;
    sim.advance(601.0).await?;
    let view = sim
        .wait_view(&blocked, |v| v["status"] == "BLOCKED")
        .await?;
    assert_eq!(view["views"][0]["subStatus"], "BLOCKED_BY_POLICY");
    let (_, record) = sim.fb_lookup(&rejected).await?;
    assert_eq!(record["status"], "PENDING_AUTHORIZATION");
    sim.advance(3600.0).await?;
    sim.wait_view(&rejected, |v| v["status"] == "REJECTED")
        .await?;
    let (_, record) = sim.fb_lookup(&rejected).await?;
    assert_eq!(
        (record["subStatus"].as_str(), record["txHash"].as_str()),
        (Some("REJECTED_BY_USER"), Some(""))
    );
    assert_eq!(sim.get("/sim/transfers").await?, json!([]));
    assert_eq!(sim.anvil.balance(&to).await?, 0);
    assert_eq!(sim.anvil.nonce(HOT_WALLET, "latest").await?, 0);
    Ok(())
}

/// Fault 8a: mined and paid, the record says FAILED / INTERNAL_ERROR with the hash.
#[tokio::test]
async fn fault_8a_failed_but_mined() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([{"kind": "failed_with_hash", "variant": "mined"}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    sim.wait_view(&reference, |v| v["status"] == "FAILED")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let (_, record) = sim.fb_lookup(&reference).await?;
    assert_eq!(record["subStatus"], "INTERNAL_ERROR");
    assert_eq!(record["txHash"], hash.as_str());
    Ok(())
}

/// Fault 8b: a hash reported, never broadcast: FAILED / DROPPED_BY_BLOCKCHAIN, nothing on chain,
/// and the next transfer takes the nonce, so the reported hash can never be mined.
#[tokio::test]
async fn fault_8b_failed_never_broadcast() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] =
            json!([{"kind": "failed_with_hash", "variant": "not_broadcast", "nth": 1}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    sim.wait_view(&reference, |v| v["status"] == "FAILED")
        .await?;
    let (_, record) = sim.fb_lookup(&reference).await?;
    assert_eq!(record["subStatus"], "DROPPED_BY_BLOCKCHAIN");
    let hash = record["txHash"].as_str().unwrap_or_default().to_owned();
    assert_eq!(hash.len(), 66);
    assert!(sim.transfers_of(&reference).await?.is_empty());
    assert_eq!(sim.anvil.receipt(&hash).await?, None);
    assert_eq!(sim.anvil.balance(&to).await?, 0);
    let (next, to2) = (common::reference(), fresh_address());
    sim.set_faults(1, json!([])).await?;
    sim.fb_create(&fb_body(&next, &to2, AMOUNT_WHOLE), None)
        .await?;
    sim.wait_view(&next, |v| v["status"] == "COMPLETED").await?;
    sim.assert_paid_once(&next, &to2, AMOUNT_WEI).await?;
    assert_eq!(sim.transfers_of(&next).await?[0]["nonce"], 0);
    assert_eq!(sim.anvil.receipt(&hash).await?, None);
    Ok(())
}

/// Fault 9: the record's hash changes to a replacement at the same nonce; replacedTxHash holds
/// the first, which was never broadcast; one payment.
#[tokio::test]
async fn fault_9_provider_side_replacement() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([{"kind": "replacement"}]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    let op = sim
        .wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let (_, record) = sim.fb_lookup(&reference).await?;
    assert_eq!(record["txHash"], hash.as_str());
    let replaced = record["replacedTxHash"].as_str().unwrap_or_default();
    assert_eq!(replaced.len(), 66);
    assert_ne!(replaced, hash);
    assert_eq!(
        sim.transfers_of(&reference).await?[0]["replaced_hashes"],
        json!([replaced])
    );
    assert_eq!(sim.anvil.receipt(replaced).await?, None);
    let hashes: Vec<Value> = op["records"][0]["later"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["stage"] == "BROADCASTING")
        .map(|s| s["tx_hash"].clone())
        .collect();
    assert_eq!(hashes, [json!(replaced), json!(hash)]);
    Ok(())
}

/// Fault 10: 429 with Retry-After on a create (nothing stored) and on a lookup.
#[tokio::test]
async fn fault_10_rate_limited() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([
            {"kind": "rate_limit", "retry_after_secs": 7, "nth": 1},
            {"kind": "rate_limit", "retry_after_secs": 2, "on": "lookup", "nth": 1},
        ]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    let body = fb_body(&reference, &to, AMOUNT_WHOLE);
    let token = fb_jwt(
        &keys().api_client,
        API_KEY,
        "/v1/transactions",
        body.as_bytes(),
        FbClaims::now(),
    )?;
    let answer = sim
        .http
        .post(sim.url("/v1/transactions"))
        .header("X-API-Key", API_KEY)
        .header("Authorization", format!("Bearer {token}"))
        .header("Idempotency-Key", &reference)
        .body(body.clone())
        .send()
        .await?;
    assert_eq!(answer.status().as_u16(), 429);
    assert_eq!(answer.headers()["retry-after"], "7");
    assert!(sim.op(&reference).await?.is_none());
    let (status, _) = sim.fb_create(&body, Some(&reference)).await?;
    assert_eq!(
        status, 200,
        "the 429 was not kept under the Idempotency-Key"
    );
    let (status, _) = sim.fb_lookup(&reference).await?;
    assert_eq!(status, 429);
    let (status, _) = sim.fb_lookup(&reference).await?;
    assert_eq!(status, 200);
    sim.wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let log = sim.requests_of(&reference).await?;
    let faults: Vec<Value> = log.iter().map(|r| r["faults"].clone()).collect();
    assert_eq!(
        faults,
        [
            json!(["rate_limit#0"]),
            json!([]),
            json!(["rate_limit#1"]),
            json!([])
        ]
    );
    Ok(())
}
