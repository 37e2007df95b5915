//! The Fireblocks profile: the happy path, confirmations, authentication, validation,
//! idempotency, concurrency, hostile input (the faults are in `fireblocks_faults.rs`).

mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn happy_path_pays_once_and_completes() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let health = sim.get("/sim/health").await?;
    assert_eq!(health["hot_wallet"], HOT_WALLET);
    let (reference, to) = (reference(), fresh_address());
    let (status, body) = sim
        .fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), Some(&reference))
        .await?;
    assert_eq!(status, 200, "{body}");
    let created: Value = serde_json::from_str(&body)?;
    assert_eq!(created["status"], "SUBMITTED");
    let op = sim
        .wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let (status, record) = sim.fb_lookup(&reference).await?;
    assert_eq!(status, 200);
    assert_eq!(record["id"], created["id"]);
    assert_eq!(record["externalTxId"], reference.as_str());
    assert_eq!(record["status"], "COMPLETED");
    assert_eq!(record["txHash"], hash.as_str());
    assert_eq!(record["assetId"], "ETH");
    assert_eq!(record["destinationAddress"], to.as_str());
    assert_eq!(record["amountInfo"]["amount"], AMOUNT_WHOLE);
    assert_eq!(record["numOfConfirmations"], 1);
    assert!(record["createdAt"].as_i64() <= record["lastUpdated"].as_i64());
    let stages: Vec<&str> = op["records"][0]["later"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["stage"].as_str())
        .collect();
    assert_eq!(
        stages,
        [
            "PENDING_AUTHORIZATION",
            "QUEUED",
            "PENDING_SIGNATURE",
            "BROADCASTING",
            "CONFIRMING",
            "COMPLETED"
        ]
    );
    // The same Idempotency-Key: the first answer, byte for byte; another key: 1438.
    let again = sim
        .fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), Some(&reference))
        .await?;
    assert_eq!(again, (200, body));
    let (status, other) = sim
        .fb_create(&fb_body(&reference, &to, "1"), Some("another-key"))
        .await?;
    assert_eq!(status, 400);
    assert_eq!(serde_json::from_str::<Value>(&other)?["code"], 1438);
    let (status, _) = sim.fb_create(&fb_body(&reference, &to, "1"), None).await?;
    assert_eq!(status, 400);
    sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    Ok(())
}

#[tokio::test]
async fn confirmations_wait_for_blocks() -> anyhow::Result<()> {
    let sim = Sim::start(|c| c["confirmations"] = json!(3)).await?;
    let (reference, to) = (reference(), fresh_address());
    sim.fb_create(&fb_body(&reference, &to, AMOUNT_WHOLE), None)
        .await?;
    sim.wait_view(&reference, |v| v["status"] == "CONFIRMING")
        .await?;
    sim.anvil.mine(2).await?;
    let op = sim
        .wait_view(&reference, |v| v["status"] == "COMPLETED")
        .await?;
    assert_eq!(op["views"][0]["numOfConfirmations"], 3);
    Ok(())
}

async fn send_with(
    sim: &Sim,
    token: &str,
    api_key: &str,
    body: &str,
) -> anyhow::Result<(u16, Value)> {
    let answer = sim
        .http
        .post(sim.url("/v1/transactions"))
        .header("X-API-Key", api_key)
        .header("Authorization", format!("Bearer {token}"))
        .body(body.to_owned())
        .send()
        .await?;
    Ok((answer.status().as_u16(), answer.json().await?))
}

#[tokio::test]
async fn authentication_refusals() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let (reference, to) = (reference(), fresh_address());
    let body = fb_body(&reference, &to, AMOUNT_WHOLE);
    let uri = "/v1/transactions";
    let unauthorized = json!({"message": "Unauthorized", "code": -7});
    let sign = |pem: &str, claims: FbClaims| fb_jwt(pem, API_KEY, uri, body.as_bytes(), claims);
    let mut cases: Vec<(&str, String, &str)> = vec![
        (
            "bad signature",
            sign(&keys().api_other, FbClaims::now())?,
            API_KEY,
        ),
        (
            "wrong bodyHash",
            sign(
                &keys().api_client,
                FbClaims {
                    body_hash: Some(hex::encode([0_u8; 32])),
                    ..FbClaims::now()
                },
            )?,
            API_KEY,
        ),
        (
            "wrong uri",
            sign(
                &keys().api_client,
                FbClaims {
                    uri: Some("/v1/other".into()),
                    ..FbClaims::now()
                },
            )?,
            API_KEY,
        ),
        (
            "expired",
            sign(
                &keys().api_client,
                FbClaims {
                    iat: unix_now() - 60,
                    exp: unix_now() - 31,
                    ..FbClaims::now()
                },
            )?,
            API_KEY,
        ),
        (
            "lifetime over 30 s",
            sign(
                &keys().api_client,
                FbClaims {
                    exp: unix_now() + 60,
                    ..FbClaims::now()
                },
            )?,
            API_KEY,
        ),
        (
            "sub is not the key",
            sign(
                &keys().api_client,
                FbClaims {
                    sub: "someone".into(),
                    ..FbClaims::now()
                },
            )?,
            API_KEY,
        ),
        (
            "unknown API key",
            sign(&keys().api_client, FbClaims::now())?,
            "other-key",
        ),
        ("not a JWT", "abc.def".to_owned(), API_KEY),
    ];
    let reused = FbClaims::now();
    let first = sign(&keys().api_client, reused.clone())?;
    let (status, _) = send_with(&sim, &first, API_KEY, &body).await?;
    assert_eq!(status, 200, "the first use of a nonce");
    cases.push(("reused nonce", sign(&keys().api_client, reused)?, API_KEY));
    for (what, token, key) in cases {
        let (status, answer) = send_with(&sim, &token, key, &body).await?;
        assert_eq!((status, &answer), (401, &unauthorized), "{what}");
    }
    let answer = sim
        .http
        .post(sim.url(uri))
        .body(body.clone())
        .send()
        .await?;
    assert_eq!(answer.status().as_u16(), 401, "no token");
    assert_eq!(
        sim.get("/sim/operations").await?.as_array().map(Vec::len),
        Some(1)
    );
    Ok(())
}

#[tokio::test]
async fn malformed_and_refused_bodies_are_400_and_store_nothing() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let (reference, to) = (reference(), fresh_address());
    let good = fb_body(&reference, &to, AMOUNT_WHOLE);
    let bodies = [
        "not json".to_owned(),
        "{}".to_owned(),
        good.replace("\"ETH\"", "\"BTC\""),
        good.replace(&to, "0x1234"),
        good.replace(AMOUNT_WHOLE, "0"),
        good.replace(AMOUNT_WHOLE, "-1"),
        good.replace(AMOUNT_WHOLE, "1e3"),
        good.replace(AMOUNT_WHOLE, "0.0000000000000000001"),
        good.replace("\"id\":\"0\"", "\"id\":\"7\""),
    ];
    for body in bodies {
        let (status, answer) = sim.fb_create(&body, None).await?;
        assert_eq!(status, 400, "{body}");
        let answer: Value = serde_json::from_str(&answer)?;
        assert!(answer["message"].is_string(), "{answer}");
        assert!(
            ![1438, 1439].contains(&answer["code"].as_i64().unwrap_or(0)),
            "{answer}"
        );
    }
    let (status, _) = sim.fb_create(&good, Some(&"k".repeat(41))).await?;
    assert_eq!(status, 400, "an Idempotency-Key over 40 characters");
    assert_eq!(sim.get("/sim/operations").await?, json!([]));
    let (status, _) = sim.fb_create(&good, None).await?;
    assert_eq!(status, 200, "the reference is still free");
    Ok(())
}

/// Many references at once: one transfer each, nonces 0..n without a gap.
#[tokio::test]
async fn concurrent_creates_pay_each_reference_once() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let jobs: Vec<(String, String)> = (0..8).map(|_| (reference(), fresh_address())).collect();
    let sends = jobs.iter().map(|(reference, to)| {
        let body = fb_body(reference, to, AMOUNT_WHOLE);
        let sim = &sim;
        async move {
            let first = sim.fb_create(&body, None);
            let second = sim.fb_create(&body, None);
            let (a, b) = futures::join!(first, second);
            Ok::<_, anyhow::Error>((a?.0, b?.0))
        }
    });
    for result in futures::future::join_all(sends).await {
        let (a, b) = result?;
        assert!(matches!((a, b), (200, 400) | (400, 200)), "{a} {b}");
    }
    for (reference, to) in &jobs {
        sim.wait_view(reference, |v| v["status"] == "COMPLETED")
            .await?;
        sim.assert_paid_once(reference, to, AMOUNT_WEI).await?;
    }
    let mut nonces: Vec<u64> = sim
        .get("/sim/transfers")
        .await?
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["nonce"].as_u64())
        .collect();
    nonces.sort_unstable();
    assert_eq!(nonces, (0..8).collect::<Vec<u64>>());
    Ok(())
}

/// Unknown paths, other methods and undecodable paths get JSON errors, never a panic.
#[tokio::test]
async fn hostile_paths_and_methods() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let answer = sim.http.get(sim.url("/v1/nothing")).send().await?;
    assert_eq!(answer.status().as_u16(), 404);
    assert_eq!(answer.json::<Value>().await?["message"], "Not found");
    let answer = sim.http.delete(sim.url("/v1/transactions")).send().await?;
    assert_eq!(answer.status().as_u16(), 405);
    assert!(answer.json::<Value>().await?["message"].is_string());
    let path = format!("/api/v2/{BITGO_COIN}/wallet/{BITGO_WALLET}/transfer/sequenceId/%ff%fe");
    let answer = sim
        .http
        .get(sim.url(&path))
        .bearer_auth(BITGO_TOKEN)
        .send()
        .await?;
    assert_eq!(answer.status().as_u16(), 400);
    assert_eq!(answer.json::<Value>().await?["name"], "InvalidRequest");
    let (status, _) = sim
        .post_sim("/sim/clock", json!({"advance_secs": -5}))
        .await?;
    assert_eq!(status, 400);
    let (status, _) = sim
        .post_sim("/sim/faults", json!({"rules": [{"kind": "nope"}]}))
        .await?;
    assert_eq!(status, 400);
    let (status, _) = sim
        .post_sim(
            "/sim/faults",
            json!({"rules": [{"kind": "replacement", "rate": 2}]}),
        )
        .await?;
    assert_eq!(status, 400);
    assert_eq!(sim.get("/sim/health").await?["status"], "ok");
    Ok(())
}
