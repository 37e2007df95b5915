//! The two-witness rule: the hold of a signed withdrawal is released only when a proposer's
//! proposal and the witness's attestation name the same evidence. Each check plays one adversary
//! (a compromised login, or a lying endpoint of the witness) and shows the release properties
//! hold; a mutant ledger that releases on a proposal alone is caught paying twice.

use std::collections::BTreeSet;

use opledger_domain::state::OperationState;
use opledger_model::properties::{
    ESCALATED_WITH_CAUSE, HOLD_MATCHES_STATE, NEVER_PAID_WHILE_RELEASED,
    NEVER_RELEASED_WHILE_PAYABLE, ONE_VALUE_MOVE_EVER_FINAL, ONE_VALUE_MOVE_IN_CHAIN,
    REACH_AWAITING_WITNESS, REACH_RELEASED_BY_CANCEL, REACH_WITNESS_REFUSED, RELEASED_ON_EVIDENCE,
    SETTLED_ON_FINAL_TRANSFER, SETTLED_STAYS_FINAL, UNKNOWN_LEFT_ON_EVIDENCE,
};
use opledger_model::store::Hold;
use opledger_model::truth;
use opledger_model::{
    Action, Compromised, Config, Endpoint, ReleaseRule, Report, Rotation, Until, Webhooks, check,
};

use crate::{assert_holds, counterexample, first_step_where};

/// The properties about releasing a hold: what no single principal may break.
const RELEASE_PROPERTIES: [&str; 5] = [
    RELEASED_ON_EVIDENCE,
    NEVER_RELEASED_WHILE_PAYABLE,
    NEVER_PAID_WHILE_RELEASED,
    ONE_VALUE_MOVE_IN_CHAIN,
    ONE_VALUE_MOVE_EVER_FINAL,
];

/// A smaller world for the adversaries, whose steps multiply the states: two confirmations, one
/// reorganization one block deep, a chain of four blocks, readings pinned up to a block below the
/// head (an honest, a lagging and a lying endpoint for the workers, an honest and a lagging one
/// for the witness, each with a quorum of two), reverts, no rotation, no webhooks, and the
/// adversary's own moves in place of the operator's. The adversary takes one step (a proposal,
/// an attestation or a move) besides asking the ledger to release at any moment: one proposal is
/// all a release needs, and its moves change nothing the witness reads.
fn world() -> Config {
    Config {
        confirmations: 2,
        reorg_depth: 1,
        reorgs: 1,
        max_height: 4,
        endpoints: vec![
            Endpoint::Honest,
            Endpoint::Lagging { blocks: 1 },
            Endpoint::Liar,
        ],
        pin_back: 1,
        witness_endpoints: vec![Endpoint::Honest, Endpoint::Lagging { blocks: 1 }],
        witness_pin_back: 1,
        rogue_steps: 1,
        rotation: Rotation::Never,
        webhooks: Webhooks::Off,
        operator: false,
        liveness: false,
        ..Config::default()
    }
}

/// Fails with the trace of every violated release property; returns the other violated ones.
fn assert_never_released_alone(report: &Report) -> BTreeSet<&'static str> {
    let violated = report.violated();
    let broken: Vec<String> = RELEASE_PROPERTIES
        .iter()
        .filter(|p| violated.contains(*p))
        .map(|p| format!("violated: {p}\n{}", report.trace(p).unwrap_or_default()))
        .collect();
    assert!(
        broken.is_empty(),
        "{}: a single principal released\n{}",
        report.label,
        broken.join("\n")
    );
    violated
}

/// Fails unless the release properties hold and every other violated property is one a
/// compromised proposer's login can still break without releasing: a settlement or an escalation
/// no evidence backs (settlement keeps one witness), UNKNOWN left without evidence, and a state
/// apart from its hold (it may ask the ledger to release at any moment, which the ledger refuses
/// without the witness). Prints what it broke.
fn assert_only_what_a_proposer_can_still_do(report: &Report) {
    let still_possible: BTreeSet<&str> = [
        SETTLED_ON_FINAL_TRANSFER,
        SETTLED_STAYS_FINAL,
        UNKNOWN_LEFT_ON_EVIDENCE,
        HOLD_MATCHES_STATE,
        ESCALATED_WITH_CAUSE,
    ]
    .into_iter()
    .collect();
    let violated = assert_never_released_alone(report);
    println!(
        "{}: still broken by the adversary: {violated:?}",
        report.label
    );
    let unexpected: Vec<&&str> = violated.difference(&still_possible).collect();
    assert!(unexpected.is_empty(), "{}: {unexpected:?}", report.label);
    // The adversary was at work: the witness refused one of its proposals for good, and honest
    // releases still happened beside it.
    assert!(report.unreached().is_empty(), "{:?}", report.unreached());
    assert!(report.discoveries.contains_key(REACH_WITNESS_REFUSED));
    assert!(report.discoveries.contains_key(REACH_RELEASED_BY_CANCEL));
}

#[test]
fn a_compromised_reconciler_login_never_releases_a_signed_withdrawal_alone() {
    let config = Config {
        compromised: Compromised::ReconcilerLogin,
        ..world()
    };
    let report = check(
        "two-witness rule, compromised reconciler login",
        config,
        Until::Exhausted,
    );
    assert_only_what_a_proposer_can_still_do(&report);
}

#[test]
fn a_compromised_operator_never_releases_a_signed_withdrawal_alone() {
    let config = Config {
        compromised: Compromised::Operator,
        ..world()
    };
    let report = check(
        "two-witness rule, compromised operator",
        config,
        Until::Exhausted,
    );
    assert_only_what_a_proposer_can_still_do(&report);
}

#[test]
fn a_compromised_witness_login_never_releases_a_signed_withdrawal_alone() {
    // The honest operator stays: the compromised witness login may attest its proposals too.
    let config = Config {
        compromised: Compromised::WitnessLogin,
        operator: true,
        ..world()
    };
    let report = check(
        "two-witness rule, compromised witness login",
        config,
        Until::Exhausted,
    );
    // Without a proposer's proposal nothing is released, and the honest proposers propose only
    // what their own quorum reads: every property holds.
    assert_holds(&report);
}

/// The witness's only agreement may be a lying endpoint's (a quorum of one), while the workers
/// read an honest quorum: whatever the liar makes the witness attest, it never matches a
/// proposal the honest chain does not back. (A lying quorum on the reconciler's side can only make
/// it propose what the compromised reconciler login above may propose.)
#[test]
fn a_lying_witness_endpoint_with_a_quorum_of_one_never_releases() {
    let config = Config {
        endpoints: vec![Endpoint::Honest, Endpoint::Lagging { blocks: 1 }],
        witness_endpoints: vec![Endpoint::Honest, Endpoint::Liar],
        witness_quorum: 1,
        ..world()
    };
    let report = check(
        "two-witness rule, liar on the witness's side, quorum 1",
        config,
        Until::Exhausted,
    );
    assert_holds(&report);
    assert!(report.discoveries.contains_key(REACH_AWAITING_WITNESS));
}

/// The rule is load-bearing: the same compromised reconciler login, against a ledger that
/// releases on a proposal alone, releases a signed withdrawal whose transfer is then mined: paid
/// twice.
#[test]
fn a_ledger_that_releases_on_a_proposal_alone_pays_twice_and_the_model_finds_it() {
    let mutant = Config {
        compromised: Compromised::ReconcilerLogin,
        release_rule: ReleaseRule::ProposalAlone,
        threads: 1,
        ..world()
    };
    let report = check(
        "mutant: the ledger releases on a proposal alone, compromised reconciler login",
        mutant,
        Until::Found(&[NEVER_RELEASED_WHILE_PAYABLE, NEVER_PAID_WHILE_RELEASED]),
    );
    counterexample(&report, NEVER_RELEASED_WHILE_PAYABLE);
    let paid = counterexample(&report, NEVER_PAID_WHILE_RELEASED);
    let (action, released) = first_step_where(&report, NEVER_PAID_WHILE_RELEASED, |s| {
        s.store.hold == Hold::Released
    });
    assert!(
        matches!(action, Action::Rogue(_)),
        "the compromised login releases: {action:?}"
    );
    assert!(
        released.store.attestations.is_empty(),
        "nothing was attested"
    );
    // The hold is released and our transfer is in the chain, succeeded: paid twice.
    assert_eq!(paid.store.hold, Hold::Released);
    assert_eq!(truth::value_moves(&paid.chain, &paid.store.attempts), 1);
    assert_ne!(paid.store.state, OperationState::Confirmed);
}
