//! Fireblocks over a local HTTP server: the create and the lookup as sent (token, key, reference)
//! and every row of the classification tables.

use super::*;

async fn submit_to(base: &str) -> Submission {
    let custodian = adapter(base);
    let body = custodian.request(&request(1_000)).expect("body");
    custodian
        .submit(request(1_000).reference, &body.bytes)
        .await
        .expect("sent")
}

async fn submit_answer(canned: Canned) -> Submission {
    let server = serve(vec![canned]).await;
    submit_to(&server.base).await
}

#[tokio::test]
async fn an_accepted_create_sends_the_stored_bytes_with_a_valid_token_and_the_reference() {
    let server = serve(vec![Canned::json(
        200,
        r#"{"id":"fb-1","status":"SUBMITTED"}"#,
    )])
    .await;
    let custodian = adapter(&server.base);
    let body = custodian.request(&request(1_000)).expect("body");
    let reference = request(1_000).reference;
    let first = custodian
        .submit(reference, &body.bytes)
        .await
        .expect("sent");
    assert_eq!(first.answer, SubmitAnswer::Accepted);
    assert_eq!(first.provider_id.as_deref(), Some("fb-1"));
    assert_eq!(first.http_status, Some(200));
    assert_eq!(
        first.body_sha256,
        Some(sha256(br#"{"id":"fb-1","status":"SUBMITTED"}"#))
    );
    let _ = custodian
        .submit(reference, &body.bytes)
        .await
        .expect("sent");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let mut nonces = Vec::new();
    for sent in &requests {
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.uri, "/v1/transactions");
        assert_eq!(sent.body, body.bytes);
        assert_eq!(sent.header("idempotency-key"), Some(REFERENCE));
        assert_eq!(sent.header("x-api-key"), Some(API_KEY));
        assert_eq!(sent.header("content-type"), Some("application/json"));
        let token = sent
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .expect("bearer");
        let claims = check_token(token, "/v1/transactions", &sent.body);
        nonces.push(claims["nonce"].clone());
    }
    assert_ne!(nonces[0], nonces[1], "a fresh nonce per request");
}

#[tokio::test]
async fn every_answer_row_classifies_over_http() {
    use Ambiguity::*;
    let code =
        |status, code: i64| Canned::json(status, &format!(r#"{{"message":"m","code":{code}}}"#));
    let rows: Vec<(Canned, SubmitAnswer)> = vec![
        (code(400, 1438), SubmitAnswer::Ambiguous(Duplicate)),
        (code(400, 1439), SubmitAnswer::Ambiguous(Duplicate)),
        (code(400, 1003), SubmitAnswer::Refused),
        (
            Canned::json(400, "Bad Request"),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (code(401, -7), SubmitAnswer::Refused),
        (Canned::json(403, "{}"), SubmitAnswer::Refused),
        (Canned::json(409, "{}"), SubmitAnswer::Ambiguous(Duplicate)),
        (
            Canned::json(429, "{}"),
            SubmitAnswer::Ambiguous(RateLimited),
        ),
        (
            Canned::json(500, "oops"),
            SubmitAnswer::Ambiguous(ServerError),
        ),
        (Canned::json(503, ""), SubmitAnswer::Ambiguous(ServerError)),
        (
            Canned::json(200, "not json"),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (
            Canned::json(200, r#"{"id":"x","status":"NEW"}"#),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (
            Canned::json(201, r#"{"id":"x","status":"SUBMITTED"}"#),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (
            Canned::json(302, "").with_header("location", "http://127.0.0.1:9/elsewhere"),
            SubmitAnswer::Ambiguous(Unreadable),
        ),
        (code(404, 1401), SubmitAnswer::Ambiguous(Unreadable)),
        (Canned::json(422, "{}"), SubmitAnswer::Ambiguous(Unreadable)),
    ];
    for (canned, expected) in rows {
        let status = canned.status;
        let submission = submit_answer(canned).await;
        assert_eq!(submission.answer, expected, "{status}");
        assert_eq!(submission.http_status, Some(status));
        assert_eq!(submission.provider_id, None, "{status}");
    }
}

#[tokio::test]
async fn a_429_keeps_its_retry_after() {
    let submission = submit_answer(
        Canned::json(429, r#"{"message":"Too many requests"}"#).with_header("retry-after", "7"),
    )
    .await;
    assert_eq!(
        submission.answer,
        SubmitAnswer::Ambiguous(Ambiguity::RateLimited)
    );
    assert_eq!(submission.retry_after, Some(Duration::from_secs(7)));
    let dated = submit_answer(
        Canned::json(503, "").with_header("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"),
    )
    .await;
    assert_eq!(
        dated.answer,
        SubmitAnswer::Ambiguous(Ambiguity::ServerError)
    );
    assert_eq!(dated.retry_after, None);
}

#[tokio::test]
async fn silence_cuts_and_refusals_of_the_connection_are_ambiguous() {
    let silent = submit_to(&serve_fault(Fault::NeverAnswer).await).await;
    assert_eq!(silent.answer, SubmitAnswer::Ambiguous(Ambiguity::Timeout));
    let cut = submit_to(&serve_fault(Fault::CutAnswer).await).await;
    assert_eq!(
        cut.answer,
        SubmitAnswer::Ambiguous(Ambiguity::ConnectionLost)
    );
    let closed = submit_to(&serve_fault(Fault::Close).await).await;
    assert_eq!(
        closed.answer,
        SubmitAnswer::Ambiguous(Ambiguity::ConnectionLost)
    );
    let refused = submit_to(&refused().await).await;
    assert_eq!(
        refused.answer,
        SubmitAnswer::Ambiguous(Ambiguity::ConnectionLost)
    );
}

#[tokio::test]
async fn a_body_that_is_not_ours_or_names_another_reference_is_never_sent() {
    let server = serve(vec![Canned::json(
        200,
        r#"{"id":"fb-1","status":"SUBMITTED"}"#,
    )])
    .await;
    let custodian = adapter(&server.base);
    let body = custodian.request(&request(1_000)).expect("body");
    let other = Uuid::new_v4();
    assert_eq!(
        custodian.submit(other, &body.bytes).await,
        Err(SubmitError::Reference)
    );
    assert_eq!(custodian.submit(other, b"{}").await, Err(SubmitError::Body));
    assert!(server.requests().is_empty());
}

async fn lookup_answer(canned: Canned) -> LookupOutcome {
    let server = serve(vec![canned]).await;
    adapter(&server.base).lookup(&request(1_000)).await
}

#[tokio::test]
async fn lookups_find_by_external_tx_id_and_classify_every_answer() {
    let body = record_json("BROADCASTING").to_string();
    let server = serve(vec![Canned::json(200, &body)]).await;
    let custodian = adapter(&server.base);
    let outcome = custodian.lookup(&request(1_000)).await;
    assert_eq!(
        outcome.lookup,
        Lookup::Found(opledger_domain::custodian::Record {
            status: ProviderStatus::Broadcasting,
            tx_hash: None
        })
    );
    assert_eq!(outcome.body_sha256, Some(sha256(body.as_bytes())));
    let sent = &server.requests()[0];
    assert_eq!(sent.method, "GET");
    assert_eq!(
        sent.uri,
        format!("/v1/transactions/external_tx_id/{REFERENCE}")
    );
    assert!(sent.body.is_empty());
    let token = sent
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .expect("bearer");
    check_token(token, &sent.uri, b"");

    let not_found = lookup_answer(Canned::json(
        404,
        r#"{"message":"Transaction not found","code":1401}"#,
    ))
    .await;
    assert_eq!(
        (not_found.lookup, not_found.failure),
        (Lookup::NotFound, None)
    );
    for (canned, why) in [
        (Canned::json(404, "Not Found"), LookupFailure::Unreadable),
        (
            Canned::json(401, r#"{"message":"Unauthorized","code":-7}"#),
            LookupFailure::Unauthorized,
        ),
        (
            Canned::json(429, "{}").with_header("retry-after", "2"),
            LookupFailure::RateLimited,
        ),
        (Canned::json(500, ""), LookupFailure::ServerError),
        (Canned::json(200, "{}"), LookupFailure::Unreadable),
    ] {
        let outcome = lookup_answer(canned).await;
        assert_eq!(
            (outcome.lookup, outcome.failure),
            (Lookup::Failed, Some(why))
        );
    }
    let mut other = record_json("COMPLETED");
    other["destinationAddress"] = json!("0x2222222222222222222222222222222222222222");
    let outcome = lookup_answer(Canned::json(200, &other.to_string())).await;
    assert_eq!(outcome.lookup, Lookup::Failed);
    assert_eq!(
        outcome.mismatch(),
        Some(Mismatch {
            destination: true,
            ..Mismatch::default()
        })
    );
    assert!(outcome.record.is_some());
    let silent = adapter(&serve_fault(Fault::NeverAnswer).await)
        .lookup(&request(1_000))
        .await;
    assert_eq!(silent.failure, Some(LookupFailure::Timeout));
}

#[tokio::test]
async fn candidates_are_the_record_found_or_none() {
    let window = TimeWindow {
        start: chrono::DateTime::from_timestamp(1_700_000_000, 0).expect("t"),
        end: chrono::DateTime::from_timestamp(1_700_003_600, 0).expect("t"),
    };
    let mut value = record_json("COMPLETED");
    value["txHash"] = json!(format!("0x{}", "ab".repeat(32)));
    let server = serve(vec![Canned::json(200, &value.to_string())]).await;
    let custodian = adapter(&server.base);
    let found = custodian
        .candidates(&request(1_000), window)
        .await
        .expect("found");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].hashes, vec![[0xab; 32]]);
    assert_eq!(found[0].provider_id, "fb-tx-1");
    let reversed = TimeWindow {
        start: window.end,
        end: window.start,
    };
    assert_eq!(
        custodian.candidates(&request(1_000), reversed).await,
        Err(CandidatesError::Window)
    );
    let server = serve(vec![Canned::json(
        404,
        r#"{"message":"Transaction not found","code":1401}"#,
    )])
    .await;
    assert_eq!(
        adapter(&server.base)
            .candidates(&request(1_000), window)
            .await,
        Ok(Vec::new())
    );
    assert_eq!(custodian.profile(), Profile::LookupByReference);
    assert_eq!(custodian.consistency_window(), Duration::from_secs(60));
}
