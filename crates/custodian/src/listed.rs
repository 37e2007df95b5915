//! The record of a provider transaction an operator bound to a withdrawal. A `no_lookup` provider
//! cannot be asked for our reference; once an operator has confirmed which listed transaction is
//! ours, that transaction is read from the provider's list each time, as a lookup would return
//! it. The executor and the witness then decide on it with the rules of every other record
//! (`opledger_domain::custodian::after_record`, `witness_release`), each with its own
//! credentials.

use crate::api::Custodian;
use crate::types::{
    CandidatesError, LookupFailure, LookupOutcome, ProviderRecord, TimeWindow, TransferRequest,
};
use opledger_domain::custodian::{Lookup, Record};

/// The clock skew allowed between the provider and us, on both ends of a window (and the
/// provider's lists take whole seconds).
const SKEW: chrono::Duration = chrono::Duration::minutes(5);

/// The window whose listed transactions may be a request stored `request_age` ago: from
/// five minutes (the skew allowed) before it was stored until five minutes after now.
pub fn window_since(request_age: std::time::Duration) -> TimeWindow {
    let now = chrono::Utc::now();
    let age = chrono::Duration::from_std(request_age).unwrap_or(chrono::Duration::days(3650));
    TimeWindow {
        start: now - age - SKEW,
        end: now + SKEW,
    }
}

/// The bound transaction `provider_id` as the provider lists it in `window` among the
/// candidates of `request` (same destination and amount):
/// - listed with a documented status: `Found`, its first hash the transaction, the others
///   replaced ones, and the list page's digest as the answer's;
/// - not listed: `NotFound`, which concludes nothing (absence is never evidence);
/// - listed with an undocumented status, or the list unreadable: `Failed`.
pub async fn lookup_bound(
    custodian: &dyn Custodian,
    request: &TransferRequest,
    window: TimeWindow,
    provider_id: &str,
) -> LookupOutcome {
    let listed = match custodian.candidates(request, window).await {
        Ok(listed) => listed,
        Err(CandidatesError::Failed(failure)) => return LookupOutcome::failed(failure),
        Err(CandidatesError::Window) => return LookupOutcome::failed(LookupFailure::NotSent),
    };
    let Some(candidate) = listed.into_iter().find(|c| c.provider_id == provider_id) else {
        return LookupOutcome {
            lookup: Lookup::NotFound,
            failure: None,
            record: None,
            http_status: Some(200),
            body_sha256: None,
            retry_after: None,
        };
    };
    let Some(status) = candidate.status else {
        return LookupOutcome {
            body_sha256: Some(candidate.answer_sha256),
            ..LookupOutcome::failed(LookupFailure::Unreadable)
        };
    };
    let mut hashes = candidate.hashes.into_iter();
    let tx_hash = hashes.next();
    let record = ProviderRecord {
        provider_id: candidate.provider_id,
        reference: request.reference.to_string(),
        status_text: candidate.status_text,
        sub_status: None,
        status,
        tx_hash,
        replaced_hashes: hashes.collect(),
        destination: Some(candidate.destination),
        amount: Some(candidate.amount),
        asset: String::new(),
        confirmations: None,
        created_at: candidate.created_at,
    };
    LookupOutcome {
        lookup: Lookup::Found(Record { status, tx_hash }),
        failure: None,
        record: Some(record),
        http_status: Some(200),
        body_sha256: Some(candidate.answer_sha256),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
    use super::lookup_bound;
    use crate::api::{BoxFuture, Custodian};
    use crate::types::{
        Candidate, CandidatesError, LookupFailure, LookupOutcome, RequestBody, RequestError,
        Submission, SubmitError, TimeWindow, TransferRequest,
    };
    use opledger_domain::custodian::{Lookup, Profile, ProviderStatus, Record};
    use std::time::Duration;

    /// A provider whose list answers `listed`.
    #[derive(Debug)]
    struct Listing(Result<Vec<Candidate>, CandidatesError>);

    impl Custodian for Listing {
        fn profile(&self) -> Profile {
            Profile::NoLookup
        }
        fn consistency_window(&self) -> Duration {
            Duration::ZERO
        }
        fn request(&self, _: &TransferRequest) -> Result<RequestBody, RequestError> {
            Err(RequestError::ZeroAmount)
        }
        fn submit<'a>(
            &'a self,
            _: uuid::Uuid,
            _: &'a [u8],
        ) -> BoxFuture<'a, Result<Submission, SubmitError>> {
            Box::pin(async { Err(SubmitError::Signing) })
        }
        fn lookup<'a>(&'a self, _: &'a TransferRequest) -> BoxFuture<'a, LookupOutcome> {
            Box::pin(async { LookupOutcome::failed(LookupFailure::Unsupported) })
        }
        fn candidates<'a>(
            &'a self,
            _: &'a TransferRequest,
            _: TimeWindow,
        ) -> BoxFuture<'a, Result<Vec<Candidate>, CandidatesError>> {
            let listed = self.0.clone();
            Box::pin(async move { listed })
        }
    }

    fn request() -> TransferRequest {
        TransferRequest {
            reference: uuid::Uuid::from_u128(7),
            destination: [0x11; 20],
            amount: 1_000,
            note: None,
        }
    }

    fn candidate(id: &str, status: Option<ProviderStatus>, hashes: usize) -> Candidate {
        Candidate {
            provider_id: id.to_owned(),
            status_text: "TRANSACTION_X".to_owned(),
            status,
            hashes: (0..hashes).map(|i| [i as u8 + 1; 32]).collect(),
            destination: [0x11; 20],
            amount: 1_000,
            created_at: None,
            completed_at: None,
            answer_sha256: [9; 32],
        }
    }

    fn window() -> TimeWindow {
        let end = chrono::Utc::now();
        TimeWindow {
            start: end - chrono::Duration::hours(1),
            end,
        }
    }

    async fn bound(listing: Listing, id: &str) -> LookupOutcome {
        lookup_bound(&listing, &request(), window(), id).await
    }

    #[tokio::test]
    async fn the_bound_transaction_reads_as_a_record_with_its_first_hash_and_the_pages_digest() {
        let listing = Listing(Ok(vec![
            candidate("other", Some(ProviderStatus::Rejected), 0),
            candidate("ours", Some(ProviderStatus::Completed), 2),
        ]));
        let seen = bound(listing, "ours").await;
        assert_eq!(
            seen.lookup,
            Lookup::Found(Record {
                status: ProviderStatus::Completed,
                tx_hash: Some([1; 32]),
            })
        );
        let record = seen.record.expect("record");
        assert_eq!(record.replaced_hashes, vec![[2; 32]]);
        assert_eq!(record.reference, uuid::Uuid::from_u128(7).to_string());
        assert_eq!(seen.body_sha256, Some([9; 32]));
    }

    #[tokio::test]
    async fn a_bound_transaction_not_listed_is_not_found_and_an_undocumented_status_fails() {
        let listing = Listing(Ok(vec![candidate("other", None, 0)]));
        assert_eq!(bound(listing, "ours").await.lookup, Lookup::NotFound);
        let listing = Listing(Ok(vec![candidate("ours", None, 1)]));
        let seen = bound(listing, "ours").await;
        assert_eq!(
            (seen.lookup, seen.failure),
            (Lookup::Failed, Some(LookupFailure::Unreadable))
        );
        let listing = Listing(Err(CandidatesError::Failed(LookupFailure::Timeout)));
        let seen = bound(listing, "ours").await;
        assert_eq!(
            (seen.lookup, seen.failure),
            (Lookup::Failed, Some(LookupFailure::Timeout))
        );
    }
}
