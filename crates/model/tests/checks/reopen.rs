//! Releases re-checked like settlements (migration 31): with reorganizations deeper than the
//! confirmations, the block of a release's proof (our cancel at final depth) can be dropped and
//! the original transfer mined after the funds went back. The chain watcher re-checks the proofs
//! of applied releases; one whose block is gone is marked (it never releases again) and, unless
//! another witnessed proof stands, the operation goes VERIFIED_NOT_SENT -> UNKNOWN with its hold
//! held again, for the reconciler to decide again.

use std::collections::BTreeSet;

use opledger_domain::state::OperationState;
use opledger_model::properties::after_release_checks;
use opledger_model::properties::{
    ENDS_TERMINAL_OR_ESCALATED, MARKED_PROOF_NEVER_RELEASES, NEVER_PAID_AND_RELEASED_ONCE_WATCHED,
    NEVER_PAID_WHILE_RELEASED, NEVER_RELEASED_WHILE_PAYABLE, ONE_VALUE_MOVE_EVER_FINAL,
    REACH_RELEASE_REOPENED, REACH_REOPENED_RELEASED_AGAIN, REACH_REOPENED_SETTLED,
    RELEASED_AFTER_FINAL_CANCEL, RELEASED_ON_EVIDENCE, REOPENED_RELEASE_DECIDED,
    SETTLED_ON_FINAL_TRANSFER, SETTLED_STAYS_FINAL,
};
use opledger_model::store::Hold;
use opledger_model::truth;
use opledger_model::{
    Action, Config, PayoutModel, ReleaseRule, Rotation, Until, Webhooks, Worker, check,
};

use crate::{counterexample, first_step_where};

/// Reorganizations as deep as finality: two confirmations, one reorganization up to two blocks
/// deep, a chain of five blocks; the default endpoints (an honest, a lagging and a lying one,
/// quorum two) and witness; no rotation, operator or webhooks.
fn deep() -> Config {
    Config {
        confirmations: 2,
        reorg_depth: 2,
        max_height: 5,
        rotation: Rotation::Never,
        operator: false,
        webhooks: Webhooks::Off,
        ..Config::default()
    }
}

/// What reorganizations deeper than the confirmations break by design (see
/// `faults::reorganizations_as_deep_as_finality_unsettle_a_settled_transfer_which_is_reopened`):
/// a settled transfer or a release's proof leaves the chain after the fact, and a settlement
/// decided before a reorganization may be committed after the watcher reopened it (the store's
/// compare-and-set is on the state, which the reopening set back), so an operation whose cancel
/// is at final depth may end CONFIRMED on a transfer no longer in the chain instead of released.
const BROKEN_BY_DEEP_REORGS: [&str; 7] = [
    SETTLED_STAYS_FINAL,
    ONE_VALUE_MOVE_EVER_FINAL,
    SETTLED_ON_FINAL_TRANSFER,
    RELEASED_ON_EVIDENCE,
    NEVER_RELEASED_WHILE_PAYABLE,
    NEVER_PAID_WHILE_RELEASED,
    RELEASED_AFTER_FINAL_CANCEL,
];

/// The promises of migration 31, which must hold even with reorganizations deeper than the
/// confirmations.
const REOPENING: [&str; 4] = [
    MARKED_PROOF_NEVER_RELEASES,
    NEVER_PAID_AND_RELEASED_ONCE_WATCHED,
    REOPENED_RELEASE_DECIDED,
    ENDS_TERMINAL_OR_ESCALATED,
];

/// A released hold whose cancel is reorganized away while the original transfer is mined is paid
/// twice until the watcher's next turn (the plain "never paid while released" breaks), but the
/// watcher's turn always reopens it, the marked proof never releases again, and every reopened
/// release is decided again: settled by the transfer, released on a new proposal and attestation,
/// or escalated.
#[test]
fn a_release_whose_proof_is_reorganized_away_is_reopened_and_never_left_paid_twice() {
    let report = check(
        "reorganizations as deep as finality, releases re-checked",
        deep(),
        Until::Exhausted,
    );
    let violated = report.violated();
    for property in REOPENING {
        assert!(
            !violated.contains(property),
            "violated: {property}\n{}",
            report.trace(property).unwrap_or_default()
        );
    }
    assert_eq!(
        violated,
        BROKEN_BY_DEEP_REORGS.into_iter().collect::<BTreeSet<_>>()
    );
    assert!(report.unreached().is_empty(), "{:?}", report.unreached());

    // The watcher reopens: UNKNOWN, the hold held again, the proof marked.
    let (action, state) = first_step_where(&report, REACH_RELEASE_REOPENED, |s| {
        s.ghost.release_reopened
    });
    assert_eq!(action, Action::Commit(Worker::Watcher));
    assert_eq!(
        (state.store.state, state.store.hold),
        (OperationState::Unknown, Hold::Held)
    );
    assert_eq!(
        state.store.reorged.len(),
        1,
        "the proof is marked: {state:?}"
    );

    // Released again only on evidence that is not the marked proof.
    let again = &report.discoveries[REACH_REOPENED_RELEASED_AGAIN];
    let released = again.last_state();
    assert!(released.store.witnessed_unmarked());
    assert!(
        released
            .store
            .attestations
            .iter()
            .any(|a| !released.store.reorged.contains(&a.evidence)),
        "a new attestation: {released:?}"
    );
    assert!(report.discoveries.contains_key(REACH_REOPENED_SETTLED));

    // The double payment "never paid while released" finds is the window before the watcher's
    // turn, which reopens it.
    let paid = counterexample(&report, NEVER_PAID_WHILE_RELEASED);
    assert_eq!(paid.store.state, OperationState::VerifiedNotSent);
    let model = PayoutModel::new(deep());
    let watched = after_release_checks(&model, &paid);
    assert_eq!(
        (watched.store.state, watched.store.hold),
        (OperationState::Unknown, Hold::Held)
    );
}

/// Migration 28's rule, which counts a marked proof like any other, is what migration 31 had to
/// change: the marked proof still witnesses the release, `opledger_reopen_release` answers
/// PROOF_MARKED, and the hold stays released while the original transfer is paid.
#[test]
fn a_ledger_that_counts_marked_proofs_never_reopens_and_the_model_finds_it_paid_twice() {
    let mutant = Config {
        release_rule: ReleaseRule::CountsMarkedProofs,
        liveness: false,
        threads: 1,
        ..deep()
    };
    let report = check(
        "mutant: the release rule counts marked proofs",
        mutant.clone(),
        Until::Found(&[NEVER_PAID_AND_RELEASED_ONCE_WATCHED]),
    );
    let paid = counterexample(&report, NEVER_PAID_AND_RELEASED_ONCE_WATCHED);
    let watched = after_release_checks(&PayoutModel::new(mutant), &paid);
    assert_eq!(
        (watched.store.state, watched.store.hold),
        (OperationState::VerifiedNotSent, Hold::Released)
    );
    assert_eq!(watched.store.reorged.len(), 1, "marked, not reopened");
    assert_eq!(
        truth::value_moves(&watched.chain, &watched.store.attempts),
        1
    );
}

/// A known gap, not a design promise: after a second reorganization brings the marked proof's
/// block back (the fork the cancel was mined on becomes canonical again, the same block by number
/// and hash), the reconciler's verdict names the marked evidence again. Its proposal is the
/// recorded one (the tables' key is the evidence), the ledger leaves the marked proof out, and
/// `next_step` keeps asking for the release without escalating: the operation waits in UNKNOWN
/// with its hold held (safe, and escalated to the operations owner by the reopening), and no
/// automated or operator step decides it.
#[test]
fn a_fork_that_comes_back_leaves_a_reopened_release_undecided() {
    let config = Config {
        reorgs: 2,
        max_height: 3,
        threads: 1,
        ..deep()
    };
    let report = check(
        "two reorganizations as deep as finality, the proof's fork comes back",
        config,
        Until::Found(&[REOPENED_RELEASE_DECIDED]),
    );
    counterexample(&report, REOPENED_RELEASE_DECIDED);
    let found = &report.discoveries[REOPENED_RELEASE_DECIDED];
    let stuck = found
        .continuation
        .last()
        .map_or(found.last_state(), |(_, s)| s);
    assert_eq!(
        (stuck.store.state, stuck.store.hold),
        (OperationState::Unknown, Hold::Held)
    );
    let marked = stuck.store.reorged.first().expect("a marked proof");
    assert!(
        truth::proof_present(&stuck.chain, marked),
        "the marked proof's block is canonical again: {stuck:?}"
    );
}
