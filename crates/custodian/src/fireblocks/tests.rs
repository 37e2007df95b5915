//! Fireblocks: the body, the token, answers and records read (pure), then every row of the
//! classification table against a local HTTP server (`tests/http.rs`). The webhook tests are in
//! `tests/webhook.rs`.

mod http;
mod webhook;

use super::*;
use crate::classify::RecordRead;
use crate::codec::b64url_decode;
use crate::testutil::{
    API_KEY, Canned, Fault, fireblocks_config, key, refused, request, serve, serve_fault,
};
use crate::types::{CandidatesError, Mismatch, TimeWindow};
use opledger_domain::custodian::{Ambiguity, Lookup, ProviderStatus, SubmitAnswer};
use serde_json::{Value, json};

const REFERENCE: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const ADDRESS: &str = "0x1111111111111111111111111111111111111111";

fn account() -> Account {
    Account {
        asset_id: "ETH".to_owned(),
        vault_account_id: "7".to_owned(),
        decimals: 18,
    }
}

fn adapter(base: &str) -> Fireblocks {
    Fireblocks::new(&fireblocks_config(base)).expect("adapter")
}

#[test]
fn the_create_body_is_the_contracts_bytes_and_the_same_every_time() {
    let custodian = adapter("http://127.0.0.1:9");
    let body = custodian.request(&request(1_000)).expect("body");
    let expected = format!(
        r#"{{"assetId":"ETH","operation":"TRANSFER","source":{{"type":"VAULT_ACCOUNT","id":"7"}},"destination":{{"type":"ONE_TIME_ADDRESS","oneTimeAddress":{{"address":"{ADDRESS}"}}}},"amount":"0.000000000000001","externalTxId":"{REFERENCE}"}}"#
    );
    assert_eq!(
        String::from_utf8(body.bytes.clone()).expect("utf8"),
        expected
    );
    assert_eq!(body.sha256, sha256(expected.as_bytes()));
    for _ in 0..3 {
        assert_eq!(custodian.request(&request(1_000)), Ok(body.clone()));
    }
    let mut with_note = request(10_u128.pow(18));
    with_note.note = Some("payout \"7\"\n".to_owned());
    let noted =
        String::from_utf8(custodian.request(&with_note).expect("note").bytes).expect("utf8");
    assert!(
        noted.ends_with(&format!(
            r#""amount":"1","externalTxId":"{REFERENCE}","note":"payout \"7\"\n"}}"#
        )),
        "{noted}"
    );
    assert_eq!(
        custodian.request(&request(0)),
        Err(RequestError::ZeroAmount)
    );
    assert_eq!(
        wire::stored_reference(&body.bytes).as_deref(),
        Some(REFERENCE)
    );
}

fn decode_json(part: &str) -> Value {
    serde_json::from_slice(&b64url_decode(part).expect("base64url")).expect("json")
}

/// Checks a token as the provider would, with `openssl` for the signature; its claims.
fn check_token(token: &str, uri: &str, body: &[u8]) -> Value {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3, "{token}");
    assert_eq!(
        b64url_decode(parts[0]).expect("header"),
        br#"{"alg":"RS256","typ":"JWT"}"#
    );
    let signing_input = format!("{}.{}", parts[0], parts[1]);
    let signature = b64url_decode(parts[2]).expect("signature");
    assert!(
        key().openssl_verifies("-sha256", signing_input.as_bytes(), &signature),
        "openssl refuses the token's signature"
    );
    let claims = decode_json(parts[1]);
    assert_eq!(claims["uri"], uri);
    assert_eq!(claims["sub"], API_KEY);
    assert_eq!(claims["bodyHash"], hex::encode(sha256(body)));
    let iat = claims["iat"].as_u64().expect("iat");
    assert_eq!(claims["exp"].as_u64(), Some(iat + 29));
    let nonce = Uuid::parse_str(claims["nonce"].as_str().expect("nonce")).expect("uuid");
    assert_eq!(nonce.get_version_num(), 4);
    claims
}

#[test]
fn tokens_carry_the_contracts_claims_in_order_and_verify_independently() {
    let custodian = adapter("http://127.0.0.1:9");
    let nonce = Uuid::parse_str("a3bb189e-8bf9-4888-9912-ace4e6543002").expect("uuid");
    let token = custodian
        .signer
        .token("/v1/transactions", b"{}", nonce, 1_700_000_000)
        .expect("token");
    let claims = token.split('.').nth(1).expect("claims");
    assert_eq!(
        String::from_utf8(b64url_decode(claims).expect("b64")).expect("utf8"),
        format!(
            r#"{{"uri":"/v1/transactions","nonce":"{nonce}","iat":1700000000,"exp":1700000029,"sub":"{API_KEY}","bodyHash":"{}"}}"#,
            hex::encode(sha256(b"{}"))
        )
    );
    check_token(&token, "/v1/transactions", b"{}");
    let get = custodian
        .signer
        .token(&lookup_path(request(1).reference), b"", nonce, 1)
        .expect("token");
    let claims = check_token(
        &get,
        &format!("/v1/transactions/external_tx_id/{REFERENCE}"),
        b"",
    );
    assert_eq!(
        claims["bodyHash"],
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert!(!token.contains('='), "no padding");
    assert!(format!("{:?}", custodian.signer).contains("redacted"));
}

#[test]
fn only_unencrypted_pkcs8_pems_are_keys() {
    assert!(jwt::pkcs8_from_pem(&key().private_pem).is_ok());
    for (bad, says) in [
        (
            &b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"[..],
            "PKCS#1",
        ),
        (
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n",
            "encrypted",
        ),
        (
            b"-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n",
            "base64",
        ),
        (
            b"-----END PRIVATE KEY-----\n-----BEGIN PRIVATE KEY-----\n",
            "PKCS#8",
        ),
        (b"hello", "PKCS#8"),
        (&[0xff, 0xfe][..], "PEM"),
    ] {
        let error = jwt::pkcs8_from_pem(bad).expect_err("refused");
        assert!(error.contains(says), "{error}");
    }
}

fn record_json(status: &str) -> Value {
    json!({
        "id": "fb-tx-1",
        "externalTxId": REFERENCE,
        "status": status,
        "subStatus": "",
        "txHash": "",
        "assetId": "ETH",
        "destinationAddress": "0x1111111111111111111111111111111111111111".to_uppercase().replace("0X", "0x"),
        "amountInfo": {"amount": "0.000000000000001"},
        "createdAt": 1_700_000_000_000_i64,
        "lastUpdated": 1_700_000_001_000_i64,
        "somethingNew": {"ignored": true}
    })
}

fn read(value: &Value) -> RecordRead {
    read_record(value.to_string().as_bytes(), &request(1_000), &account())
}

#[test]
fn records_read_with_every_documented_status_and_hashes() {
    for status in ProviderStatus::ALL {
        let RecordRead::Found(record) = read(&record_json(status.as_str())) else {
            panic!("{status}");
        };
        assert_eq!(record.status, status);
        assert_eq!(record.tx_hash, None);
        assert_eq!(record.sub_status, None);
        assert_eq!(record.destination, Some([0x11; 20]));
        assert_eq!(record.amount, Some(1_000));
        assert_eq!(
            record.created_at.map(|t| t.timestamp()),
            Some(1_700_000_000)
        );
    }
    let mut value = record_json("CONFIRMING");
    value["txHash"] = json!(format!("0x{}", "AB".repeat(32)));
    value["replacedTxHash"] = json!("cd".repeat(32));
    value["subStatus"] = json!("CONFIRMING");
    value["numOfConfirmations"] = json!(3);
    let RecordRead::Found(record) = read(&value) else {
        panic!("hash");
    };
    assert_eq!(record.tx_hash, Some([0xab; 32]));
    assert_eq!(record.replaced_hashes, vec![[0xcd; 32]]);
    assert_eq!(record.sub_status.as_deref(), Some("CONFIRMING"));
    assert_eq!(record.confirmations, Some(3));
    assert_eq!(record.provider_id, "fb-tx-1");
}

#[test]
fn a_record_that_differs_is_a_mismatch_and_one_that_cannot_be_read_is_unreadable() {
    let cases: [(&str, Value, Mismatch); 5] = [
        (
            "externalTxId",
            json!("11111111-1111-4111-8111-111111111111"),
            Mismatch {
                reference: true,
                ..Mismatch::default()
            },
        ),
        (
            "destinationAddress",
            json!("0x2222222222222222222222222222222222222222"),
            Mismatch {
                destination: true,
                ..Mismatch::default()
            },
        ),
        (
            "amountInfo",
            json!({"amount": "0.000000000000002"}),
            Mismatch {
                amount: true,
                ..Mismatch::default()
            },
        ),
        (
            "assetId",
            json!("USDC"),
            Mismatch {
                asset: true,
                ..Mismatch::default()
            },
        ),
        (
            "externalTxId",
            Value::Null,
            Mismatch {
                reference: true,
                ..Mismatch::default()
            },
        ),
    ];
    for (field, value, mismatch) in cases {
        let mut record = record_json("COMPLETED");
        record[field] = value;
        let RecordRead::Failed(LookupFailure::Mismatch(found), Some(_)) = read(&record) else {
            panic!("{field}");
        };
        assert_eq!(found, mismatch, "{field}");
    }
    // The reference is compared whatever its case.
    let mut upper = record_json("COMPLETED");
    upper["externalTxId"] = json!(REFERENCE.to_uppercase());
    assert!(matches!(read(&upper), RecordRead::Found(_)));

    let unreadable: [(&str, Value); 6] = [
        ("status", json!("DONE")),
        ("amountInfo", json!({"amount": "0.0000000000000000001"})),
        ("amountInfo", json!({"amount": 1e-15})),
        ("txHash", json!("0x1234")),
        ("destinationAddress", json!("not an address")),
        ("id", Value::Null),
    ];
    for (field, value) in unreadable {
        let mut record = record_json("COMPLETED");
        record[field] = value;
        assert_eq!(
            read(&record),
            RecordRead::Failed(LookupFailure::Unreadable, None),
            "{field}"
        );
    }
    assert_eq!(
        read_record(b"not json", &request(1_000), &account()),
        RecordRead::Failed(LookupFailure::Unreadable, None)
    );
}

#[test]
fn answers_read_as_the_contract_says() {
    assert_eq!(
        read_accepted(br#"{"id":"fb-1","status":"SUBMITTED"}"#).as_deref(),
        Some("fb-1")
    );
    for bad in [
        &br#"{"id":"","status":"SUBMITTED"}"#[..],
        br#"{"id":"fb-1","status":"WHATEVER"}"#,
        br#"{"id":"fb-1"}"#,
        br#"{"id":7,"status":"SUBMITTED"}"#,
        b"<html>",
    ] {
        assert_eq!(read_accepted(bad), None);
    }
    use crate::classify::BadRequest::{Duplicate, Refusal};
    let exists = br#"{"message":"The external tx id that was provided in the request, already exists","code":1438}"#;
    assert_eq!(read_bad_request(exists), Some(Duplicate));
    assert_eq!(
        read_bad_request(
            br#"{"message":"Idempotency key was already used with an error","code":1439}"#
        ),
        Some(Duplicate)
    );
    assert_eq!(
        read_bad_request(br#"{"message":"Invalid address","code":1003}"#),
        Some(Refusal)
    );
    assert_eq!(read_bad_request(br#"{"message":"no code"}"#), None);
    assert_eq!(read_bad_request(b"Bad Request"), None);
    assert!(is_not_found(
        br#"{"message":"Transaction not found","code":1401}"#
    ));
    assert!(!is_not_found(br#"{"message":"Not Found"}"#));
    assert!(!is_not_found(b"<html>404</html>"));
}

#[test]
fn debug_output_shows_no_identifier() {
    let req = request(1_000);
    let shown = format!("{req:?}");
    assert!(
        !shown.contains("0f8fad5b") && !shown.contains("1111"),
        "{shown}"
    );
    let submission = Submission {
        answer: SubmitAnswer::Accepted,
        provider_id: Some("fb-secret-id".to_owned()),
        retry_after: None,
        http_status: Some(200),
        body_sha256: Some([1; 32]),
    };
    assert!(!format!("{submission:?}").contains("fb-secret-id"));
    let RecordRead::Found(record) = read(&record_json("COMPLETED")) else {
        panic!("record");
    };
    let shown = format!("{record:?}");
    assert!(
        !shown.contains("fb-tx-1") && !shown.contains("0f8fad5b"),
        "{shown}"
    );
}
