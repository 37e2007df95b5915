//! The custodian model (issue 27, `opledger_model::custodian`): the domain's custodian decisions
//! hold every property for every provider profile through crashes at every step boundary, lost,
//! delayed, 5xx, 429, duplicate and replayed answers, refusals, lookup lag and the consistency
//! window; without lookup, an operator's binding to another withdrawal's transaction never
//! releases a paid withdrawal nor settles one payment twice; a compromised executor login never
//! gets a release; each mutant is caught. Every check prints
//! `model: states=... elapsed=...ms check="custodian, ..."`.

use std::collections::BTreeSet;

use opledger_domain::custodian::Profile;
use opledger_model::Until;
use opledger_model::custodian::properties::{
    EXECUTED_NEVER_RELEASED, HOLD_MATCHES_STATE, NEVER_RELEASED_WHILE_BROADCAST,
    ONE_PAYMENT_ONE_SETTLEMENT, ONE_REFERENCE, ONE_TRANSACTION, REACH_ANSWERED_RELEASED,
    REACH_ANSWERED_SETTLED, REACH_BOUND_RELEASE_WAITS, REACH_FOREIGN_BOUND_RELEASED,
    REACH_FOREIGN_BOUND_SETTLED, REACH_WITNESS_REFUSED, REFUSAL_ONLY_WHEN_NOTHING_STORED,
    REFUSED_KEEPS_HOLD, RELEASED_ON_ATTESTED_RECORD, SETTLED_ONLY_WHEN_EXECUTED, STEPS_ARE_LEGAL,
};
use opledger_model::custodian::provider::{Candidate, Phase};
use opledger_model::custodian::{Action, CustodianConfig, CustodianReport, Mutant, State, check};

/// The properties about the money: one transaction, no release while anything may be or was
/// broadcast, a release only on an attested record, one payment settling one withdrawal, a
/// refusal keeping the hold.
const MONEY: [&str; 9] = [
    ONE_REFERENCE,
    ONE_TRANSACTION,
    NEVER_RELEASED_WHILE_BROADCAST,
    RELEASED_ON_ATTESTED_RECORD,
    EXECUTED_NEVER_RELEASED,
    ONE_PAYMENT_ONE_SETTLEMENT,
    REFUSED_KEEPS_HOLD,
    HOLD_MATCHES_STATE,
    STEPS_ARE_LEGAL,
];

/// The profiles whose provider finds a request by our reference.
const WITH_LOOKUP: [Profile; 2] = [Profile::LookupByReference, Profile::OneSendPerReference];

fn assert_holds(report: &CustodianReport) {
    let problems = report.problems();
    assert!(
        problems.is_empty(),
        "{}: {} problem(s)\n{}",
        report.label,
        problems.len(),
        problems.join("\n")
    );
}

/// Fails with the trace of every violated money property.
fn assert_money_safe(report: &CustodianReport) {
    let violated = report.violated();
    let broken: Vec<String> = MONEY
        .iter()
        .filter(|p| violated.contains(*p))
        .map(|p| format!("violated: {p}\n{}", report.trace(p).unwrap_or_default()))
        .collect();
    assert!(broken.is_empty(), "{}\n{}", report.label, broken.join("\n"));
}

/// The counterexample to `property`, printed; fails when there is none.
fn counterexample(report: &CustodianReport, property: &str) -> State {
    let trace = report
        .trace(property)
        .unwrap_or_else(|| panic!("{}: no counterexample for {property:?}", report.label));
    println!("{}: counterexample to {property:?}:\n{trace}", report.label);
    report
        .discoveries
        .get(property)
        .map(|d| d.last_state().clone())
        .unwrap_or_else(|| State::initial(false))
}

fn run(label: &str, config: CustodianConfig) -> CustodianReport {
    let label = format!(
        "custodian, {}, {label}, {} executor(s), {} sends",
        config.profile.as_str(),
        config.executors,
        config.max_sends
    );
    check(&label, config, Until::Exhausted)
}

#[test]
fn custodian_every_property_holds_for_every_profile() {
    for profile in Profile::ALL {
        let config = CustodianConfig {
            max_sends: 3,
            ..CustodianConfig::new(profile)
        };
        assert_holds(&run("domain decisions", config));
    }
}

#[test]
fn custodian_an_unwatched_network_settles_only_on_a_completed_record() {
    for profile in WITH_LOOKUP {
        let config = CustodianConfig {
            watched_network: false,
            ..CustodianConfig::new(profile)
        };
        assert_holds(&run("unwatched network", config));
    }
}

/// Two instances whose leases may lapse, each carrying on with what it read. A send happens only
/// under a live lease of the sender's, its round is the store's number, and a send meant as the
/// first happens only while none is recorded: every property holds. Without the last guard a
/// sent withdrawal could be failed (instance A refused on the first send and stalled, B sending
/// again on its earlier read, A then concluding "refused before anything was stored" while the
/// provider held B's request); the model found it and the executor has the guard.
#[test]
fn custodian_two_executors_whose_leases_lapse_keep_every_property() {
    for profile in Profile::ALL {
        let report = run(
            "leases may lapse",
            CustodianConfig {
                executors: 2,
                ..CustodianConfig::new(profile)
            },
        );
        assert_holds(&report);
    }
}

/// The executor's database login, compromised: it inserts a REJECTED record of its own with a
/// proposal and asks for every move of the custodian actor at every moment; the witness refuses
/// its proposal from its own lookup, and no release happens. It can settle on its own (the
/// custodian actor's BROADCAST -> CONFIRMED row): settlements rest on one principal, as the
/// reconciler's do in the payout model.
#[test]
fn custodian_a_compromised_executor_login_never_gets_a_release() {
    for profile in Profile::ALL {
        let report = run(
            "compromised executor login",
            CustodianConfig {
                compromised_executor: true,
                ..CustodianConfig::new(profile)
            },
        );
        assert_money_safe(&report);
        let allowed: BTreeSet<&str> = [SETTLED_ONLY_WHEN_EXECUTED].into();
        assert!(
            report.violated().is_subset(&allowed),
            "{}: {:?}",
            report.label,
            report.violated()
        );
        counterexample(&report, SETTLED_ONLY_WHEN_EXECUTED);
        assert!(report.unreached().is_empty(), "{:?}", report.unreached());
        if profile.has_lookup() {
            assert!(report.discoveries.contains_key(REACH_WITNESS_REFUSED));
        }
    }
}

/// Mutant 1: a resend under a new reference after the first was not found (a lagging lookup):
/// the provider stores both, and may execute both.
#[test]
fn custodian_mutant_a_resend_with_a_new_reference_is_caught_as_two_transactions() {
    for profile in WITH_LOOKUP {
        let report = run(
            "mutant: new reference on resend",
            CustodianConfig {
                mutant: Mutant::NewReferenceOnResend,
                ..CustodianConfig::new(profile)
            },
        );
        let violated = report.violated();
        assert!(violated.contains(ONE_REFERENCE), "{violated:?}");
        assert!(violated.contains(ONE_TRANSACTION), "{violated:?}");
        let last = counterexample(&report, ONE_TRANSACTION);
        assert_eq!(last.provider.stored().count(), 2);
    }
}

/// Mutant 2: a ledger that releases on the executor's proposal alone. With an honest executor
/// its proposals are true and only the attestation property sees it; with its login compromised
/// (a forged REJECTED record proposed while the provider broadcast), the hold is released while
/// the transaction is broadcast and executed. The mutant is the ledger's: checked without the
/// foreign candidate (the world it was written for; the foreign one multiplies the state space
/// several times and shows nothing more of it).
#[test]
fn custodian_mutant_a_release_on_the_proposal_alone_is_caught_paying_twice() {
    for profile in Profile::ALL {
        let report = run(
            "mutant: release on proposal, compromised login",
            CustodianConfig {
                mutant: Mutant::ReleaseOnProposal,
                compromised_executor: true,
                foreign_candidate: false,
                ..CustodianConfig::new(profile)
            },
        );
        let violated = report.violated();
        for property in [
            RELEASED_ON_ATTESTED_RECORD,
            NEVER_RELEASED_WHILE_BROADCAST,
            EXECUTED_NEVER_RELEASED,
        ] {
            assert!(
                violated.contains(property),
                "{}: {violated:?}",
                report.label
            );
        }
        let last = counterexample(&report, EXECUTED_NEVER_RELEASED);
        assert!(last.provider.stored().any(|t| t.phase.paid()));
    }
    for profile in WITH_LOOKUP {
        let report = run(
            "mutant: release on proposal",
            CustodianConfig {
                mutant: Mutant::ReleaseOnProposal,
                ..CustodianConfig::new(profile)
            },
        );
        let expected: BTreeSet<&str> = [RELEASED_ON_ATTESTED_RECORD].into();
        assert_eq!(report.violated(), expected, "{}", report.label);
        counterexample(&report, RELEASED_ON_ATTESTED_RECORD);
    }
}

/// Mutant 3: `after_submit` taking a resend's refusal for a refusal: "refused before anything
/// was stored" is concluded while the first request is stored. The executor applies a refusal
/// only from SIGNED and a resend is sent from BROADCAST or UNKNOWN, so nothing moves on it, and
/// a release would need the witness: the wrong conclusion is caught, and no money property
/// breaks.
#[test]
fn custodian_mutant_a_resend_refusal_taken_for_a_refusal_is_caught() {
    for profile in WITH_LOOKUP {
        let report = run(
            "mutant: resend refusal is a refusal",
            CustodianConfig {
                mutant: Mutant::ResendRefusalIsRefusal,
                ..CustodianConfig::new(profile)
            },
        );
        let expected: BTreeSet<&str> = [REFUSAL_ONLY_WHEN_NOTHING_STORED].into();
        assert_eq!(report.violated(), expected, "{}", report.label);
        let last = counterexample(&report, REFUSAL_ONLY_WHEN_NOTHING_STORED);
        assert!(last.provider.stored().next().is_some());
    }
}

/// Mutant 4: the executor before the fix (the round from what the pass read, a send recorded
/// and made without a lease): with two instances whose leases lapse, one that read SIGNED
/// without a send sends a "first" request after the other's was stored, takes its refusal (a
/// 401 of its own) for "refused before anything was stored" and fails the withdrawal while the
/// provider holds the other's request. Checked without the foreign candidate (the world it was
/// written for): with it, the stale "first" send may also store our request after a release on
/// the other withdrawal's rejected transaction was attested (the listing window then passed with
/// nothing of ours stored), paid and released, and the check grows several times.
#[test]
fn custodian_mutant_a_send_on_a_stale_read_is_caught_concluding_a_refusal_while_stored() {
    for profile in Profile::ALL {
        let report = run(
            "mutant: send on a stale read",
            CustodianConfig {
                executors: 2,
                mutant: Mutant::SendOnStaleRead,
                foreign_candidate: false,
                ..CustodianConfig::new(profile)
            },
        );
        assert_money_safe(&report);
        let violated = report.violated();
        assert!(
            violated.contains(REFUSAL_ONLY_WHEN_NOTHING_STORED),
            "{}: {violated:?}",
            report.label
        );
        let last = counterexample(&report, REFUSAL_ONLY_WHEN_NOTHING_STORED);
        assert!(last.provider.stored().next().is_some());
    }
}

/// Without lookup, the provider's accepted answer names our request's transaction, which the
/// executor and the witness follow without an operator; after an ambiguous answer the provider
/// lists another withdrawal of ours to the same destination and amount beside ours; a careless
/// operator may bind ours to either, the other withdrawal may be
/// bound to its own, and the foreign transaction is paid, rejected or in flight on its own. The
/// executor proposes and the witness attests a release of a bound withdrawal only on a listing
/// read after the provider's consistency window since our send, when the bound transaction and
/// every other listed candidate not bound to another withdrawal ended without a hash: every
/// property holds, and the model reaches a release waiting on the other candidate, a release
/// and a settlement bound to the other withdrawal's transaction.
#[test]
fn custodian_without_lookup_a_wrong_binding_never_releases_a_paid_withdrawal() {
    let report = run(
        "bound release rule",
        CustodianConfig::new(Profile::NoLookup),
    );
    assert_holds(&report);
    for example in [
        REACH_ANSWERED_SETTLED,
        REACH_ANSWERED_RELEASED,
        REACH_BOUND_RELEASE_WAITS,
        REACH_FOREIGN_BOUND_RELEASED,
        REACH_FOREIGN_BOUND_SETTLED,
    ] {
        assert!(report.discoveries.contains_key(example), "{example}");
    }
}

/// Mutant 5, the review's F1: a release of a bound withdrawal judged on the bound transaction
/// alone. Our withdrawal was paid (its answer lost, its transaction listed); the other
/// withdrawal's transaction to the same destination and amount was rejected; the operator binds
/// ours to the rejected one, the witness attests from it, and the paid withdrawal is released.
#[test]
fn custodian_mutant_a_release_on_the_bound_record_alone_is_caught_releasing_a_paid_withdrawal() {
    let report = run(
        "mutant: release on the bound record alone",
        CustodianConfig {
            mutant: Mutant::ReleaseOnBoundRecordAlone,
            ..CustodianConfig::new(Profile::NoLookup)
        },
    );
    let violated = report.violated();
    for property in [EXECUTED_NEVER_RELEASED, NEVER_RELEASED_WHILE_BROADCAST] {
        assert!(
            violated.contains(property),
            "{}: {violated:?}",
            report.label
        );
    }
    let last = counterexample(&report, EXECUTED_NEVER_RELEASED);
    let ours = last
        .provider
        .txn(last.ledger.reference)
        .expect("ours stored");
    let foreign = last.provider.foreign.expect("the foreign transaction");
    assert!(ours.phase.paid() && ours.indexed, "{ours:?}");
    assert_eq!(foreign.phase, Phase::Rejected);
    assert_eq!(last.ledger.bound, Some(Candidate::Foreign));
    assert!(last.window_passed);
}

/// Mutant 6: the review's rule (the bound transaction and every other listed candidate not bound
/// to another withdrawal ended without a hash) over a listing read before the provider's
/// consistency window since our send passed. The list then need not show our own request's
/// transaction (the provider's lag, or a create still in the network): the other withdrawal's
/// rejected transaction is all it shows, an operator binds it, both principals find nothing else
/// listed, and our request, stored and paid, is released.
#[test]
fn custodian_mutant_the_bound_release_rule_before_the_listing_window_is_caught() {
    let report = run(
        "mutant: bound release before the listing window",
        CustodianConfig {
            mutant: Mutant::BoundReleaseBeforeListingWindow,
            ..CustodianConfig::new(Profile::NoLookup)
        },
    );
    let violated = report.violated();
    assert!(
        violated.contains(EXECUTED_NEVER_RELEASED),
        "{}: {violated:?}",
        report.label
    );
    let discovery = &report.discoveries[EXECUTED_NEVER_RELEASED];
    let (_, bound) = discovery
        .steps
        .iter()
        .find(|(action, _)| matches!(action, Action::Bind(Candidate::Foreign)))
        .expect("bound to the foreign transaction");
    let listed = bound
        .provider
        .txn(bound.ledger.reference)
        .is_some_and(|t| t.indexed);
    assert!(!listed, "ours was listed when bound: {bound:?}");
    counterexample(&report, EXECUTED_NEVER_RELEASED);
}
