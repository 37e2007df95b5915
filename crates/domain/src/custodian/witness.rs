//! The witness's decision on a release the custodian executor proposed.
//!
//! The executor proposes releasing a custodian withdrawal's hold on one provider record that is
//! terminal without a transaction hash. The witness, the second principal, looks the record up
//! itself (its own client of the provider, its own read-only credentials) and attests only what
//! its own lookup establishes:
//!
//! | proposal (the executor's)               | the witness's own lookup                          | verdict |
//! |-----------------------------------------|---------------------------------------------------|---------|
//! | some record of the withdrawal named a hash (or replaced ones) | anything                     | refuse `CUSTODIAN_BROADCAST_RECORDED` |
//! | its record is not terminal without a hash | anything                                        | refuse `CUSTODIAN_PROPOSAL_NOT_TERMINAL` |
//! | terminal, no hash                       | a record that differs from the stored request     | refuse `CUSTODIAN_RECORD_DIFFERS` |
//! | terminal, no hash                       | failed (timeout, 5xx, unreadable, no evidence digest) | wait |
//! | terminal, no hash                       | not found                                         | wait (never attest on absence) |
//! | terminal, no hash                       | a record naming a hash or replaced hashes         | refuse `CUSTODIAN_OWN_RECORD_BROADCAST` |
//! | terminal, no hash                       | a record in flight (or completed without a hash)  | refuse `CUSTODIAN_OWN_RECORD_NOT_TERMINAL` |
//! | terminal, no hash, status S             | terminal, no hash, another status                 | refuse `CUSTODIAN_STATUS_DIFFERS` |
//! | terminal, no hash, status S             | terminal, no hash, status S                       | attest S |
//!
//! A refusal is a security signal: an honest executor and an honest provider never produce one
//! (a provider that serves stale reads can, and the executor then proposes its next record).
//! Whatever the witness attests satisfies [`super::release_allowed`] with the proposal.

use super::{Lookup, Next, ProviderStatus, Record, after_record};

/// The release the executor proposed, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProposedRelease {
    /// The record it names.
    pub record: Record,
    /// Whether any record of the withdrawal ever named a transaction hash or replaced hashes (a
    /// broadcast happened: the chain decides, never a release).
    pub ever_broadcast: bool,
}

/// What the witness's own lookup of the provider's record by our reference returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnLookup {
    /// The lookup's outcome. A found record without the digest of the answer it came in is no
    /// evidence to attest: give it as [`Lookup::Failed`].
    pub lookup: Lookup,
    /// Whether the record found names replaced hashes.
    pub replaced: bool,
    /// Whether the provider's record of our reference differs from the stored request
    /// (destination, amount, asset, account): a security event, never a verdict.
    pub differs: bool,
}

/// Why the witness refuses a proposal for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WitnessRefusal {
    /// A record of the withdrawal named a transaction hash or replaced hashes.
    BroadcastRecorded,
    /// The proposed record is not terminal without a hash.
    ProposalNotTerminal,
    /// The provider's record differs from the stored request.
    RecordDiffers,
    /// The witness's own record names a transaction hash or replaced hashes.
    OwnRecordBroadcast,
    /// The witness's own record is in flight (or completed without a hash).
    OwnRecordNotTerminal,
    /// The witness's own record is terminal without a hash, with another status.
    StatusDiffers,
}

impl WitnessRefusal {
    /// Every refusal.
    pub const ALL: [WitnessRefusal; 6] = [
        WitnessRefusal::BroadcastRecorded,
        WitnessRefusal::ProposalNotTerminal,
        WitnessRefusal::RecordDiffers,
        WitnessRefusal::OwnRecordBroadcast,
        WitnessRefusal::OwnRecordNotTerminal,
        WitnessRefusal::StatusDiffers,
    ];

    /// The stored reason code (UPPER_SNAKE).
    pub fn reason_code(self) -> &'static str {
        match self {
            WitnessRefusal::BroadcastRecorded => "CUSTODIAN_BROADCAST_RECORDED",
            WitnessRefusal::ProposalNotTerminal => "CUSTODIAN_PROPOSAL_NOT_TERMINAL",
            WitnessRefusal::RecordDiffers => "CUSTODIAN_RECORD_DIFFERS",
            WitnessRefusal::OwnRecordBroadcast => "CUSTODIAN_OWN_RECORD_BROADCAST",
            WitnessRefusal::OwnRecordNotTerminal => "CUSTODIAN_OWN_RECORD_NOT_TERMINAL",
            WitnessRefusal::StatusDiffers => "CUSTODIAN_STATUS_DIFFERS",
        }
    }
}

/// Why the witness decides nothing now (it looks again next pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WitnessWait {
    /// The lookup failed: no information.
    LookupFailed,
    /// The provider has no record of our reference (yet): absence is never evidence.
    NotFound,
}

impl WitnessWait {
    /// A label for logs and metrics.
    pub fn label(self) -> &'static str {
        match self {
            WitnessWait::LookupFailed => "lookup_failed",
            WitnessWait::NotFound => "not_found",
        }
    }
}

/// What the witness does with a proposed custodian release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WitnessVerdict {
    /// Attest the proposal with this status (its own record's, equal to the proposed one's).
    Attest(ProviderStatus),
    /// Refuse it for good (a security signal).
    Refuse(WitnessRefusal),
    /// Decide nothing now.
    Wait(WitnessWait),
}

/// The witness's verdict on `proposed` from its `own` lookup (the table in the module docs).
pub fn witness_release(proposed: ProposedRelease, own: OwnLookup) -> WitnessVerdict {
    use WitnessRefusal as R;
    let refuse = WitnessVerdict::Refuse;
    if proposed.ever_broadcast {
        return refuse(R::BroadcastRecorded);
    }
    if after_record(proposed.record) != Next::NotSent {
        return refuse(R::ProposalNotTerminal);
    }
    if own.differs {
        return refuse(R::RecordDiffers);
    }
    let seen = match own.lookup {
        Lookup::Failed => return WitnessVerdict::Wait(WitnessWait::LookupFailed),
        Lookup::NotFound => return WitnessVerdict::Wait(WitnessWait::NotFound),
        Lookup::Found(seen) => seen,
    };
    if seen.tx_hash.is_some() || own.replaced {
        refuse(R::OwnRecordBroadcast)
    } else if after_record(seen) != Next::NotSent {
        refuse(R::OwnRecordNotTerminal)
    } else if seen.status != proposed.record.status {
        refuse(R::StatusDiffers)
    } else {
        WitnessVerdict::Attest(seen.status)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{StatusClass, StoredRecord, release_allowed};
    use super::*;

    fn records() -> Vec<Record> {
        ProviderStatus::ALL
            .into_iter()
            .flat_map(|status| [None, Some([9; 32])].map(|tx_hash| Record { status, tx_hash }))
            .collect()
    }

    fn proposals() -> Vec<ProposedRelease> {
        records()
            .into_iter()
            .flat_map(|record| {
                [false, true].map(|ever_broadcast| ProposedRelease {
                    record,
                    ever_broadcast,
                })
            })
            .collect()
    }

    /// Every lookup the witness can make: each record, replaced or not, differing or not, not
    /// found and failed (each also beside a difference).
    fn lookups() -> Vec<OwnLookup> {
        let mut seen: Vec<Lookup> = records().into_iter().map(Lookup::Found).collect();
        seen.extend([Lookup::NotFound, Lookup::Failed]);
        let mut all = Vec::new();
        for lookup in seen {
            for replaced in [false, true] {
                for differs in [false, true] {
                    all.push(OwnLookup {
                        lookup,
                        replaced,
                        differs,
                    });
                }
            }
        }
        all
    }

    fn terminal_without_hash(record: Record) -> bool {
        record.tx_hash.is_none()
            && matches!(
                record.status.class(),
                StatusClass::NotSent | StatusClass::Failed
            )
    }

    #[test]
    fn the_witness_attests_only_its_own_terminal_record_without_a_hash_with_the_proposed_status() {
        let mut attested = 0;
        for proposed in proposals() {
            for own in lookups() {
                let verdict = witness_release(proposed, own);
                let expected = match own.lookup {
                    Lookup::Found(seen)
                        if !proposed.ever_broadcast
                            && terminal_without_hash(proposed.record)
                            && !own.differs
                            && !own.replaced
                            && terminal_without_hash(seen)
                            && seen.status == proposed.record.status =>
                    {
                        Some(seen.status)
                    }
                    _ => None,
                };
                match verdict {
                    WitnessVerdict::Attest(status) => {
                        attested += 1;
                        assert_eq!(Some(status), expected, "{proposed:?} {own:?}");
                    }
                    _ => assert_eq!(expected, None, "{proposed:?} {own:?}: {verdict:?}"),
                }
            }
        }
        // CANCELLED, BLOCKED, REJECTED and FAILED, each attested once.
        assert_eq!(attested, 4);
    }

    #[test]
    fn absence_and_failure_are_never_evidence_only_a_reason_to_look_again() {
        for proposed in proposals() {
            for lookup in [Lookup::NotFound, Lookup::Failed] {
                for replaced in [false, true] {
                    let own = OwnLookup {
                        lookup,
                        replaced,
                        differs: false,
                    };
                    let verdict = witness_release(proposed, own);
                    let valid = !proposed.ever_broadcast && terminal_without_hash(proposed.record);
                    let expected = if !valid {
                        "refuse"
                    } else if lookup == Lookup::NotFound {
                        "not_found"
                    } else {
                        "lookup_failed"
                    };
                    let got = match verdict {
                        WitnessVerdict::Wait(why) => why.label(),
                        WitnessVerdict::Refuse(_) => "refuse",
                        WitnessVerdict::Attest(_) => "attest",
                    };
                    assert_eq!(got, expected, "{proposed:?} {own:?}");
                }
            }
        }
    }

    #[test]
    fn each_contradiction_is_refused_with_its_reason() {
        let rejected = Record {
            status: ProviderStatus::Rejected,
            tx_hash: None,
        };
        let valid = ProposedRelease {
            record: rejected,
            ever_broadcast: false,
        };
        let found = |status, tx_hash| OwnLookup {
            lookup: Lookup::Found(Record { status, tx_hash }),
            replaced: false,
            differs: false,
        };
        let cases = [
            (
                ProposedRelease {
                    ever_broadcast: true,
                    ..valid
                },
                found(ProviderStatus::Rejected, None),
                WitnessRefusal::BroadcastRecorded,
            ),
            (
                ProposedRelease {
                    record: Record {
                        status: ProviderStatus::Completed,
                        tx_hash: None,
                    },
                    ever_broadcast: false,
                },
                found(ProviderStatus::Completed, None),
                WitnessRefusal::ProposalNotTerminal,
            ),
            (
                valid,
                OwnLookup {
                    differs: true,
                    ..found(ProviderStatus::Rejected, None)
                },
                WitnessRefusal::RecordDiffers,
            ),
            (
                valid,
                found(ProviderStatus::Completed, Some([1; 32])),
                WitnessRefusal::OwnRecordBroadcast,
            ),
            (
                valid,
                OwnLookup {
                    replaced: true,
                    ..found(ProviderStatus::Rejected, None)
                },
                WitnessRefusal::OwnRecordBroadcast,
            ),
            (
                valid,
                found(ProviderStatus::PendingAuthorization, None),
                WitnessRefusal::OwnRecordNotTerminal,
            ),
            (
                valid,
                found(ProviderStatus::Cancelling, None),
                WitnessRefusal::OwnRecordNotTerminal,
            ),
            (
                valid,
                found(ProviderStatus::Completed, None),
                WitnessRefusal::OwnRecordNotTerminal,
            ),
            (
                valid,
                found(ProviderStatus::Blocked, None),
                WitnessRefusal::StatusDiffers,
            ),
        ];
        for (proposed, own, refusal) in cases {
            assert_eq!(
                witness_release(proposed, own),
                WitnessVerdict::Refuse(refusal),
                "{proposed:?} {own:?}"
            );
        }
        assert_eq!(
            witness_release(valid, found(ProviderStatus::Rejected, None)),
            WitnessVerdict::Attest(ProviderStatus::Rejected)
        );
    }

    #[test]
    fn a_record_that_differs_or_names_a_hash_is_never_attested_whatever_else_holds() {
        for proposed in proposals() {
            for own in lookups() {
                let verdict = witness_release(proposed, own);
                let hashed = matches!(own.lookup, Lookup::Found(r) if r.tx_hash.is_some());
                if own.differs || hashed || (own.replaced && own.lookup != Lookup::NotFound) {
                    assert!(
                        !matches!(verdict, WitnessVerdict::Attest(_)),
                        "{proposed:?} {own:?}"
                    );
                }
                if own.differs {
                    assert!(
                        matches!(verdict, WitnessVerdict::Refuse(_)),
                        "{proposed:?} {own:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn what_the_witness_attests_is_what_the_release_rule_releases() {
        for proposed in proposals() {
            for own in lookups() {
                let WitnessVerdict::Attest(status) = witness_release(proposed, own) else {
                    continue;
                };
                let stored = StoredRecord {
                    record_id: 1,
                    record: proposed.record,
                    replaced: false,
                };
                assert!(
                    release_allowed(&[stored], &[1], &[(1, status)]),
                    "{proposed:?} {own:?}"
                );
            }
        }
    }

    #[test]
    fn reason_codes_are_distinct_upper_snake_names() {
        let codes: std::collections::BTreeSet<&str> = WitnessRefusal::ALL
            .iter()
            .map(|r| r.reason_code())
            .collect();
        assert_eq!(codes.len(), WitnessRefusal::ALL.len());
        for code in codes {
            assert!(code.len() <= 64);
            assert!(
                code.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
                "{code}"
            );
        }
    }
}
