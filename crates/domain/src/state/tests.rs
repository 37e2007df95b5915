use std::collections::BTreeSet;

use super::*;

/// The table as written in the design, kept as text so that any edit of
/// `TRANSITIONS` has to be made twice.
const EXPECTED: &[&str] = &[
    "REQUESTED->APPROVED [approvals] Keep",
    "REQUESTED->REJECTED [approvals,risk,operator,webhook_processor] Release",
    "APPROVED->SIGNING [signer,custodian] Keep",
    "SIGNING->SIGNED [signer,custodian] Keep",
    "SIGNING->APPROVED [signer,custodian] Keep",
    "APPROVED->FAILED_TERMINAL [signer,custodian] Keep",
    "SIGNED->BROADCAST [broadcaster,custodian] Keep",
    "SIGNED->UNKNOWN [broadcaster,custodian] Keep",
    "SIGNED->FAILED_TERMINAL [custodian] Keep",
    "BROADCAST->CONFIRMED [chain_watcher,reconciler,custodian] Settle",
    "BROADCAST->UNKNOWN [broadcaster,chain_watcher,reconciler,custodian] Keep",
    "BROADCAST->FAILED_TERMINAL [chain_watcher,reconciler] Keep",
    "UNKNOWN->BROADCAST [reconciler,operator,custodian] Keep",
    "UNKNOWN->CONFIRMED [reconciler,operator] Settle",
    "UNKNOWN->VERIFIED_NOT_SENT [reconciler,operator,custodian] Release",
    "UNKNOWN->FAILED_TERMINAL [reconciler,custodian] Keep",
    "CONFIRMED->BROADCAST [chain_watcher] Reopen",
    "VERIFIED_NOT_SENT->UNKNOWN [chain_watcher] Reopen",
    "FAILED_TERMINAL->BROADCAST [operator] Keep",
    "FAILED_TERMINAL->CONFIRMED [operator] Settle",
    "FAILED_TERMINAL->VERIFIED_NOT_SENT [operator] Release",
];

fn render(t: &Transition) -> String {
    let actors: Vec<&str> = t.actors.iter().map(|a| a.as_str()).collect();
    format!("{}->{} [{}] {:?}", t.from, t.to, actors.join(","), t.hold)
}

fn reachable_from(start: OperationState) -> BTreeSet<&'static str> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(s) = stack.pop() {
        for t in TRANSITIONS.iter().filter(|t| t.from == s) {
            if seen.insert(t.to.as_str()) {
                stack.push(t.to);
            }
        }
    }
    seen
}

#[test]
fn table_matches_design_exactly() {
    let rendered: Vec<String> = TRANSITIONS.iter().map(render).collect();
    assert_eq!(rendered, EXPECTED);
}

#[test]
fn no_duplicate_rows_or_actors() {
    let pairs: BTreeSet<_> = TRANSITIONS
        .iter()
        .map(|t| (t.from.as_str(), t.to.as_str()))
        .collect();
    assert_eq!(pairs.len(), TRANSITIONS.len());
    for t in TRANSITIONS {
        let actors: BTreeSet<_> = t.actors.iter().map(|a| a.as_str()).collect();
        assert_eq!(actors.len(), t.actors.len(), "{}", render(t));
        assert!(!t.actors.is_empty());
        assert_ne!(t.from, t.to);
    }
}

#[test]
fn every_row_accepts_listed_actors_and_refuses_others() {
    for t in TRANSITIONS {
        for actor in Actor::ALL {
            let got = check_transition(t.from, t.to, actor);
            if t.actors.contains(&actor) {
                assert_eq!(got, Ok(t.hold), "{} by {actor}", render(t));
            } else {
                let expected = TransitionError::ActorNotAllowed {
                    from: t.from,
                    to: t.to,
                    actor,
                };
                assert_eq!(got, Err(expected), "{} by {actor}", render(t));
            }
        }
    }
}

#[test]
fn every_pair_not_in_table_is_illegal() {
    let mut illegal = 0;
    for from in OperationState::ALL {
        for to in OperationState::ALL {
            if find_transition(from, to).is_some() {
                continue;
            }
            illegal += 1;
            for actor in Actor::ALL {
                assert_eq!(
                    check_transition(from, to, actor),
                    Err(TransitionError::Illegal { from, to })
                );
            }
        }
    }
    assert_eq!(illegal, 100 - TRANSITIONS.len());
}

#[test]
fn final_states_have_no_way_out_but_a_reorganization_and_others_do() {
    for s in OperationState::ALL {
        let outgoing: Vec<_> = TRANSITIONS.iter().filter(|t| t.from == s).collect();
        let only_reorg = outgoing
            .iter()
            .all(|t| t.hold == H::Reopen && t.actors == [A::ChainWatcher]);
        assert_eq!(
            s.is_final(),
            only_reorg && s != S::Confirmed,
            "{s}: {} ways out",
            outgoing.len()
        );
    }
    assert_eq!(
        TRANSITIONS
            .iter()
            .filter(|t| t.from == S::VerifiedNotSent)
            .map(render)
            .collect::<Vec<_>>(),
        ["VERIFIED_NOT_SENT->UNKNOWN [chain_watcher] Reopen"]
    );
    let finals: Vec<_> = OperationState::ALL
        .into_iter()
        .filter(|s| s.is_final())
        .collect();
    assert_eq!(
        finals,
        [OperationState::VerifiedNotSent, OperationState::Rejected]
    );
    assert!(!OperationState::Confirmed.is_final());
    assert!(!OperationState::FailedTerminal.is_final());
    let unresolved: Vec<_> = OperationState::ALL
        .into_iter()
        .filter(|s| s.is_unresolved())
        .collect();
    assert_eq!(
        unresolved,
        [OperationState::Unknown, OperationState::FailedTerminal]
    );
}

#[test]
fn only_rejected_and_verified_not_sent_release() {
    for t in TRANSITIONS {
        let releases_target = matches!(t.to, S::Rejected | S::VerifiedNotSent);
        assert_eq!(t.hold == H::Release, releases_target, "{}", render(t));
    }
}

#[test]
fn only_confirmed_settles_and_only_reorg_reopens() {
    for t in TRANSITIONS {
        assert_eq!(t.hold == H::Settle, t.to == S::Confirmed, "{}", render(t));
        let reorg = (t.from == S::Confirmed && t.to == S::Broadcast)
            || (t.from == S::VerifiedNotSent && t.to == S::Unknown);
        assert_eq!(t.hold == H::Reopen, reorg, "{}", render(t));
    }
}

#[test]
fn nothing_after_signed_becomes_payable_again() {
    let after_signed = reachable_from(S::Signed);
    for forbidden in [S::Requested, S::Approved, S::Signing, S::Rejected] {
        assert!(!after_signed.contains(forbidden.as_str()), "{forbidden}");
    }
    for t in TRANSITIONS {
        if reachable_from(S::Signed).contains(t.from.as_str()) || t.from == S::Signed {
            assert!(!matches!(t.to, S::Approved | S::Requested), "{}", render(t));
        }
    }
}

#[test]
fn every_state_reachable_from_initial() {
    let reachable = reachable_from(INITIAL_STATE);
    for s in OperationState::ALL {
        assert!(s == INITIAL_STATE || reachable.contains(s.as_str()), "{s}");
    }
    assert_eq!(INITIAL_STATE, S::Requested);
    assert_eq!(CREATOR, A::Operations);
    // The creator takes no part in later transitions.
    assert!(TRANSITIONS.iter().all(|t| !t.actors.contains(&CREATOR)));
}

#[test]
fn names_round_trip() {
    for s in OperationState::ALL {
        assert_eq!(s.as_str().parse::<OperationState>(), Ok(s));
        assert_eq!(s.to_string(), s.as_str());
    }
    for a in Actor::ALL {
        assert_eq!(a.as_str().parse::<Actor>(), Ok(a));
    }
    assert_eq!(
        "requested".parse::<OperationState>(),
        Err(StateError::UnknownState)
    );
    assert_eq!("OPERATOR".parse::<Actor>(), Err(StateError::UnknownActor));
    assert_eq!(
        OperationState::ALL
            .map(|s| s.as_str())
            .iter()
            .collect::<BTreeSet<_>>()
            .len(),
        10
    );
    assert_eq!(
        Actor::ALL
            .map(|a| a.as_str())
            .iter()
            .collect::<BTreeSet<_>>()
            .len(),
        10
    );
}

#[test]
fn error_messages() {
    let e = check_transition(S::Rejected, S::Approved, A::Operator).expect_err("illegal");
    assert_eq!(
        e.to_string(),
        "illegal transition from REJECTED to APPROVED"
    );
    let e = check_transition(S::Requested, S::Approved, A::Risk).expect_err("actor");
    assert_eq!(
        e.to_string(),
        "actor risk may not move an operation from REQUESTED to APPROVED"
    );
}
