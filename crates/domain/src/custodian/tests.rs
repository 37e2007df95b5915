use super::*;

const AMBIGUITIES: [Ambiguity; 6] = [
    Ambiguity::Timeout,
    Ambiguity::ConnectionLost,
    Ambiguity::ServerError,
    Ambiguity::RateLimited,
    Ambiguity::Duplicate,
    Ambiguity::Unreadable,
];

fn hash(byte: u8) -> Hash32 {
    [byte; 32]
}

/// Every record: each status, with and without a hash.
fn records() -> Vec<Record> {
    ProviderStatus::ALL
        .into_iter()
        .flat_map(|status| [None, Some(hash(7))].map(|tx_hash| Record { status, tx_hash }))
        .collect()
}

/// Every lookup outcome.
fn lookups() -> Vec<Lookup> {
    let mut all: Vec<Lookup> = records().into_iter().map(Lookup::Found).collect();
    all.extend([Lookup::NotFound, Lookup::Failed]);
    all
}

#[test]
fn an_ambiguous_submission_is_looked_up_or_left_to_an_operator_never_resent_or_released() {
    for profile in Profile::ALL {
        let expected = if profile == Profile::NoLookup {
            Next::Operator
        } else {
            Next::LookUp
        };
        for round in [Round::First, Round::Resend] {
            for ambiguity in AMBIGUITIES {
                let next = after_submit(profile, round, SubmitAnswer::Ambiguous(ambiguity));
                assert_eq!(next, expected, "{profile:?} {round:?} {ambiguity:?}");
            }
            assert_eq!(
                after_submit(profile, round, SubmitAnswer::Accepted),
                Next::Follow
            );
        }
        // Only the first request's refusal is a refusal: a resend's says nothing of the first.
        assert_eq!(
            after_submit(profile, Round::First, SubmitAnswer::Refused),
            Next::Refused
        );
        assert_eq!(
            after_submit(profile, Round::Resend, SubmitAnswer::Refused),
            expected
        );
    }
}

#[test]
fn not_found_is_no_answer_inside_the_window_and_a_resend_with_the_same_reference_after_it() {
    for profile in [Profile::LookupByReference, Profile::OneSendPerReference] {
        assert_eq!(
            after_lookup(profile, Lookup::NotFound, Window::Inside),
            Next::LookUp
        );
        assert_eq!(
            after_lookup(profile, Lookup::NotFound, Window::Passed),
            Next::ResendSameReference
        );
        for window in [Window::Inside, Window::Passed] {
            assert_eq!(after_lookup(profile, Lookup::Failed, window), Next::LookUp);
        }
    }
}

#[test]
fn only_a_terminal_record_without_a_hash_is_evidence_that_nothing_was_sent() {
    for profile in Profile::ALL {
        for lookup in lookups() {
            for window in [Window::Inside, Window::Passed] {
                let next = after_lookup(profile, lookup, window);
                if next != Next::NotSent {
                    continue;
                }
                let Lookup::Found(record) = lookup else {
                    panic!("{profile:?}: {lookup:?} released without a record");
                };
                assert!(record.tx_hash.is_none(), "{record:?} has a hash");
                assert!(
                    matches!(
                        record.status.class(),
                        StatusClass::NotSent | StatusClass::Failed
                    ),
                    "{record:?} is not terminal"
                );
            }
        }
    }
}

#[test]
fn a_broadcast_transaction_is_always_the_chains_to_decide() {
    for record in records() {
        let next = after_record(record);
        match record.tx_hash {
            Some(tx_hash) => assert_eq!(next, Next::Chain(tx_hash), "{record:?}"),
            None => assert!(!matches!(next, Next::Chain(_)), "{record:?}"),
        }
    }
}

#[test]
fn a_record_never_asks_for_a_new_request_and_nothing_but_a_refusal_fails_outright() {
    for profile in Profile::ALL {
        for lookup in lookups() {
            for window in [Window::Inside, Window::Passed] {
                let next = after_lookup(profile, lookup, window);
                assert_ne!(next, Next::Refused, "{profile:?} {lookup:?}");
                if next == Next::ResendSameReference {
                    assert_eq!(lookup, Lookup::NotFound);
                    assert_eq!(window, Window::Passed);
                }
            }
        }
    }
}

#[test]
fn a_provider_without_lookup_always_leaves_the_decision_to_an_operator() {
    for lookup in lookups() {
        for window in [Window::Inside, Window::Passed] {
            assert_eq!(
                after_lookup(Profile::NoLookup, lookup, window),
                Next::Operator
            );
        }
    }
}

#[test]
fn in_flight_records_are_followed_and_a_cancellation_in_progress_is_still_in_flight() {
    for status in ProviderStatus::ALL {
        let next = after_record(Record {
            status,
            tx_hash: None,
        });
        let expected = match status.class() {
            StatusClass::InFlight | StatusClass::Completed => Next::Follow,
            StatusClass::NotSent | StatusClass::Failed => Next::NotSent,
        };
        assert_eq!(next, expected, "{status}");
    }
    assert_eq!(ProviderStatus::Cancelling.class(), StatusClass::InFlight);
    assert_eq!(ProviderStatus::Completed.class(), StatusClass::Completed);
    for terminal in [
        ProviderStatus::Cancelled,
        ProviderStatus::Blocked,
        ProviderStatus::Rejected,
    ] {
        assert_eq!(terminal.class(), StatusClass::NotSent, "{terminal}");
    }
}

#[test]
fn status_names_read_back_and_unknown_names_are_refused() {
    for status in ProviderStatus::ALL {
        assert_eq!(status.as_str().parse::<ProviderStatus>(), Ok(status));
        assert_eq!(status.to_string(), status.as_str());
    }
    for unknown in ["", "completed", "DONE", "PENDING", "COMPLETED "] {
        assert_eq!(
            unknown.parse::<ProviderStatus>(),
            Err(UnknownStatus),
            "{unknown:?}"
        );
    }
    let names: Vec<&str> = Profile::ALL.iter().map(|p| p.as_str()).collect();
    assert_eq!(
        names,
        ["lookup_by_reference", "one_send_per_reference", "no_lookup"]
    );
}

mod release {
    use super::super::{ProviderStatus, Record, StoredRecord, release_allowed};

    fn stored(record_id: i64, status: ProviderStatus, hash: Option<u8>) -> StoredRecord {
        StoredRecord {
            record_id,
            record: Record {
                status,
                tx_hash: hash.map(|b| [b; 32]),
            },
            replaced: false,
        }
    }

    #[test]
    fn only_a_proposed_and_attested_terminal_record_without_a_hash_releases() {
        for status in ProviderStatus::ALL {
            let records = [stored(1, status, None)];
            let releases = release_allowed(&records, &[1], &[(1, status)]);
            let not_sent = matches!(
                status,
                ProviderStatus::Cancelled
                    | ProviderStatus::Blocked
                    | ProviderStatus::Rejected
                    | ProviderStatus::Failed
            );
            assert_eq!(releases, not_sent, "{status:?}");
            // One principal is never enough.
            assert!(!release_allowed(&records, &[1], &[]), "{status:?}");
            assert!(
                !release_allowed(&records, &[], &[(1, status)]),
                "{status:?}"
            );
        }
    }

    #[test]
    fn an_attestation_of_another_status_or_record_does_not_release() {
        let records = [
            stored(1, ProviderStatus::Rejected, None),
            stored(2, ProviderStatus::Blocked, None),
        ];
        assert!(!release_allowed(
            &records,
            &[1],
            &[(1, ProviderStatus::Blocked)]
        ));
        assert!(!release_allowed(
            &records,
            &[1],
            &[(2, ProviderStatus::Blocked)]
        ));
        assert!(release_allowed(
            &records,
            &[1, 2],
            &[(2, ProviderStatus::Blocked)]
        ));
    }

    #[test]
    fn any_record_that_ever_named_a_transaction_forbids_the_release() {
        let rejected = stored(2, ProviderStatus::Rejected, None);
        let attested = [(2, ProviderStatus::Rejected)];
        let earlier_hash = [stored(1, ProviderStatus::Broadcasting, Some(7)), rejected];
        assert!(!release_allowed(&earlier_hash, &[2], &attested));
        let mut replaced = rejected;
        replaced.replaced = true;
        assert!(!release_allowed(&[replaced], &[2], &attested));
        assert!(release_allowed(&[rejected], &[2], &attested));
    }
}
