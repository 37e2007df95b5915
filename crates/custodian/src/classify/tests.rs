use super::*;
use crate::types::Mismatch;
use opledger_domain::custodian::{Ambiguity, ProviderStatus};
use std::time::Duration;

fn classify(
    status: u16,
    accepted: Option<&str>,
    bad: Option<BadRequest>,
) -> (SubmitAnswer, Option<String>) {
    classify_submit(status, || accepted.map(str::to_owned), || bad)
}

/// Status, what a 200 reads as, what a 400 reads as, the expected classification.
type Row<'a> = (
    u16,
    Option<&'a str>,
    Option<BadRequest>,
    (SubmitAnswer, Option<String>),
);

#[test]
fn every_row_of_the_submission_table() {
    use Ambiguity::*;
    let ambiguous = |why| (SubmitAnswer::Ambiguous(why), None);
    let rows: Vec<Row> = vec![
        (
            200,
            Some("tx-1"),
            None,
            (SubmitAnswer::Accepted, Some("tx-1".to_owned())),
        ),
        (200, None, None, ambiguous(Unreadable)),
        (400, None, Some(BadRequest::Duplicate), ambiguous(Duplicate)),
        (
            400,
            None,
            Some(BadRequest::Refusal),
            (SubmitAnswer::Refused, None),
        ),
        (400, None, None, ambiguous(Unreadable)),
        (401, None, None, (SubmitAnswer::Refused, None)),
        (403, None, None, (SubmitAnswer::Refused, None)),
        (409, None, None, ambiguous(Duplicate)),
        (429, None, None, ambiguous(RateLimited)),
        (500, None, None, ambiguous(ServerError)),
        (502, None, None, ambiguous(ServerError)),
        (503, None, None, ambiguous(ServerError)),
        (599, None, None, ambiguous(ServerError)),
    ];
    for (status, accepted, bad, expected) in rows {
        assert_eq!(classify(status, accepted, bad), expected, "{status}");
    }
    // Everything else is unreadable, whatever the body says.
    for status in [
        100, 201, 202, 204, 301, 302, 304, 307, 404, 405, 410, 422, 600,
    ] {
        assert_eq!(
            classify(status, Some("tx-1"), Some(BadRequest::Refusal)),
            ambiguous(Unreadable),
            "{status}"
        );
    }
}

#[test]
fn a_200_is_read_only_for_its_own_status_and_a_400_only_for_its_own() {
    let mut read_accepted = false;
    let mut read_bad = false;
    let _ = classify_submit(
        400,
        || {
            read_accepted = true;
            None
        },
        || Some(BadRequest::Refusal),
    );
    let _ = classify_submit(
        200,
        || Some("x".to_owned()),
        || {
            read_bad = true;
            None
        },
    );
    assert!(!read_accepted && !read_bad);
}

#[test]
fn transport_failures_are_ambiguous_and_keep_what_arrived() {
    let never = |_: &Answer| -> (SubmitAnswer, Option<String>) { panic!("no answer to classify") };
    let timeout = submission(Err(TransportFailure::Timeout), never);
    assert_eq!(timeout.answer, SubmitAnswer::Ambiguous(Ambiguity::Timeout));
    assert_eq!(timeout.http_status, None);
    let lost = submission(Err(TransportFailure::ConnectionLost), never);
    assert_eq!(
        lost.answer,
        SubmitAnswer::Ambiguous(Ambiguity::ConnectionLost)
    );
    let large = submission(
        Err(TransportFailure::TooLarge {
            status: 200,
            retry_after: Some(Duration::from_secs(3)),
        }),
        never,
    );
    assert_eq!(large.answer, SubmitAnswer::Ambiguous(Ambiguity::Unreadable));
    assert_eq!(large.http_status, Some(200));
    assert_eq!(large.retry_after, Some(Duration::from_secs(3)));

    let answer = Answer {
        status: 429,
        retry_after: Some(Duration::from_secs(7)),
        body: b"slow down".to_vec(),
    };
    let limited = submission(Ok(answer), |a| classify_submit(a.status, || None, || None));
    assert_eq!(
        limited.answer,
        SubmitAnswer::Ambiguous(Ambiguity::RateLimited)
    );
    assert_eq!(limited.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(limited.http_status, Some(429));
    assert_eq!(limited.body_sha256, Some(sha256(b"slow down")));
}

fn record(status: ProviderStatus, hash: Option<[u8; 32]>) -> ProviderRecord {
    ProviderRecord {
        provider_id: "tx-1".to_owned(),
        reference: "ref".to_owned(),
        status_text: status.as_str().to_owned(),
        sub_status: None,
        status,
        tx_hash: hash,
        replaced_hashes: vec![[9; 32]],
        destination: Some([1; 20]),
        amount: Some(5),
        asset: "ETH".to_owned(),
        confirmations: None,
        created_at: None,
    }
}

#[test]
fn every_row_of_the_lookup_table() {
    let found = record(ProviderStatus::Confirming, Some([7; 32]));
    let (lookup, failure, kept) =
        classify_lookup(200, || RecordRead::Found(found.clone()), || false);
    assert_eq!(
        lookup,
        Lookup::Found(Record {
            status: ProviderStatus::Confirming,
            tx_hash: Some([7; 32])
        })
    );
    assert_eq!((failure, kept), (None, Some(found.clone())));

    let mismatch = Mismatch {
        destination: true,
        ..Mismatch::default()
    };
    let (lookup, failure, kept) = classify_lookup(
        200,
        || RecordRead::Failed(LookupFailure::Mismatch(mismatch), Some(found.clone())),
        || false,
    );
    assert_eq!(lookup, Lookup::Failed);
    assert_eq!(failure, Some(LookupFailure::Mismatch(mismatch)));
    assert_eq!(kept, Some(found));

    assert_eq!(
        classify_lookup(404, || panic!("not a 200"), || true),
        (Lookup::NotFound, None, None)
    );
    for (status, why) in [
        (404, LookupFailure::Unreadable),
        (401, LookupFailure::Unauthorized),
        (403, LookupFailure::Unauthorized),
        (429, LookupFailure::RateLimited),
        (500, LookupFailure::ServerError),
        (503, LookupFailure::ServerError),
        (201, LookupFailure::Unreadable),
        (302, LookupFailure::Unreadable),
        (400, LookupFailure::Unreadable),
        (409, LookupFailure::Unreadable),
    ] {
        assert_eq!(
            classify_lookup(status, || panic!("not a 200"), || false),
            (Lookup::Failed, Some(why), None),
            "{status}"
        );
    }
}

#[test]
fn lookup_outcomes_keep_the_answer_hash_and_transport_failures_say_why() {
    let outcome = lookup_outcome(
        Ok(Answer {
            status: 404,
            retry_after: None,
            body: b"{}".to_vec(),
        }),
        |a| classify_lookup(a.status, || panic!("no"), || true),
    );
    assert_eq!(outcome.lookup, Lookup::NotFound);
    assert_eq!(outcome.body_sha256, Some(sha256(b"{}")));
    assert_eq!(outcome.http_status, Some(404));
    for (failure, why) in [
        (TransportFailure::Timeout, LookupFailure::Timeout),
        (
            TransportFailure::ConnectionLost,
            LookupFailure::ConnectionLost,
        ),
        (
            TransportFailure::TooLarge {
                status: 200,
                retry_after: None,
            },
            LookupFailure::Unreadable,
        ),
    ] {
        let outcome = lookup_outcome(Err(failure), |_| panic!("no answer"));
        assert_eq!(outcome.lookup, Lookup::Failed);
        assert_eq!(outcome.failure, Some(why));
        assert_eq!(outcome.body_sha256, None);
    }
}

#[test]
fn a_found_record_is_the_one_candidate_and_not_found_is_none() {
    let found = record(ProviderStatus::Completed, Some([7; 32]));
    let outcome = LookupOutcome {
        lookup: Lookup::Found(Record {
            status: found.status,
            tx_hash: found.tx_hash,
        }),
        failure: None,
        record: Some(found),
        http_status: Some(200),
        body_sha256: Some([5; 32]),
        retry_after: None,
    };
    let candidates = lookup_candidates(outcome).expect("candidates");
    assert_eq!(candidates.len(), 1);
    assert_eq!(candidates[0].hashes, vec![[7; 32], [9; 32]]);
    assert_eq!(candidates[0].answer_sha256, [5; 32]);
    assert_eq!(candidates[0].status, Some(ProviderStatus::Completed));
    let not_found = LookupOutcome {
        lookup: Lookup::NotFound,
        ..LookupOutcome::failed(LookupFailure::Unreadable)
    };
    assert_eq!(lookup_candidates(not_found), Ok(Vec::new()));
    assert_eq!(
        lookup_candidates(LookupOutcome::failed(LookupFailure::ServerError)),
        Err(CandidatesError::Failed(LookupFailure::ServerError))
    );
}
