//! Coinbase Prime: the withdrawal body, the request signature (checked with `openssl`), the status
//! table, answers and list pages read, and the rows against a local HTTP server.

use super::*;
use crate::classify::BadRequest;
use crate::testutil::{
    Canned, Captured, Fault, PORTFOLIO, PRIME_WALLET, SIGNING_KEY, openssl, prime_config, request,
    serve, serve_fault,
};
use chrono::DateTime;
use opledger_domain::custodian::{Ambiguity, Lookup, ProviderStatus, StatusClass, SubmitAnswer};
use serde_json::{Value, json};

const REFERENCE: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const ADDRESS: &str = "0x1111111111111111111111111111111111111111";

fn adapter(base: &str) -> Prime {
    Prime::new(&prime_config(base)).expect("adapter")
}

fn account() -> Account {
    Account {
        portfolio_id: PORTFOLIO.to_owned(),
        wallet_id: PRIME_WALLET.to_owned(),
        currency_symbol: "ETH".to_owned(),
        decimals: 18,
    }
}

fn window() -> TimeWindow {
    TimeWindow {
        start: DateTime::from_timestamp(1_767_225_600, 0).expect("t"),
        end: DateTime::from_timestamp(1_767_229_200, 0).expect("t"),
    }
}

#[test]
fn the_withdrawal_body_is_the_contracts_bytes() {
    let custodian = adapter("http://127.0.0.1:9");
    let body = custodian
        .request(&request(2_500_000_000_000_000_000))
        .expect("body");
    let expected = format!(
        r#"{{"amount":"2.5","destination_type":"DESTINATION_BLOCKCHAIN","idempotency_key":"{REFERENCE}","currency_symbol":"ETH","blockchain_address":{{"address":"{ADDRESS}"}}}}"#
    );
    assert_eq!(
        String::from_utf8(body.bytes.clone()).expect("utf8"),
        expected
    );
    assert_eq!(body.sha256, sha256(expected.as_bytes()));
    assert_eq!(
        custodian.request(&request(2_500_000_000_000_000_000)),
        Ok(body)
    );
    assert_eq!(
        custodian.request(&request(0)),
        Err(RequestError::ZeroAmount)
    );
}

fn openssl_signature(timestamp: &str, method: &str, path: &str, body: &[u8]) -> String {
    use base64::Engine;
    let mut message = format!("{timestamp}{method}{path}").into_bytes();
    message.extend_from_slice(body);
    let mac = openssl(
        &["dgst", "-sha256", "-hmac", SIGNING_KEY, "-binary"],
        &message,
    );
    base64::engine::general_purpose::STANDARD.encode(mac)
}

#[test]
fn signatures_match_an_independent_hmac() {
    let path = "/v1/portfolios/p/wallets/w/withdrawals";
    let ours =
        wire::signature(SIGNING_KEY.as_bytes(), "1767225600", "POST", path, b"{}").expect("sig");
    assert_eq!(ours, openssl_signature("1767225600", "POST", path, b"{}"));
    assert!(ours.ends_with('='), "standard base64, padded");
    let get = wire::signature(SIGNING_KEY.as_bytes(), "1", "GET", "/v1/x?a=b", b"").expect("sig");
    assert_eq!(get, openssl_signature("1", "GET", "/v1/x?a=b", b""));
}

#[test]
fn every_status_maps_as_the_table_says() {
    let table = [
        ("TRANSACTION_CREATED", ProviderStatus::Submitted),
        (
            "TRANSACTION_REQUESTED",
            ProviderStatus::PendingAuthorization,
        ),
        ("TRANSACTION_APPROVED", ProviderStatus::Queued),
        ("TRANSACTION_PLANNED", ProviderStatus::PendingSignature),
        ("TRANSACTION_PROCESSING", ProviderStatus::Broadcasting),
        ("TRANSACTION_BROADCASTING", ProviderStatus::Broadcasting),
        ("TRANSACTION_DONE", ProviderStatus::Completed),
        ("TRANSACTION_FAILED", ProviderStatus::Failed),
        ("TRANSACTION_REJECTED", ProviderStatus::Rejected),
        ("TRANSACTION_CANCELLED", ProviderStatus::Cancelled),
        ("TRANSACTION_EXPIRED", ProviderStatus::Cancelled),
        ("TRANSACTION_RETRIED", ProviderStatus::Broadcasting),
    ];
    for (text, status) in table {
        assert_eq!(wire::map_status(text), Some(status), "{text}");
    }
    assert_eq!(
        wire::map_status("TRANSACTION_RETRIED").map(ProviderStatus::class),
        Some(StatusClass::InFlight)
    );
    for unknown in ["", "transaction_done", "TRANSACTION_IMPORTED", "DONE"] {
        assert_eq!(wire::map_status(unknown), None, "{unknown}");
    }
}

fn echo(amount: &str, address: &str) -> String {
    json!({"activity_id": "act-1", "symbol": "ETH", "amount": amount,
           "destination_type": "DESTINATION_BLOCKCHAIN",
           "blockchain_destination": {"address": address}})
    .to_string()
}

#[test]
fn an_accepted_answer_must_echo_what_was_sent() {
    let body = withdrawal_body(&request(1_000), &account()).expect("body");
    let sent = wire::stored(&body).expect("stored");
    let read =
        |answer: &str| read_accepted(answer.as_bytes(), &sent, 18).map(|ids| ids.activity_id);
    assert_eq!(
        read(&echo("0.000000000000001", ADDRESS)).as_deref(),
        Some("act-1")
    );
    // The transaction it names is kept when usable in a path; the activity alone is accepted.
    let ids = |answer: Value| read_accepted(answer.to_string().as_bytes(), &sent, 18);
    let mut named: Value = serde_json::from_str(&echo("0.000000000000001", ADDRESS)).expect("json");
    assert_eq!(ids(named.clone()).and_then(|i| i.transaction_id), None);
    named["transaction_id"] = json!("tx-1");
    assert_eq!(
        ids(named.clone()).and_then(|i| i.transaction_id).as_deref(),
        Some("tx-1")
    );
    named["transaction_id"] = json!("../other");
    let odd = ids(named).expect("accepted");
    assert_eq!(
        (odd.activity_id.as_str(), odd.transaction_id),
        ("act-1", None)
    );
    assert_eq!(
        read(&echo(
            "0.0000000000000010",
            &ADDRESS.to_uppercase().replace("0X", "0x")
        ))
        .as_deref(),
        Some("act-1")
    );
    assert_eq!(read(&echo("0.000000000000002", ADDRESS)), None);
    assert_eq!(
        read(&echo(
            "0.000000000000001",
            "0x2222222222222222222222222222222222222222"
        )),
        None
    );
    assert_eq!(read(&echo("0.000000000000001", "not an address")), None);
    assert_eq!(read(r#"{"activity_id":"act-1"}"#), None);
    assert_eq!(
        read_bad_request(br#"{"message":"invalid address"}"#),
        Some(BadRequest::Refusal)
    );
    assert_eq!(read_bad_request(b"bad"), None);
}

fn listed(id: &str, amount: &str, address: &str, status: &str) -> Value {
    json!({"id": id, "wallet_id": PRIME_WALLET, "type": "WITHDRAWAL", "status": status,
           "symbol": "ETH", "amount": amount, "created_at": "2026-01-01T00:10:00Z",
           "completed_at": "", "blockchain_ids": [], "destination_address": address})
}

fn page(transactions: Vec<Value>, next: Option<&str>) -> String {
    json!({"transactions": transactions,
           "pagination": {"next_cursor": next.unwrap_or(""), "has_next": next.is_some()}})
    .to_string()
}

#[test]
fn pages_keep_the_withdrawals_paying_the_destination_and_amount() {
    let mut done = listed("tx-2", "0.000000000000001", ADDRESS, "TRANSACTION_DONE");
    done["blockchain_ids"] = json!([format!("0x{}", "ab".repeat(32))]);
    done["completed_at"] = json!("2026-01-01T00:20:00Z");
    let mut deposit = listed("tx-3", "0.000000000000001", ADDRESS, "TRANSACTION_DONE");
    deposit["type"] = json!("DEPOSIT");
    let mut other_wallet = listed("tx-4", "0.000000000000001", ADDRESS, "TRANSACTION_DONE");
    other_wallet["wallet_id"] = json!("wallet-2");
    let mut no_wallet = listed("tx-8", "0.000000000000001", ADDRESS, "TRANSACTION_DONE");
    no_wallet.as_object_mut().expect("row").remove("wallet_id");
    let mut null_wallet = listed("tx-9", "0.000000000000001", ADDRESS, "TRANSACTION_DONE");
    null_wallet["wallet_id"] = Value::Null;
    let mut usdc = listed("tx-5", "not read", ADDRESS, "TRANSACTION_DONE");
    usdc["symbol"] = json!("USDC");
    let body = page(
        vec![
            listed("tx-1", "0.000000000000001", ADDRESS, "TRANSACTION_RETRIED"),
            done,
            deposit,
            other_wallet,
            no_wallet,
            null_wallet,
            usdc,
            listed("tx-6", "0.000000000000002", ADDRESS, "TRANSACTION_DONE"),
            listed(
                "tx-7",
                "0.000000000000001",
                "0x2222222222222222222222222222222222222222",
                "TRANSACTION_DONE",
            ),
        ],
        Some("cursor+/="),
    );
    let (found, next) = read_page(body.as_bytes(), &request(1_000), &account()).expect("page");
    assert_eq!(next.as_deref(), Some("cursor+/="));
    let ids: Vec<&str> = found.iter().map(|c| c.provider_id.as_str()).collect();
    assert_eq!(ids, ["tx-1", "tx-2"]);
    assert_eq!(found[0].status, Some(ProviderStatus::Broadcasting));
    assert_eq!(found[0].completed_at, None);
    assert_eq!(found[1].hashes, vec![[0xab; 32]]);
    assert_eq!(
        found[1].completed_at.map(|t| t.timestamp()),
        Some(1_767_226_800)
    );
    assert_eq!(
        found[1].created_at.map(|t| t.timestamp()),
        Some(1_767_226_200)
    );

    for (field, value) in [
        ("amount", json!("1e-15")),
        ("destination_address", json!("nope")),
        ("blockchain_ids", json!(["0x12"])),
        ("created_at", json!("yesterday")),
    ] {
        let mut bad = listed("tx-1", "0.000000000000001", ADDRESS, "TRANSACTION_DONE");
        bad[field] = value;
        let body = page(vec![bad], None);
        assert_eq!(
            read_page(body.as_bytes(), &request(1_000), &account()),
            Err(LookupFailure::Unreadable),
            "{field}"
        );
    }
    let endless = r#"{"transactions":[],"pagination":{"next_cursor":"","has_next":true}}"#;
    assert_eq!(
        read_page(endless.as_bytes(), &request(1_000), &account()),
        Err(LookupFailure::Unreadable)
    );
}

fn check_signed(sent: &Captured) {
    let timestamp = sent.header("x-cb-access-timestamp").expect("timestamp");
    let now = chrono::Utc::now().timestamp();
    let at: i64 = timestamp.parse().expect("seconds");
    assert!((now - at).abs() <= 5, "{at} vs {now}");
    assert_eq!(
        sent.header("x-cb-access-signature"),
        Some(openssl_signature(timestamp, &sent.method, &sent.uri, &sent.body).as_str())
    );
    assert_eq!(sent.header("x-cb-access-key"), Some("access-key"));
    assert_eq!(
        sent.header("x-cb-access-passphrase"),
        Some("prime-passphrase")
    );
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
async fn an_accepted_withdrawal_is_signed_and_sends_the_stored_bytes() {
    let server = serve(vec![Canned::json(200, &echo("0.000000000000001", ADDRESS))]).await;
    let custodian = adapter(&server.base);
    let body = custodian.request(&request(1_000)).expect("body");
    let submission = custodian
        .submit(request(1_000).reference, &body.bytes)
        .await
        .expect("sent");
    assert_eq!(submission.answer, SubmitAnswer::Accepted);
    // No transaction named: nothing to follow (the activity is not a transaction).
    assert_eq!(submission.provider_id, None);
    let sent = &server.requests()[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(
        sent.uri,
        format!("/v1/portfolios/{PORTFOLIO}/wallets/{PRIME_WALLET}/withdrawals")
    );
    assert_eq!(sent.body, body.bytes);
    check_signed(sent);
    assert_eq!(
        custodian.submit(uuid::Uuid::new_v4(), &body.bytes).await,
        Err(SubmitError::Reference)
    );
}

#[tokio::test]
async fn every_answer_row_classifies_over_http() {
    use Ambiguity::*;
    let rows = [
        (
            Canned::json(400, r#"{"message":"invalid"}"#),
            SubmitAnswer::Refused,
        ),
        (
            Canned::json(400, "oops"),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (
            Canned::json(401, r#"{"message":"unauthorized"}"#),
            SubmitAnswer::Refused,
        ),
        (Canned::json(409, "{}"), SubmitAnswer::Ambiguous(Duplicate)),
        (
            Canned::json(429, "{}").with_header("retry-after", "1"),
            SubmitAnswer::Ambiguous(RateLimited),
        ),
        (Canned::json(502, ""), SubmitAnswer::Ambiguous(ServerError)),
        (
            Canned::json(200, &echo("0.000000000000002", ADDRESS)),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (Canned::json(204, ""), SubmitAnswer::Ambiguous(Unreadable)),
    ];
    for (canned, expected) in rows {
        let status = canned.status;
        let server = serve(vec![canned]).await;
        assert_eq!(submit_to(&server.base).await.answer, expected, "{status}");
    }
    let silent = submit_to(&serve_fault(Fault::NeverAnswer).await).await;
    assert_eq!(silent.answer, SubmitAnswer::Ambiguous(Timeout));
    let closed = submit_to(&serve_fault(Fault::Close).await).await;
    assert_eq!(closed.answer, SubmitAnswer::Ambiguous(ConnectionLost));
}

#[tokio::test]
async fn there_is_no_lookup_and_nothing_is_sent_for_one() {
    let server = serve(vec![Canned::json(200, "{}")]).await;
    let custodian = adapter(&server.base);
    let outcome = custodian.lookup(&request(1_000)).await;
    assert_eq!(outcome.lookup, Lookup::Failed);
    assert_eq!(outcome.failure, Some(LookupFailure::Unsupported));
    assert!(server.requests().is_empty());
    assert_eq!(custodian.profile(), Profile::NoLookup);
}

#[tokio::test]
async fn candidates_walk_the_pages_of_the_window() {
    let first = page(
        vec![listed(
            "tx-1",
            "0.000000000000001",
            ADDRESS,
            "TRANSACTION_BROADCASTING",
        )],
        Some("next page/2"),
    );
    let second = page(
        vec![listed(
            "tx-2",
            "0.000000000000001",
            ADDRESS,
            "TRANSACTION_CANCELLED",
        )],
        None,
    );
    let server = serve(vec![Canned::json(200, &first), Canned::json(200, &second)]).await;
    let custodian = adapter(&server.base);
    let found = custodian
        .candidates(&request(1_000), window())
        .await
        .expect("candidates");
    let ids: Vec<&str> = found.iter().map(|c| c.provider_id.as_str()).collect();
    assert_eq!(ids, ["tx-1", "tx-2"]);
    let requests = server.requests();
    let base = format!(
        "/v1/portfolios/{PORTFOLIO}/transactions?types=WITHDRAWAL&start_time=2026-01-01T00:00:00Z&end_time=2026-01-01T01:00:00Z"
    );
    assert_eq!(requests[0].uri, base);
    assert_eq!(requests[1].uri, format!("{base}&cursor=next%20page%2F2"));
    for sent in &requests {
        assert_eq!(sent.method, "GET");
        assert!(sent.body.is_empty());
        check_signed(sent);
    }

    let server = serve(vec![Canned::json(500, "")]).await;
    assert_eq!(
        adapter(&server.base)
            .candidates(&request(1_000), window())
            .await,
        Err(CandidatesError::Failed(LookupFailure::ServerError))
    );
    let reversed = TimeWindow {
        start: window().end,
        end: window().start,
    };
    assert_eq!(
        custodian.candidates(&request(1_000), reversed).await,
        Err(CandidatesError::Window)
    );
    let silent = adapter(&serve_fault(Fault::NeverAnswer).await);
    assert_eq!(
        silent.candidates(&request(1_000), window()).await,
        Err(CandidatesError::Failed(LookupFailure::Timeout))
    );
}

#[tokio::test]
async fn the_transaction_an_answer_names_is_kept_and_read_by_its_id() {
    let mut answer: Value =
        serde_json::from_str(&echo("0.000000000000001", ADDRESS)).expect("json");
    answer["transaction_id"] = json!("tx-7");
    let server = serve(vec![Canned::json(200, &answer.to_string())]).await;
    let submission = submit_to(&server.base).await;
    assert_eq!(submission.answer, SubmitAnswer::Accepted);
    assert_eq!(submission.provider_id.as_deref(), Some("tx-7"));

    let mut done = listed("tx-7", "0.000000000000001", ADDRESS, "TRANSACTION_DONE");
    done["blockchain_ids"] = json!([format!("0x{}", "ab".repeat(32))]);
    let one = |transaction: Value| json!({ "transaction": transaction }).to_string();
    let server = serve(vec![
        Canned::json(200, &one(done.clone())),
        Canned::json(404, r#"{"message":"not found"}"#),
        Canned::json(404, "gone"),
        Canned::json(503, ""),
    ])
    .await;
    let custodian = adapter(&server.base);
    let read = custodian
        .transaction(&request(1_000), "tx-7")
        .await
        .expect("read")
        .expect("found");
    assert_eq!(read.provider_id, "tx-7");
    assert_eq!(read.status, Some(ProviderStatus::Completed));
    assert_eq!(read.hashes, vec![[0xab; 32]]);
    let sent = &server.requests()[0];
    assert_eq!(sent.method, "GET");
    assert_eq!(
        sent.uri,
        format!("/v1/portfolios/{PORTFOLIO}/transactions/tx-7")
    );
    check_signed(sent);
    assert_eq!(
        custodian.transaction(&request(1_000), "tx-7").await,
        Ok(None)
    );
    assert_eq!(
        custodian.transaction(&request(1_000), "tx-7").await,
        Err(CandidatesError::Failed(LookupFailure::Unreadable))
    );
    assert_eq!(
        custodian.transaction(&request(1_000), "tx-7").await,
        Err(CandidatesError::Failed(LookupFailure::ServerError))
    );
    // An id that is not one path segment is never sent.
    assert_eq!(
        custodian.transaction(&request(1_000), "../x").await,
        Err(CandidatesError::Failed(LookupFailure::NotSent))
    );
    assert_eq!(server.requests().len(), 4);

    // What the id reads must be the request: another amount, destination, wallet, currency or
    // id is a mismatch, never a record.
    let differs = |field: &str, value: Value| {
        let mut changed = done.clone();
        changed[field] = value;
        wire::read_transaction(one(changed).as_bytes(), &request(1_000), &account(), "tx-7")
    };
    for (field, value) in [
        ("amount", json!("0.000000000000002")),
        (
            "destination_address",
            json!("0x2222222222222222222222222222222222222222"),
        ),
        ("wallet_id", json!("another-wallet")),
        ("symbol", json!("USDC")),
        ("type", json!("DEPOSIT")),
        ("id", json!("tx-8")),
    ] {
        assert!(
            matches!(differs(field, value), Err(LookupFailure::Mismatch(m)) if m.any()),
            "{field}"
        );
    }
    assert_eq!(
        differs("amount", json!("1.5.0")),
        Err(LookupFailure::Unreadable)
    );
}
