//! The old decisions, which the model must catch; and the domain's, which it must not fault, in
//! the same world.

use opledger_domain::evidence::Role;
use opledger_domain::state::OperationState;
use opledger_model::chain::{Mined, Tx, Wallet};
use opledger_model::properties::{
    ENDS_TERMINAL_OR_ESCALATED, ONE_VALUE_MOVE_IN_CHAIN, SETTLED_ON_FINAL_TRANSFER,
};
use opledger_model::store::Hold;
use opledger_model::{
    Action, Config, Decisions, ReplacementRule, Rotation, State, Until, Webhooks, Worker, check,
};

use crate::{assert_holds, counterexample, first_step_where};

/// A smaller world, so each pair of checks (old and new decisions) stays quick; one checker
/// thread, so the breadth-first search reports a shortest counterexample.
fn small() -> Config {
    Config {
        reorgs: 0,
        rotation: Rotation::Never,
        operator: false,
        webhooks: Webhooks::Off,
        threads: 1,
        ..Config::default()
    }
}

fn settled(state: &State) -> bool {
    state.store.hold == Hold::Settled
}

#[test]
fn the_old_watcher_settles_on_an_included_cancel_and_the_model_finds_it() {
    let old = Config {
        decisions: Decisions::CancelCountsAsPayout,
        ..small()
    };
    let report = check(
        "old decisions: a cancel counts as the payout",
        old,
        Until::Found(&[SETTLED_ON_FINAL_TRANSFER]),
    );
    counterexample(&report, SETTLED_ON_FINAL_TRANSFER);
    let (action, state) = first_step_where(&report, SETTLED_ON_FINAL_TRANSFER, settled);
    assert_eq!(
        action,
        Action::Commit(Worker::Watcher),
        "the watcher settles"
    );
    assert_eq!(state.store.state, OperationState::Confirmed);
    let recorded = state.store.confirmed.expect("the confirmation is recorded");
    let attempt = state.store.attempts[usize::from(recorded.attempt)];
    assert_eq!(
        attempt.content,
        Role::Cancel,
        "the settling attempt is our cancel"
    );
    // The old reconciler handed the included cancel back to the watcher on the way.
    let (back, _) = first_step_where(&report, SETTLED_ON_FINAL_TRANSFER, |s| {
        s.store.state == OperationState::Broadcast && s.store.attempts.len() == 2
    });
    assert_eq!(back, Action::Commit(Worker::Reconciler));

    let report = check("domain decisions, same world", small(), Until::Exhausted);
    assert_holds(&report);
}

#[test]
fn replacements_signed_by_the_current_wallet_pay_twice_and_the_model_finds_it() {
    let world = Config {
        rotation: Rotation::KeepRetiredKey,
        ..small()
    };
    let old = Config {
        replacement: ReplacementRule::CurrentWallet,
        ..world.clone()
    };
    let report = check(
        "old rule: replacements signed by the current wallet",
        old,
        Until::Found(&[ONE_VALUE_MOVE_IN_CHAIN]),
    );
    let last = counterexample(&report, ONE_VALUE_MOVE_IN_CHAIN);
    let sender = |m: Mined| match m.tx {
        Tx::Attempt(i) => last.store.attempts[usize::from(i)].sender,
        Tx::Foreign => panic!("no foreign transaction without a compromised key"),
    };
    let a = last.chain.a.expect("wallet A's nonce is consumed");
    let b = last.chain.b.expect("wallet B's nonce is consumed");
    assert!(a.succeeded && b.succeeded, "both transfers succeeded");
    assert_eq!((sender(a), sender(b)), (Wallet::A, Wallet::B));
    assert_eq!(
        (
            last.store.attempts[1].content,
            last.store.attempts[1].sender
        ),
        (Role::Transfer, Wallet::B),
        "the fee bump after the rotation is a transfer from wallet B"
    );

    let report = check("domain rule, same world", world, Until::Exhausted);
    assert_holds(&report);
}

/// The old webhook processor settled a BROADCAST withdrawal on a claimed confirmation. The
/// transition table no longer lets the webhook processor settle (nor move to BROADCAST): the same
/// trusting processor, driven through every interleaving, now changes nothing, and webhooks as
/// hints hold every property.
#[test]
fn a_trusted_webhook_claim_can_no_longer_settle_by_the_transition_table() {
    for (label, webhooks) in [
        (
            "old webhook processor, current transition table",
            Webhooks::TrustClaims,
        ),
        ("webhooks as hints, same world", Webhooks::Hints),
    ] {
        let world = Config {
            webhooks,
            ..small()
        };
        let report = check(label, world, Until::Exhausted);
        assert_holds(&report);
    }
}

#[test]
fn a_reconciler_that_never_escalates_without_a_verdict_is_caught_by_the_liveness_check() {
    // The signer may lose wallet A's key: a cancel is then refused, and only the escalation
    // window ends the operation.
    let world = Config {
        rotation: Rotation::MayDropRetiredKey,
        ..small()
    };
    let mutant = Config {
        decisions: Decisions::NeverEscalateWithoutVerdict,
        ..world.clone()
    };
    let report = check(
        "mutant: no escalation without a verdict",
        mutant,
        Until::Found(&[ENDS_TERMINAL_OR_ESCALATED]),
    );
    counterexample(&report, ENDS_TERMINAL_OR_ESCALATED);
    let found = &report.discoveries[ENDS_TERMINAL_OR_ESCALATED];
    let last = found
        .continuation
        .last()
        .map_or(found.last_state(), |(_, s)| s);
    assert!(
        !last.store.has_ended(),
        "the operation never ends: {last:?}"
    );

    let report = check("domain decisions, same world", world, Until::Exhausted);
    assert_holds(&report);
}
