//! The classification tables every profile shares, as pure functions of an answer's status and
//! body; each profile supplies only how its accepted answer, its 400 body and its not-found body
//! read.
//!
//! The tables themselves are documented where callers read them: on
//! [`crate::Custodian::submit`] and [`crate::Custodian::lookup`].

use crate::codec::sha256;
use crate::transport::{Answer, TransportFailure};
use crate::types::{
    Candidate, CandidatesError, LookupFailure, LookupOutcome, ProviderRecord, Submission,
};
use opledger_domain::custodian::{Ambiguity, Lookup, Record, SubmitAnswer};

/// What a provider's 400 body says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequest {
    /// Our reference is already used: our own earlier request, most likely.
    Duplicate,
    /// A documented refusal before anything was stored.
    Refusal,
}

/// The submission table for an answer with `status`: `accepted` reads a 200's body (the provider
/// id, or `None` when it is off the contract), `bad_request` a 400's (`None` when unreadable).
pub fn classify_submit(
    status: u16,
    accepted: impl FnOnce() -> Option<String>,
    bad_request: impl FnOnce() -> Option<BadRequest>,
) -> (SubmitAnswer, Option<String>) {
    let ambiguous = |why| (SubmitAnswer::Ambiguous(why), None);
    match status {
        200 => match accepted() {
            Some(id) => (SubmitAnswer::Accepted, Some(id)),
            None => ambiguous(Ambiguity::Unreadable),
        },
        400 => match bad_request() {
            Some(BadRequest::Duplicate) => ambiguous(Ambiguity::Duplicate),
            Some(BadRequest::Refusal) => (SubmitAnswer::Refused, None),
            None => ambiguous(Ambiguity::Unreadable),
        },
        401 | 403 => (SubmitAnswer::Refused, None),
        409 => ambiguous(Ambiguity::Duplicate),
        429 => ambiguous(Ambiguity::RateLimited),
        500..=599 => ambiguous(Ambiguity::ServerError),
        _ => ambiguous(Ambiguity::Unreadable),
    }
}

/// A submission's outcome from the exchange's: `classify` reads a whole answer (status, body).
pub fn submission(
    exchanged: Result<Answer, TransportFailure>,
    classify: impl FnOnce(&Answer) -> (SubmitAnswer, Option<String>),
) -> Submission {
    let bare = |answer, http_status, retry_after| Submission {
        answer,
        provider_id: None,
        retry_after,
        http_status,
        body_sha256: None,
    };
    match exchanged {
        Err(TransportFailure::Timeout) => {
            bare(SubmitAnswer::Ambiguous(Ambiguity::Timeout), None, None)
        }
        Err(TransportFailure::ConnectionLost) => bare(
            SubmitAnswer::Ambiguous(Ambiguity::ConnectionLost),
            None,
            None,
        ),
        Err(TransportFailure::TooLarge {
            status,
            retry_after,
        }) => bare(
            SubmitAnswer::Ambiguous(Ambiguity::Unreadable),
            Some(status),
            retry_after,
        ),
        Ok(answer) => {
            let (verdict, provider_id) = classify(&answer);
            Submission {
                answer: verdict,
                provider_id,
                retry_after: answer.retry_after,
                http_status: Some(answer.status),
                body_sha256: Some(sha256(&answer.body)),
            }
        }
    }
}

/// What a provider's 200 lookup body reads as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordRead {
    /// A record matching the request.
    Found(ProviderRecord),
    /// No usable record: why, and the record when it was read whole (beside a mismatch).
    Failed(LookupFailure, Option<ProviderRecord>),
}

/// The lookup table for an answer with `status`: `found` reads a 200's body, `not_found` says
/// whether a 404's body is the provider's documented one.
pub fn classify_lookup(
    status: u16,
    found: impl FnOnce() -> RecordRead,
    not_found: impl FnOnce() -> bool,
) -> (Lookup, Option<LookupFailure>, Option<ProviderRecord>) {
    let failed = |why| (Lookup::Failed, Some(why), None);
    match status {
        200 => match found() {
            RecordRead::Found(record) => {
                let decisive = Record {
                    status: record.status,
                    tx_hash: record.tx_hash,
                };
                (Lookup::Found(decisive), None, Some(record))
            }
            RecordRead::Failed(why, record) => (Lookup::Failed, Some(why), record),
        },
        404 if not_found() => (Lookup::NotFound, None, None),
        other => failed(status_failure(other)),
    }
}

/// Why a read answered `status` (other than the 200 or 404 it reads) failed.
pub fn status_failure(status: u16) -> LookupFailure {
    match status {
        401 | 403 => LookupFailure::Unauthorized,
        429 => LookupFailure::RateLimited,
        500..=599 => LookupFailure::ServerError,
        _ => LookupFailure::Unreadable,
    }
}

/// Why an exchange without a whole answer failed.
pub fn transport_failure(failure: TransportFailure) -> LookupFailure {
    match failure {
        TransportFailure::Timeout => LookupFailure::Timeout,
        TransportFailure::ConnectionLost => LookupFailure::ConnectionLost,
        TransportFailure::TooLarge { .. } => LookupFailure::Unreadable,
    }
}

/// A lookup's outcome from the exchange's: `classify` reads a whole answer.
pub fn lookup_outcome(
    exchanged: Result<Answer, TransportFailure>,
    classify: impl FnOnce(&Answer) -> (Lookup, Option<LookupFailure>, Option<ProviderRecord>),
) -> LookupOutcome {
    match exchanged {
        Err(
            failure @ TransportFailure::TooLarge {
                status,
                retry_after,
            },
        ) => LookupOutcome {
            http_status: Some(status),
            retry_after,
            ..LookupOutcome::failed(transport_failure(failure))
        },
        Err(failure) => LookupOutcome::failed(transport_failure(failure)),
        Ok(answer) => {
            let (lookup, failure, record) = classify(&answer);
            LookupOutcome {
                lookup,
                failure,
                record,
                http_status: Some(answer.status),
                body_sha256: Some(sha256(&answer.body)),
                retry_after: answer.retry_after,
            }
        }
    }
}

/// The candidates of a profile with a lookup: the record found (none when not found).
pub fn lookup_candidates(outcome: LookupOutcome) -> Result<Vec<Candidate>, CandidatesError> {
    match (outcome.lookup, outcome.record) {
        (Lookup::NotFound, _) => Ok(Vec::new()),
        (Lookup::Found(_), Some(record)) => {
            let (Some(destination), Some(amount), Some(answer_sha256)) =
                (record.destination, record.amount, outcome.body_sha256)
            else {
                return Err(CandidatesError::Failed(LookupFailure::Unreadable));
            };
            let mut hashes: Vec<_> = record.tx_hash.into_iter().collect();
            hashes.extend(record.replaced_hashes);
            Ok(vec![Candidate {
                provider_id: record.provider_id,
                status_text: record.status_text,
                status: Some(record.status),
                hashes,
                destination,
                amount,
                created_at: record.created_at,
                completed_at: None,
                answer_sha256,
                recreated: false,
            }])
        }
        _ => Err(CandidatesError::Failed(
            outcome.failure.unwrap_or(LookupFailure::Unreadable),
        )),
    }
}

#[cfg(test)]
mod tests;
