//! The record of the provider transaction a withdrawal follows. A `no_lookup` provider cannot be
//! asked for our reference; the transaction its answer to our request named, or, when no answer
//! arrived, the listed one an operator confirmed as ours, is read by its id (and, when it says
//! nothing was broadcast, from the provider's list) each time, as a lookup would return it. The executor and the witness then decide on it with the rules of every other record
//! (`opledger_domain::custodian::after_record`, `witness_release`), each with its own
//! credentials.

use crate::types::{
    Candidate, CandidatesError, LookupFailure, LookupOutcome, ProviderRecord, TimeWindow,
    TransferRequest,
};
use opledger_domain::custodian::{Lookup, Next, Record, after_record};

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

/// Whether a listed transaction, by what the list shows, says nothing was ever broadcast: a
/// documented status that is terminal without a hash.
fn ended_unsent(candidate: &Candidate) -> bool {
    candidate.hashes.is_empty()
        && candidate.status.is_some_and(|status| {
            after_record(Record {
                status,
                tx_hash: None,
            }) == Next::NotSent
        })
}

/// Whether a transaction other than `provider_id` among `listed` could be the payment of the
/// request they were listed for: one that is not ended unsent (in flight, completed, naming a
/// hash, or of an undocumented status) and that no other withdrawal of ours is bound to
/// (`accounted`: such a transaction is that withdrawal's, settled or released on its own).
/// While one exists, `provider_id` saying nothing was broadcast proves nothing: the operator may
/// have bound the wrong one of two transactions with the same destination and amount.
pub fn paid_elsewhere(listed: &[Candidate], provider_id: &str, accounted: &[String]) -> bool {
    listed.iter().any(|c| {
        c.provider_id != provider_id && !accounted.contains(&c.provider_id) && !ended_unsent(c)
    })
}

/// The bound transaction `provider_id` as the provider listed it (`listed`: the candidates of
/// `request`, same destination and amount), read as a lookup would return it:
/// - listed with a documented status: `Found`, its first hash the transaction, the others
///   replaced ones, and the list page's digest as the answer's; but when it says nothing was
///   broadcast while the list may still lag (`listing_settled`: the provider's consistency
///   window has passed since our last send), `Failed` / `ListingLag`, and while another
///   candidate could be the payment ([`paid_elsewhere`], `accounted` naming the transactions
///   followed by our other withdrawals), `Failed` / `Ambiguous`: nothing is released on it;
/// - recreated by the provider: `Failed` / `Recreated` (the new transaction is the one to bind);
/// - not listed: `NotFound`, which concludes nothing (absence is never evidence);
/// - listed with an undocumented status, or the list unreadable: `Failed`.
pub fn read_bound(
    listed: Result<&[Candidate], CandidatesError>,
    request: &TransferRequest,
    provider_id: &str,
    accounted: &[String],
    listing_settled: bool,
) -> LookupOutcome {
    let listed = match listed {
        Ok(listed) => listed,
        Err(CandidatesError::Failed(failure)) => return LookupOutcome::failed(failure),
        Err(CandidatesError::Window) => return LookupOutcome::failed(LookupFailure::NotSent),
    };
    let Some(candidate) = listed.iter().find(|c| c.provider_id == provider_id) else {
        return LookupOutcome {
            lookup: Lookup::NotFound,
            failure: None,
            record: None,
            http_status: Some(200),
            body_sha256: None,
            retry_after: None,
        };
    };
    let failed = |failure| LookupOutcome {
        body_sha256: Some(candidate.answer_sha256),
        ..LookupOutcome::failed(failure)
    };
    let Some(status) = candidate.status else {
        return failed(LookupFailure::Unreadable);
    };
    if candidate.recreated {
        return failed(LookupFailure::Recreated);
    }
    if ended_unsent(candidate) && !listing_settled {
        return failed(LookupFailure::ListingLag);
    }
    if ended_unsent(candidate) && paid_elsewhere(listed, provider_id, accounted) {
        return failed(LookupFailure::Ambiguous);
    }
    let mut hashes = candidate.hashes.iter().copied();
    let tx_hash = hashes.next();
    let record = ProviderRecord {
        provider_id: candidate.provider_id.clone(),
        reference: request.reference.to_string(),
        status_text: candidate.status_text.clone(),
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

/// The followed transaction `provider_id` of a request stored `request_age` ago (the one the
/// provider's answer named, or an operator bound), read as a lookup would return it. The
/// executor and the witness both read a followed withdrawal this way, each with its own
/// credentials and login:
/// - first by its id ([`crate::Custodian::transaction`]): in flight, completed or naming a hash,
///   that read decides ([`read_bound`] on it alone: a hash is the chain's, in flight is
///   followed); not found concludes nothing; a transaction that differs from the request is a
///   mismatch; recreated by the provider (`TRANSACTION_RETRIED`), `Failed` / `Recreated`;
/// - when it says nothing was broadcast, or the provider reads no transaction by id, from the
///   list of `request`'s candidates in the window, with [`read_bound`]'s rules: `accounted`
///   answers which of the listed ids our other withdrawals account for (a store query of the
///   caller's) and `since_last_send` whether the account's consistency window has passed since
///   our last send.
pub async fn list_bound<E, F, Fut>(
    custodian: &dyn crate::Custodian,
    request: &TransferRequest,
    request_age: std::time::Duration,
    since_last_send: Option<std::time::Duration>,
    provider_id: &str,
    accounted: F,
) -> Result<LookupOutcome, E>
where
    F: FnOnce(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Vec<String>, E>>,
{
    let settled = since_last_send.is_some_and(|d| d >= custodian.consistency_window());
    match custodian.transaction(request, provider_id).await {
        Err(CandidatesError::Failed(LookupFailure::Unsupported)) => {}
        Ok(Some(read)) if read.recreated => {
            return Ok(LookupOutcome {
                body_sha256: Some(read.answer_sha256),
                ..LookupOutcome::failed(LookupFailure::Recreated)
            });
        }
        Ok(Some(read)) if !ended_unsent(&read) => {
            let read = std::slice::from_ref(&read);
            return Ok(read_bound(Ok(read), request, provider_id, &[], settled));
        }
        // Said nothing was broadcast: whether another transaction may be the payment is the
        // list's to show.
        Ok(Some(_)) => {}
        Ok(None) => return Ok(read_bound(Ok(&[]), request, provider_id, &[], settled)),
        Err(failed) => return Ok(read_bound(Err(failed), request, provider_id, &[], settled)),
    }
    let listed = custodian
        .candidates(request, window_since(request_age))
        .await;
    let ids: Vec<String> = listed
        .iter()
        .flatten()
        .map(|c| c.provider_id.clone())
        .collect();
    let accounted = accounted(ids).await?;
    Ok(read_bound(
        listed.as_deref().map_err(|e| *e),
        request,
        provider_id,
        &accounted,
        settled,
    ))
}

#[cfg(test)]
mod tests {
    use super::{paid_elsewhere, read_bound};
    use crate::types::{Candidate, CandidatesError, LookupFailure, LookupOutcome, TransferRequest};
    use opledger_domain::custodian::{Lookup, ProviderStatus, Record};

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
            recreated: false,
        }
    }

    fn bound(listed: &[Candidate], id: &str, accounted: &[String]) -> LookupOutcome {
        read_bound(Ok(listed), &request(), id, accounted, true)
    }

    #[test]
    fn the_bound_transaction_reads_as_a_record_with_its_first_hash_and_the_pages_digest() {
        let listed = [
            candidate("other", Some(ProviderStatus::Rejected), 0),
            candidate("ours", Some(ProviderStatus::Completed), 2),
        ];
        let seen = bound(&listed, "ours", &[]);
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

    #[test]
    fn a_bound_transaction_not_listed_is_not_found_and_an_undocumented_status_fails() {
        let listed = [candidate("other", None, 0)];
        assert_eq!(bound(&listed, "ours", &[]).lookup, Lookup::NotFound);
        let listed = [candidate("ours", None, 1)];
        let seen = bound(&listed, "ours", &[]);
        assert_eq!(
            (seen.lookup, seen.failure),
            (Lookup::Failed, Some(LookupFailure::Unreadable))
        );
        let failed = Err(CandidatesError::Failed(LookupFailure::Timeout));
        let seen = read_bound(failed, &request(), "ours", &[], true);
        assert_eq!(
            (seen.lookup, seen.failure),
            (Lookup::Failed, Some(LookupFailure::Timeout))
        );
    }

    /// The review's money-loss path: two withdrawals with one destination and amount, the
    /// provider paid one and rejected the other; the paid one bound to the rejection must never
    /// read as "nothing broadcast" while the payment is listed and no other withdrawal of ours
    /// accounts for it.
    #[test]
    fn a_rejection_bound_while_another_candidate_may_be_the_payment_concludes_nothing() {
        let rejected = candidate("rejected", Some(ProviderStatus::Rejected), 0);
        for other in [
            candidate("paid", Some(ProviderStatus::Completed), 1),
            candidate("flight", Some(ProviderStatus::Broadcasting), 0),
            candidate("odd", None, 0),
            candidate("failed-with-hash", Some(ProviderStatus::Failed), 1),
        ] {
            let listed = [rejected.clone(), other.clone()];
            let seen = bound(&listed, "rejected", &[]);
            assert_eq!(
                (seen.lookup, seen.failure),
                (Lookup::Failed, Some(LookupFailure::Ambiguous)),
                "{other:?}"
            );
            assert!(paid_elsewhere(&listed, "rejected", &[]));
            // Bound to another withdrawal of ours, it is that one's: the rejection reads.
            let accounted = [other.provider_id.clone()];
            let seen = bound(&listed, "rejected", &accounted);
            assert_eq!(
                seen.lookup,
                Lookup::Found(Record {
                    status: ProviderStatus::Rejected,
                    tx_hash: None,
                })
            );
        }
        // Other transactions that ended unsent take nothing away; a paid bound one reads.
        let listed = [
            rejected.clone(),
            candidate("blocked", Some(ProviderStatus::Blocked), 0),
            candidate("paid", Some(ProviderStatus::Completed), 1),
        ];
        assert!(!paid_elsewhere(&listed[..2], "rejected", &[]));
        assert!(matches!(
            bound(&listed, "paid", &[]).lookup,
            Lookup::Found(_)
        ));
    }

    /// The model checker's path: the provider's list lags, our own paid transaction is not listed
    /// yet, and the only candidate is another withdrawal's rejection. Until the consistency
    /// window has passed since our last send, a bound rejection concludes nothing.
    #[test]
    fn a_bound_rejection_concludes_nothing_before_the_listing_window_has_passed() {
        let listed = [candidate("rejected", Some(ProviderStatus::Rejected), 0)];
        let early = read_bound(Ok(&listed), &request(), "rejected", &[], false);
        assert_eq!(
            (early.lookup, early.failure),
            (Lookup::Failed, Some(LookupFailure::ListingLag))
        );
        assert!(matches!(
            bound(&listed, "rejected", &[]).lookup,
            Lookup::Found(_)
        ));
        // A transaction naming a hash is the chain's to decide at any time.
        let listed = [candidate("paid", Some(ProviderStatus::Completed), 1)];
        let early = read_bound(Ok(&listed), &request(), "paid", &[], false);
        assert!(matches!(early.lookup, Lookup::Found(_)));
    }

    /// A recreated transaction (Prime's `TRANSACTION_RETRIED`) concludes nothing: the payment,
    /// if any, is the new one's.
    #[test]
    fn a_recreated_transaction_concludes_nothing() {
        let mut retried = candidate("old", Some(ProviderStatus::Broadcasting), 0);
        retried.recreated = true;
        let listed = [
            retried,
            candidate("new", Some(ProviderStatus::Completed), 1),
        ];
        let seen = bound(&listed, "old", &[]);
        assert_eq!(
            (seen.lookup, seen.failure),
            (Lookup::Failed, Some(LookupFailure::Recreated))
        );
        assert!(matches!(
            bound(&listed, "new", &[]).lookup,
            Lookup::Found(_)
        ));
    }
}
