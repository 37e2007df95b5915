//! BitGo: the send body and the passphrase added when sent, the state table, transfers and
//! answers read, webhook HMACs, and the classification rows against a local HTTP server.

use super::*;
use crate::classify::{BadRequest, RecordRead};
use crate::testutil::{
    Canned, Fault, PASSPHRASE, TOKEN, WALLET, bitgo_config, openssl, request, serve, serve_fault,
};
use crate::types::Mismatch;
use crate::{WebhookError, verify_bitgo_webhook};
use opledger_domain::custodian::{Ambiguity, Lookup, ProviderStatus, StatusClass, SubmitAnswer};
use serde_json::{Value, json};

const REFERENCE: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const ADDRESS: &str = "0x1111111111111111111111111111111111111111";

fn adapter(base: &str) -> BitGo {
    BitGo::new(&bitgo_config(base)).expect("adapter")
}

fn account() -> Account {
    Account {
        coin: "hteth".to_owned(),
        wallet_id: WALLET.to_owned(),
    }
}

#[test]
fn the_stored_body_is_the_send_without_the_passphrase_which_is_added_when_sent() {
    let custodian = adapter("http://127.0.0.1:9");
    let body = custodian.request(&request(u128::MAX)).expect("body");
    let stored = format!(
        r#"{{"address":"{ADDRESS}","amount":"{}","sequenceId":"{REFERENCE}"}}"#,
        u128::MAX
    );
    assert_eq!(String::from_utf8(body.bytes.clone()).expect("utf8"), stored);
    assert_eq!(body.sha256, sha256(stored.as_bytes()));
    assert_eq!(custodian.request(&request(u128::MAX)), Ok(body.clone()));
    assert_eq!(
        custodian.request(&request(0)),
        Err(RequestError::ZeroAmount)
    );

    let sent = wire::with_passphrase(&body.bytes, PASSPHRASE).expect("sent");
    let text = String::from_utf8(sent.to_vec()).expect("utf8");
    assert_eq!(
        text,
        format!(
            r#"{}"walletPassphrase":"pass \"phrase\" \\ secret"}}"#,
            stored.trim_end_matches('}').to_owned() + ","
        )
    );
    let parsed: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(parsed["walletPassphrase"], PASSPHRASE);
    assert_eq!(wire::with_passphrase(b"{}", PASSPHRASE), None);
    let twice = text.into_bytes();
    assert_eq!(
        wire::with_passphrase(&twice, PASSPHRASE),
        None,
        "never added twice"
    );
}

#[test]
fn every_state_maps_as_the_table_says_and_none_in_flight_is_ever_not_sent() {
    let table = [
        ("initialized", ProviderStatus::Submitted),
        ("pendingApproval", ProviderStatus::PendingAuthorization),
        ("signed", ProviderStatus::Broadcasting),
        ("unconfirmed", ProviderStatus::Confirming),
        ("confirmed", ProviderStatus::Completed),
        ("failed", ProviderStatus::Failed),
        ("rejected", ProviderStatus::Rejected),
        ("removed", ProviderStatus::Broadcasting),
        ("replaced", ProviderStatus::Broadcasting),
    ];
    for (state, status) in table {
        assert_eq!(wire::map_state(state), Some(status), "{state}");
    }
    for state in [
        "removed",
        "replaced",
        "signed",
        "unconfirmed",
        "initialized",
    ] {
        let class = wire::map_state(state).expect("state").class();
        assert_eq!(class, StatusClass::InFlight, "{state}");
    }
    assert_eq!(
        wire::map_state("rejected").map(ProviderStatus::class),
        Some(StatusClass::NotSent)
    );
    for unknown in ["", "Confirmed", "canceled", "abandoned", "pendingDelivery"] {
        assert_eq!(wire::map_state(unknown), None, "{unknown}");
    }
}

fn transfer(state: &str) -> Value {
    json!({
        "id": "bg-transfer-1",
        "coin": "hteth",
        "wallet": WALLET,
        "sequenceId": REFERENCE,
        "state": state,
        "txid": "",
        "valueString": "-1000",
        "entries": [
            {"address": "0x9999999999999999999999999999999999999999", "valueString": "-1000"},
            {"address": "0x1111111111111111111111111111111111111111".to_uppercase().replace("0X", "0x"), "valueString": "1000"}
        ],
        "confirmations": 0,
        "unknownField": [1, 2]
    })
}

fn read(value: &Value) -> RecordRead {
    read_record(value.to_string().as_bytes(), &request(1_000), &account())
}

#[test]
fn transfers_read_and_differences_are_mismatches() {
    let mut value = transfer("unconfirmed");
    value["txid"] = json!(format!("0x{}", "ef".repeat(32)));
    let RecordRead::Found(record) = read(&value) else {
        panic!("found");
    };
    assert_eq!(record.status, ProviderStatus::Confirming);
    assert_eq!(record.tx_hash, Some([0xef; 32]));
    assert_eq!(record.destination, Some([0x11; 20]));
    assert_eq!(record.amount, Some(1_000));
    assert_eq!(record.status_text, "unconfirmed");
    assert_eq!(record.provider_id, "bg-transfer-1");
    let other_entry = json!([
        {"address": "0x1111111111111111111111111111111111111111", "valueString": "1000"},
        {"address": "0x2222222222222222222222222222222222222222", "valueString": "5"}
    ]);
    let cases: [(&str, Value, Mismatch); 6] = [
        (
            "sequenceId",
            json!("other"),
            Mismatch {
                reference: true,
                ..Mismatch::default()
            },
        ),
        (
            "sequenceId",
            Value::Null,
            Mismatch {
                reference: true,
                ..Mismatch::default()
            },
        ),
        (
            "coin",
            json!("eth"),
            Mismatch {
                asset: true,
                ..Mismatch::default()
            },
        ),
        (
            "wallet",
            json!("f".repeat(32)),
            Mismatch {
                account: true,
                ..Mismatch::default()
            },
        ),
        (
            "entries",
            json!([{"address": "0x1111111111111111111111111111111111111111", "valueString": "999"}]),
            Mismatch {
                amount: true,
                ..Mismatch::default()
            },
        ),
        (
            "entries",
            other_entry,
            Mismatch {
                destination: true,
                amount: true,
                ..Mismatch::default()
            },
        ),
    ];
    for (field, value, expected) in cases {
        let mut record = transfer("confirmed");
        record[field] = value;
        let RecordRead::Failed(LookupFailure::Mismatch(found), _) = read(&record) else {
            panic!("{field}");
        };
        assert_eq!(found, expected, "{field}");
    }
    for (field, value) in [
        ("state", json!("abandoned")),
        ("txid", json!("0xnothex")),
        ("entries", json!([])),
        (
            "entries",
            json!([{"address": "nope", "valueString": "1000"}]),
        ),
        (
            "entries",
            json!([{"address": ADDRESS, "valueString": "1e3"}]),
        ),
    ] {
        let mut record = transfer("confirmed");
        record[field] = value;
        assert_eq!(
            read(&record),
            RecordRead::Failed(LookupFailure::Unreadable, None),
            "{field}"
        );
    }
}

#[test]
fn answers_read_as_the_contract_says() {
    let accepted =
        json!({"transfer": transfer("signed"), "txid": "", "status": "signed"}).to_string();
    assert_eq!(
        read_accepted(accepted.as_bytes(), REFERENCE).as_deref(),
        Some("bg-transfer-1")
    );
    assert_eq!(read_accepted(accepted.as_bytes(), "another"), None);
    assert_eq!(read_accepted(br#"{"transfer":{"id":""}}"#, REFERENCE), None);
    assert_eq!(read_accepted(br#"{"txid":"0x"}"#, REFERENCE), None);
    assert_eq!(
        read_bad_request(
            br#"{"error":"sequenceId is not unique","name":"DuplicateSequenceIdError"}"#
        ),
        Some(BadRequest::Duplicate)
    );
    assert_eq!(
        read_bad_request(br#"{"error":"insufficient balance","name":"InsufficientBalance"}"#),
        Some(BadRequest::Refusal)
    );
    assert_eq!(read_bad_request(br#"{"error":"x"}"#), None);
    assert!(is_not_found(
        br#"{"error":"transfer not found","name":"NotFound"}"#
    ));
    assert!(!is_not_found(br#"{"error":"route not found"}"#));
}

const SECRET: &[u8] = b"bitgo-webhook-secret";

fn hmac_hex(secret: &[u8], body: &[u8]) -> String {
    let key = std::str::from_utf8(secret).expect("utf8");
    hex::encode(openssl(&["dgst", "-sha256", "-hmac", key, "-binary"], body))
}

fn webhook_body() -> Vec<u8> {
    json!({"type": "transfer", "wallet": WALLET, "coin": "hteth", "transfer": "bg-transfer-1",
           "hash": format!("0x{}", "ab".repeat(32)), "state": "confirmed", "sequenceId": REFERENCE})
    .to_string()
    .into_bytes()
}

#[test]
fn webhooks_verify_with_the_hmac_and_nothing_else() {
    let body = webhook_body();
    let signature = hmac_hex(SECRET, &body);
    let event = verify_bitgo_webhook(&body, &signature, SECRET).expect("verified");
    assert_eq!(event.event_type, "transfer");
    assert_eq!(event.hash, Some([0xab; 32]));
    assert_eq!(event.status, Some(ProviderStatus::Completed));
    assert_eq!(event.sequence_id.as_deref(), Some(REFERENCE));
    assert_eq!(event.transfer_id.as_deref(), Some("bg-transfer-1"));
    assert!(!format!("{event:?}").contains(REFERENCE));
    assert!(verify_bitgo_webhook(&body, &signature.to_uppercase(), SECRET).is_ok());

    let wrong = hmac_hex(b"another-secret", &body);
    assert_eq!(
        verify_bitgo_webhook(&body, &wrong, SECRET),
        Err(WebhookError::Signature)
    );
    let mut tampered = body.clone();
    tampered.push(b' ');
    assert_eq!(
        verify_bitgo_webhook(&tampered, &signature, SECRET),
        Err(WebhookError::Signature)
    );
    assert_eq!(
        verify_bitgo_webhook(&body, &signature, b""),
        Err(WebhookError::Signature)
    );
    for bad in [
        String::new(),
        signature[..63].to_owned(),
        signature[..32].to_owned(),
        format!("{signature}00"),
        format!("sha256={signature}"),
        "zz".repeat(32),
    ] {
        assert_eq!(
            verify_bitgo_webhook(&body, &bad, SECRET),
            Err(WebhookError::Header),
            "{bad}"
        );
    }
    let not_event = b"[1,2]";
    let signature = hmac_hex(SECRET, not_event);
    assert_eq!(
        verify_bitgo_webhook(not_event, &signature, SECRET),
        Err(WebhookError::Body)
    );
    let empty_hash = br#"{"type":"transfer","hash":"","state":"signed"}"#;
    let event =
        verify_bitgo_webhook(empty_hash, &hmac_hex(SECRET, empty_hash), SECRET).expect("ok");
    assert_eq!(event.hash, None);
}

async fn submit_answer(canned: Canned) -> Submission {
    let server = serve(vec![canned]).await;
    submit_to(&server.base).await
}

async fn submit_to(base: &str) -> Submission {
    let custodian = adapter(base);
    let body = custodian.request(&request(1_000)).expect("body");
    custodian
        .submit(request(1_000).reference, &body.bytes)
        .await
        .expect("sent")
}

#[tokio::test]
async fn an_accepted_send_carries_the_token_and_the_passphrase_last() {
    let accepted = json!({"transfer": transfer("signed"), "status": "signed"}).to_string();
    let server = serve(vec![Canned::json(200, &accepted)]).await;
    let custodian = adapter(&server.base);
    let body = custodian.request(&request(1_000)).expect("body");
    let submission = custodian
        .submit(request(1_000).reference, &body.bytes)
        .await
        .expect("sent");
    assert_eq!(submission.answer, SubmitAnswer::Accepted);
    assert_eq!(submission.provider_id.as_deref(), Some("bg-transfer-1"));
    let sent = &server.requests()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.uri, format!("/api/v2/hteth/wallet/{WALLET}/sendcoins"));
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert!(sent.body.starts_with(&body.bytes[..body.bytes.len() - 1]));
    let parsed: Value = serde_json::from_slice(&sent.body).expect("json");
    assert_eq!(parsed["walletPassphrase"], PASSPHRASE);
    assert_eq!(parsed["sequenceId"], REFERENCE);
    assert_eq!(
        custodian.submit(uuid::Uuid::new_v4(), &body.bytes).await,
        Err(SubmitError::Reference)
    );
}

#[tokio::test]
async fn every_answer_row_classifies_over_http() {
    use Ambiguity::*;
    let error =
        |status, name: &str| Canned::json(status, &json!({"error": "e", "name": name}).to_string());
    let rows = [
        (
            error(400, "DuplicateSequenceIdError"),
            SubmitAnswer::Ambiguous(Duplicate),
        ),
        (error(400, "InvalidAddressError"), SubmitAnswer::Refused),
        (
            Canned::json(400, "<html>"),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (error(401, "Unauthorized"), SubmitAnswer::Refused),
        (error(403, "Forbidden"), SubmitAnswer::Refused),
        (Canned::json(409, ""), SubmitAnswer::Ambiguous(Duplicate)),
        (
            Canned::json(429, "").with_header("retry-after", "3"),
            SubmitAnswer::Ambiguous(RateLimited),
        ),
        (Canned::json(500, ""), SubmitAnswer::Ambiguous(ServerError)),
        (
            Canned::json(200, r#"{"status":"signed"}"#),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (error(404, "NotFound"), SubmitAnswer::Ambiguous(Unreadable)),
    ];
    for (canned, expected) in rows {
        let status = canned.status;
        assert_eq!(submit_answer(canned).await.answer, expected, "{status}");
    }
    let limited = submit_answer(Canned::json(429, "").with_header("retry-after", "3")).await;
    assert_eq!(limited.retry_after, Some(std::time::Duration::from_secs(3)));
    let silent = submit_to(&serve_fault(Fault::NeverAnswer).await).await;
    assert_eq!(silent.answer, SubmitAnswer::Ambiguous(Timeout));
    let cut = submit_to(&serve_fault(Fault::CutAnswer).await).await;
    assert_eq!(cut.answer, SubmitAnswer::Ambiguous(ConnectionLost));
}

#[tokio::test]
async fn lookups_find_by_sequence_id() {
    let body = transfer("pendingApproval").to_string();
    let server = serve(vec![Canned::json(200, &body)]).await;
    let custodian = adapter(&server.base);
    let outcome = custodian.lookup(&request(1_000)).await;
    assert_eq!(
        outcome.lookup,
        Lookup::Found(opledger_domain::custodian::Record {
            status: ProviderStatus::PendingAuthorization,
            tx_hash: None
        })
    );
    let sent = &server.requests()[0];
    assert_eq!(sent.method, "GET");
    assert_eq!(
        sent.uri,
        format!("/api/v2/hteth/wallet/{WALLET}/transfer/sequenceId/{REFERENCE}")
    );
    let server = serve(vec![Canned::json(
        404,
        r#"{"error":"transfer not found","name":"NotFound"}"#,
    )])
    .await;
    assert_eq!(
        adapter(&server.base).lookup(&request(1_000)).await.lookup,
        Lookup::NotFound
    );
    let server = serve(vec![Canned::json(404, "Cannot GET")]).await;
    let outcome = adapter(&server.base).lookup(&request(1_000)).await;
    assert_eq!(outcome.failure, Some(LookupFailure::Unreadable));
    assert_eq!(custodian.profile(), Profile::OneSendPerReference);
}
