//! Configurations outside what the design assumes, to show what breaks and that the model sees
//! it.

use std::collections::BTreeSet;

use opledger_domain::evidence::Escalation;
use opledger_domain::state::OperationState;
use opledger_model::chain::Tx;
use opledger_model::properties::{
    ENDS_TERMINAL_OR_ESCALATED, ESCALATED_WITH_CAUSE, NEVER_PAID_WHILE_RELEASED,
    NEVER_RELEASED_WHILE_PAYABLE, ONE_VALUE_MOVE_EVER_FINAL, REACH_REOPENED,
    RELEASED_AFTER_FINAL_CANCEL, RELEASED_ON_EVIDENCE, SETTLED_ON_FINAL_TRANSFER,
    SETTLED_STAYS_FINAL, UNKNOWN_LEFT_ON_EVIDENCE,
};
use opledger_model::store::Hold;
use opledger_model::{Action, Config, Endpoint, Rotation, Until, Webhooks, Worker, check};

use crate::{assert_holds, counterexample, first_step_where};

#[test]
fn a_quorum_of_one_lets_a_lying_endpoint_settle_and_move_unknown() {
    let config = Config {
        endpoints: vec![Endpoint::Honest, Endpoint::Liar],
        quorum: 1,
        liveness: false,
        threads: 1,
        ..Config::default()
    };
    let report = check(
        "quorum of one with a liar",
        config,
        Until::Found(&[SETTLED_ON_FINAL_TRANSFER, UNKNOWN_LEFT_ON_EVIDENCE]),
    );
    counterexample(&report, SETTLED_ON_FINAL_TRANSFER);
    counterexample(&report, UNKNOWN_LEFT_ON_EVIDENCE);
    let (action, state) = first_step_where(&report, SETTLED_ON_FINAL_TRANSFER, |s| {
        s.store.hold == Hold::Settled
    });
    assert!(
        matches!(action, Action::Commit(_)),
        "a worker settles: {action:?}"
    );
    assert!(
        state
            .chain
            .a
            .is_none_or(|m| !m.succeeded || state.chain.height < m.block + 2),
        "on a lie: nothing succeeded at final depth"
    );
}

#[test]
fn reorganizations_as_deep_as_finality_unsettle_a_settled_transfer_which_is_reopened() {
    let config = Config {
        confirmations: 2,
        reorg_depth: 2,
        max_height: 5,
        rotation: Rotation::Never,
        operator: false,
        webhooks: Webhooks::Off,
        liveness: false,
        ..Config::default()
    };
    let report = check(
        "reorganizations as deep as finality",
        config,
        Until::Exhausted,
    );
    counterexample(&report, SETTLED_STAYS_FINAL);
    // What "final" promised breaks, and nothing else: a settled transfer leaves the chain (and a
    // second one may reach final depth), a settlement or release decided on a final inclusion may
    // be committed after it left, and a released hold's cancel may leave the chain and its
    // transfer be mined before the watcher's next turn reopens the release (which
    // `reopen::a_release_whose_proof_is_reorganized_away_is_reopened_and_never_left_paid_twice`
    // checks); evidence checks, transitions and liveness-free invariants hold.
    let expected: BTreeSet<&str> = [
        SETTLED_STAYS_FINAL,
        ONE_VALUE_MOVE_EVER_FINAL,
        SETTLED_ON_FINAL_TRANSFER,
        RELEASED_ON_EVIDENCE,
        NEVER_RELEASED_WHILE_PAYABLE,
        NEVER_PAID_WHILE_RELEASED,
    ]
    .into_iter()
    .collect();
    assert_eq!(report.violated(), expected);
    // The reorganization check reopens such a confirmation.
    assert!(report.discoveries.contains_key(REACH_REOPENED));
    let (action, state) = first_step_where(&report, REACH_REOPENED, |s| s.ghost.reopened);
    assert_eq!(action, Action::Commit(Worker::Watcher));
    assert_eq!(state.store.hold, Hold::Held, "the hold is re-established");
}

#[test]
fn reading_attempts_before_the_endpoints_may_escalate_our_own_replacement_as_a_moved_nonce() {
    let config = Config {
        split_read: true,
        liveness: false,
        reorgs: 0,
        rotation: Rotation::Never,
        operator: false,
        webhooks: Webhooks::Off,
        threads: 1,
        ..Config::default()
    };
    // Only the escalation's cause breaks: a false alarm to security, the hold kept; nothing
    // settles, releases or leaves UNKNOWN without evidence.
    let report = check(
        "attempts read before the endpoints",
        config.clone(),
        Until::Exhausted,
    );
    assert_eq!(
        report.violated(),
        [ESCALATED_WITH_CAUSE].into_iter().collect::<BTreeSet<_>>()
    );
    let report = check(
        "attempts read before the endpoints, first counterexample",
        config,
        Until::Found(&[ESCALATED_WITH_CAUSE]),
    );
    counterexample(&report, ESCALATED_WITH_CAUSE);
    let (_, state) = first_step_where(&report, ESCALATED_WITH_CAUSE, |s| s.ghost.violations != 0);
    assert_eq!(state.store.escalation, Some(Escalation::NONCE_MOVED));
    assert_eq!(state.store.hold, Hold::Held);
    let consumed = state.chain.a.expect("the nonce is consumed");
    assert!(
        matches!(consumed.tx, Tx::Attempt(i) if i > 0),
        "by our own replacement, persisted after the worker read the attempts: {consumed:?}"
    );
}

/// An endpoint that stays faulty (a liar that keeps answering, or one of two endpoints that keeps
/// lagging) blocks every verdict, since `agree` needs every answering endpoint to agree. The
/// operation must not stay BROADCAST with its hold forever: after the window without a verdict
/// the reconciler escalates it (`next_step` escalates from BROADCAST as from UNKNOWN), so every
/// fair continuation still ends terminal or escalated, and every other property holds.
#[test]
fn a_persistently_faulty_endpoint_leaves_no_operation_unescalated() {
    for endpoints in [
        vec![
            Endpoint::Honest,
            Endpoint::Lagging { blocks: 2 },
            Endpoint::Liar,
        ],
        vec![Endpoint::Honest, Endpoint::Lagging { blocks: 2 }],
    ] {
        let config = Config {
            endpoints: endpoints.clone(),
            persistent_fault: true,
            reorgs: 0,
            rotation: Rotation::Never,
            operator: false,
            webhooks: Webhooks::Off,
            threads: 1,
            ..Config::default()
        };
        let report = check(
            &format!("faulty endpoint stays faulty: {endpoints:?}"),
            config,
            Until::Exhausted,
        );
        assert_holds(&report);
    }
}

/// A witness whose only agreement may be a lying endpoint's (a witness quorum of one) can be made
/// to refuse an honest proposal for good (the liar reads a nonce moved without us, or a settled
/// transfer): nothing is released and nothing else goes wrong, but the operation waits in UNKNOWN
/// with its hold, unescalated, until an owner examines the refusal. With a witness quorum of two
/// and one liar every agreed reading is the truth at its block, and the default check shows the
/// cancel's hold is always released.
#[test]
fn a_lying_witness_endpoint_alone_can_keep_a_cancelled_withdrawal_waiting_but_never_pays() {
    let config = Config {
        confirmations: 2,
        reorg_depth: 1,
        max_height: 4,
        endpoints: vec![Endpoint::Honest, Endpoint::Lagging { blocks: 1 }],
        pin_back: 1,
        witness_endpoints: vec![Endpoint::Honest, Endpoint::Liar],
        witness_quorum: 1,
        witness_pin_back: 1,
        rotation: Rotation::Never,
        operator: false,
        webhooks: Webhooks::Off,
        threads: 1,
        ..Config::default()
    };
    let report = check(
        "witness quorum of one with a liar",
        config,
        Until::Exhausted,
    );
    assert_eq!(
        report.violated(),
        [ENDS_TERMINAL_OR_ESCALATED, RELEASED_AFTER_FINAL_CANCEL]
            .into_iter()
            .collect::<BTreeSet<_>>()
    );
    let stuck = counterexample(&report, RELEASED_AFTER_FINAL_CANCEL);
    let found = &report.discoveries[RELEASED_AFTER_FINAL_CANCEL];
    let last = found.continuation.last().map_or(&stuck, |(_, s)| s);
    assert_eq!(last.store.state, OperationState::Unknown);
    assert_eq!(last.store.hold, Hold::Held);
    assert!(
        !last.store.refusals.is_empty(),
        "the witness refused the honest proposal for good: {last:?}"
    );
}
