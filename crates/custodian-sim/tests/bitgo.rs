//! The BitGo profile: sendcoins with sequenceId, the lookup, authentication, duplicates, the
//! replacement as a new transfer, refusals before storing.

mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn happy_path_and_duplicate_sequence_id() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let (reference, to) = (reference(), fresh_address());
    let (status, answer) = sim
        .bitgo_send(&bitgo_body(&reference, &to, AMOUNT_WEI))
        .await?;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["transfer"]["sequenceId"], reference.as_str());
    assert_eq!(answer["status"], "initialized");
    let (status, duplicate) = sim
        .bitgo_send(&bitgo_body(&reference, &fresh_address(), 5))
        .await?;
    assert_eq!(status, 400);
    assert_eq!(
        duplicate,
        json!({"error": "sequenceId is not unique", "name": "DuplicateSequenceIdError"})
    );
    sim.wait_view(&reference, |v| v["state"] == "confirmed")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let (status, transfer) = sim.bitgo_lookup(&reference).await?;
    assert_eq!(status, 200);
    assert_eq!(transfer["id"], answer["transfer"]["id"]);
    assert_eq!(transfer["coin"], BITGO_COIN);
    assert_eq!(transfer["wallet"], BITGO_WALLET);
    assert_eq!(transfer["state"], "confirmed");
    assert_eq!(transfer["txid"], hash.as_str());
    assert_eq!(transfer["valueString"], format!("-{AMOUNT_WEI}"));
    let entry = transfer["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["address"] == to.as_str())
        .cloned();
    assert_eq!(
        entry.map(|e| e["valueString"].clone()),
        Some(json!(AMOUNT_WEI.to_string()))
    );
    assert_eq!(transfer["confirmations"], 1);
    let (status, missing) = sim.bitgo_lookup(&common::reference()).await?;
    assert_eq!(
        (status, missing),
        (
            404,
            json!({"error": "transfer not found", "name": "NotFound"})
        )
    );
    Ok(())
}

#[tokio::test]
async fn authentication_and_refusals_before_storing() -> anyhow::Result<()> {
    let sim = Sim::start(|_| {}).await?;
    let (reference, to) = (reference(), fresh_address());
    let path = format!("/api/v2/{BITGO_COIN}/wallet/{BITGO_WALLET}/sendcoins");
    let body = bitgo_body(&reference, &to, AMOUNT_WEI);
    let unauthorized = json!({"error": "unauthorized", "name": "Unauthorized"});
    for token in [None, Some("wrong-token")] {
        let mut request = sim.http.post(sim.url(&path)).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await?;
        assert_eq!(answer.status().as_u16(), 401);
        assert_eq!(answer.json::<Value>().await?, unauthorized);
    }
    let refusals = [
        (
            json!({"address": to, "amount": "1", "sequenceId": reference, "walletPassphrase": "nope"}),
            "IncorrectPassphraseError",
        ),
        (
            bitgo_body(&reference, "0xnot-an-address", 1),
            "InvalidAddressError",
        ),
        (bitgo_body(&reference, &to, 0), "InvalidAmountError"),
        (
            json!({"address": to, "amount": "-5", "sequenceId": reference, "walletPassphrase": BITGO_PASSPHRASE}),
            "InvalidAmountError",
        ),
        (
            bitgo_body(&reference, &to, u128::from(u64::MAX) * 1_000_000),
            "InsufficientBalanceError",
        ),
        (json!({"address": to}), "InvalidRequest"),
    ];
    for (body, name) in refusals {
        let (status, answer) = sim.bitgo_send(&body).await?;
        assert_eq!(
            (status, answer["name"].as_str()),
            (400, Some(name)),
            "{body}"
        );
    }
    let other_wallet =
        format!("/api/v2/{BITGO_COIN}/wallet/ffffffffffffffffffffffffffffffff/sendcoins");
    let answer = sim
        .http
        .post(sim.url(&other_wallet))
        .bearer_auth(BITGO_TOKEN)
        .json(&body)
        .send()
        .await?;
    assert_eq!(answer.status().as_u16(), 404);
    assert_eq!(sim.get("/sim/operations").await?, json!([]));
    let (status, _) = sim.bitgo_send(&body).await?;
    assert_eq!(status, 200, "the sequenceId was never used");
    Ok(())
}

/// Fault 9 on BitGo: the first transfer ends `replaced`, a new transfer (new id, new txid) is the
/// lookup's answer; only the new transaction was broadcast.
#[tokio::test]
async fn replacement_is_a_new_transfer() -> anyhow::Result<()> {
    let sim =
        Sim::start(|c| c["faults"]["rules"] = json!([{"kind": "replacement", "profile": "bitgo"}]))
            .await?;
    let (reference, to) = (reference(), fresh_address());
    let (_, answer) = sim
        .bitgo_send(&bitgo_body(&reference, &to, AMOUNT_WEI))
        .await?;
    let op = sim
        .wait_view(&reference, |v| v["state"] == "confirmed")
        .await?;
    let hash = sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    let views = op["views"].as_array().cloned().unwrap_or_default();
    assert_eq!(views.len(), 2);
    assert_eq!(views[0]["state"], "replaced");
    assert_eq!(views[0]["id"], answer["transfer"]["id"]);
    let old = views[0]["txid"].as_str().unwrap_or_default();
    assert_ne!(old, hash);
    assert_eq!(sim.anvil.receipt(old).await?, None);
    let (_, transfer) = sim.bitgo_lookup(&reference).await?;
    assert_eq!(transfer["id"], views[1]["id"]);
    assert_eq!(transfer["txid"], hash.as_str());
    assert_ne!(transfer["id"], answer["transfer"]["id"]);
    Ok(())
}

/// Faults 3 and 7 on BitGo: a duplicate replayed or answered 409; a rejected send.
#[tokio::test]
async fn duplicate_faults_and_rejection() -> anyhow::Result<()> {
    let sim = Sim::start(|c| {
        c["faults"]["rules"] = json!([
            {"kind": "duplicate", "answer": "replay", "nth": 2},
            {"kind": "duplicate", "answer": "conflict", "nth": 3},
        ]);
    })
    .await?;
    let (reference, to) = (reference(), fresh_address());
    let body = bitgo_body(&reference, &to, AMOUNT_WEI);
    let (_, first) = sim.bitgo_send(&body).await?;
    assert_eq!(sim.bitgo_send(&body).await?, (200, first));
    assert_eq!(sim.bitgo_send(&body).await?.0, 409);
    assert_eq!(sim.bitgo_send(&body).await?.0, 400);
    sim.wait_view(&reference, |v| v["state"] == "confirmed")
        .await?;
    sim.assert_paid_once(&reference, &to, AMOUNT_WEI).await?;
    sim.set_faults(3, json!([{"kind": "reject"}])).await?;
    let rejected = common::reference();
    sim.bitgo_send(&bitgo_body(&rejected, &to, AMOUNT_WEI))
        .await?;
    sim.wait_view(&rejected, |v| v["state"] == "rejected")
        .await?;
    let (_, transfer) = sim.bitgo_lookup(&rejected).await?;
    assert_eq!(transfer.get("txid"), None);
    assert!(sim.transfers_of(&rejected).await?.is_empty());
    Ok(())
}
