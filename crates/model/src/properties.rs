//! The properties checked in every state, by name. Safety properties are `always`; liveness is
//! an `always` over [`crate::liveness`]; the `sometimes` properties show the interesting outcomes
//! are reachable, so that a run that checks nothing cannot pass.

use opledger_domain::evidence::{AttemptKind, Escalation, ReplacementRequest};
use opledger_domain::state::OperationState;
use stateright::Property;

use crate::chain::Wallet;
use crate::config::{Compromised, Config, ReplacementRule, Rotation, Side};
use crate::model::{State, Task, Worker, violation};
use crate::store::{Hold, MAX_RECORDS};
use crate::workers::Decision;
use crate::{PayoutModel, endpoints, liveness, truth};

/// (1a) The canonical chain never holds two value-moving transactions of the operation.
pub const ONE_VALUE_MOVE_IN_CHAIN: &str =
    "at most one value-moving transaction of the operation is in the canonical chain";
/// (1b) Over the whole run, counting every history a reorganization replaced, at most one
/// value-moving transaction of the operation ever reaches final depth.
pub const ONE_VALUE_MOVE_EVER_FINAL: &str =
    "at most one value-moving transaction of the operation ever reaches final depth";
/// (2) When a hold is settled, the recorded attempt is our transfer, succeeded, in the canonical
/// chain at the recorded block, at final depth.
pub const SETTLED_ON_FINAL_TRANSFER: &str =
    "a hold is settled only on our transfer in the canonical chain at final depth";
/// (2') While a hold is settled, its transfer stays where it was recorded, at final depth: what
/// reorganizations deeper than the confirmations break.
pub const SETTLED_STAYS_FINAL: &str =
    "a settled hold's transfer stays in the canonical chain at final depth";
/// (3) When a hold is released, our own cancel succeeded, or an attempt of ours reverted, at
/// final depth in the canonical chain.
pub const RELEASED_ON_EVIDENCE: &str =
    "a hold is released only on our cancel or a reverted attempt of ours at final depth";
/// (3') While a hold is released, no transfer of ours is in the canonical chain with a successful
/// receipt, and none can get there any more: every transfer attempt's nonce is consumed at final
/// depth by something that moved no value. Checked in every state, so a transfer mined after the
/// release (paid twice) breaks it too.
pub const NEVER_RELEASED_WHILE_PAYABLE: &str =
    "a hold is never released while a transfer of ours is or can still be included";
/// (3'') While a hold is released, no transfer of ours is in the canonical chain with a
/// successful receipt: the double payment itself.
pub const NEVER_PAID_WHILE_RELEASED: &str =
    "a released hold's transfer is never in the canonical chain";
/// (3''') A proof the chain watcher marked reorganized away never releases the hold again:
/// whenever a hold is released (by any principal, through any move), some evidence that is not
/// marked is named by both a proposal and an attestation. Written over the store's records
/// directly, not through the ledger's rule, so that a rule that counts marked proofs is caught.
pub const MARKED_PROOF_NEVER_RELEASES: &str =
    "a release proof reorganized away never releases the hold again";
/// (3'''') No double payment once the watcher has had its turn: in every reachable state where
/// the hold is RELEASED and a transfer of ours is in the canonical chain with a successful
/// receipt, the chain watcher's reorganization check of the applied release's proofs (its
/// quorum reading the honest chain at the head, each decision committed, repeated until it
/// decides nothing) leaves the hold held again.
///
/// Why not "never paid while released" ([`NEVER_PAID_WHILE_RELEASED`]) in every state: with
/// reorganizations deeper than the confirmations, a release's proof (our cancel at final depth)
/// can be dropped and the original transfer mined before the watcher's next pass; between the
/// two, the hold is released and the transfer paid, by design (the watcher lags, and nothing can
/// stop a miner). What the design promises is that this state is never left standing: the next
/// turn of the watcher reopens the release, so the funds are held again (a debt of the account
/// if they were spent) while the reconciler settles the hold on the transfer. The check is a
/// state predicate over a short continuation (the watcher's turns alone), so it is checked in
/// every reachable state, interleavings with a lagging watcher included.
pub const NEVER_PAID_AND_RELEASED_ONCE_WATCHED: &str =
    "once the watcher has re-checked the release, a paid transfer's hold is never left released";
/// (4) UNKNOWN is left only on a step the honest chain supported when it was decided.
pub const UNKNOWN_LEFT_ON_EVIDENCE: &str =
    "UNKNOWN is left only on a verdict the honest chain supports";
/// (5) From every reachable state, every fair continuation ends terminal or escalated.
pub const ENDS_TERMINAL_OR_ESCALATED: &str = "every approved operation ends terminal or escalated";
/// (5') With honest principals, from every reachable state where our cancel is at final depth
/// (the hold held, nothing escalated or about to be), every fair continuation releases the hold:
/// the reconciler proposes, the witness attests, the ledger releases.
pub const RELEASED_AFTER_FINAL_CANCEL: &str =
    "a cancel at final depth eventually gets the hold released";
/// (5'') From every reachable state after a release was reopened (its proof reorganized away)
/// and before the operation ended again, every fair continuation decides it again: CONFIRMED
/// (the original transfer mined and settled), VERIFIED_NOT_SENT with the release resting on
/// evidence that is not marked (a new proposal and a new attestation), or FAILED_TERMINAL with an
/// escalation.
pub const REOPENED_RELEASE_DECIDED: &str =
    "a reopened release is decided again: settled, released on new evidence, or escalated";
/// The hold is settled exactly when CONFIRMED, released exactly when VERIFIED_NOT_SENT, and no
/// hold effect ever applied to a hold in the wrong state.
pub const HOLD_MATCHES_STATE: &str = "the hold matches the operation's state";
/// Every move a worker asks for is in the transition table for its actor, and each decision
/// function returns only steps its worker takes.
pub const STEPS_ARE_LEGAL: &str =
    "every step a worker takes is its own and in the transition table";
/// FAILED_TERMINAL always records an escalation, whose cause the chain or the store shows.
pub const ESCALATED_WITH_CAUSE: &str = "an escalation is recorded with a cause that holds";

/// A withdrawal is paid and its hold settled.
pub const REACH_SETTLED: &str = "sometimes: settled";
/// A withdrawal is paid by its fee bump.
pub const REACH_SETTLED_BY_BUMP: &str = "sometimes: settled by the fee bump";
/// A cancel at final depth releases the hold.
pub const REACH_RELEASED_BY_CANCEL: &str = "sometimes: cancelled and released";
/// No verdict within the window: escalated.
pub const REACH_ESCALATED_NO_VERDICT: &str = "sometimes: escalated without a verdict";
/// An attempt reverted: escalated.
pub const REACH_ESCALATED_REVERTED: &str = "sometimes: escalated for a revert";
/// An operator releases a reverted withdrawal.
pub const REACH_OPERATOR_RELEASED_REVERT: &str =
    "sometimes: released by an operator after a revert";
/// A fee bump of a cancel is stored as a cancel.
pub const REACH_BUMP_OF_CANCEL: &str = "sometimes: a fee bump of a cancel stored as a cancel";
/// A transfer that succeeded is reorganized out of the canonical chain.
pub const REACH_TRANSFER_REORGED: &str = "sometimes: a transfer reorganized away";
/// After a rotation, a replacement is signed by the original's sender.
pub const REACH_ROTATED_REPLACEMENT: &str =
    "sometimes: a replacement after the rotation signed by the original sender";
/// A proposal waits for the witness, the hold held.
pub const REACH_AWAITING_WITNESS: &str = "sometimes: a release proposal awaits the witness";
/// The witness refused a proposal for good (one its own evidence contradicts).
pub const REACH_WITNESS_REFUSED: &str = "sometimes: the witness refused a proposal for good";
/// A foreign transaction consumed the nonce: escalated to security.
pub const REACH_NONCE_MOVED: &str = "sometimes: escalated for a nonce moved without us";
/// A confirmation reorganized away is reopened.
pub const REACH_REOPENED: &str = "sometimes: a confirmation reopened by the reorganization check";
/// An applied release whose proof was reorganized away is reopened: UNKNOWN, the hold held.
pub const REACH_RELEASE_REOPENED: &str =
    "sometimes: a release reopened by the reorganization check";
/// A reopened release is released again on a new proposal and attestation.
pub const REACH_REOPENED_RELEASED_AGAIN: &str =
    "sometimes: a reopened release released again on new evidence";
/// A reopened release is settled: the original transfer was mined after all.
pub const REACH_REOPENED_SETTLED: &str = "sometimes: a reopened release settled by the transfer";

fn no(state: &State, bits: u16) -> bool {
    state.ghost.violations & bits == 0
}

/// `state` after the chain watcher's reorganization check of an applied release has had its
/// turn: with its quorum reading the honest chain at the head, it evaluates and commits, again
/// until it decides nothing (one proof per evaluation, at most one per attestation).
pub fn after_release_checks(model: &PayoutModel, state: &State) -> State {
    let mut next = state.clone();
    next.watcher = Task::Idle;
    for _ in 0..=MAX_RECORDS {
        if next.store.applied_proofs().next().is_none() {
            break;
        }
        let evidence = endpoints::honest(
            &model.config,
            Side::Workers,
            &next.chain,
            next.store.attempts.len(),
        );
        match model.watcher_decision(&next, &evidence) {
            Decision::Plan(plan) => {
                next.watcher = Task::Planned(plan);
                model.commit(&mut next, Worker::Watcher);
            }
            Decision::Nothing | Decision::Unexpected => break,
        }
    }
    next
}

fn paid_and_released(state: &State) -> bool {
    state.store.hold == Hold::Released
        && truth::value_moves(&state.chain, &state.store.attempts) > 0
}

fn escalated(state: &State, escalation: Escalation) -> bool {
    state.store.state == OperationState::FailedTerminal
        && state.store.escalation == Some(escalation)
}

/// The properties of a run of `config`: every safety property, liveness when enabled, and the
/// `sometimes` properties the configuration makes reachable.
pub fn for_config(config: &Config) -> Vec<Property<PayoutModel>> {
    let mut properties = safety();
    if config.liveness {
        push_liveness(config, &mut properties);
    }
    push_outcome_examples(config, &mut properties);
    push_replacement_examples(config, &mut properties);
    push_fault_examples(config, &mut properties);
    properties
}

/// The safety properties, checked in every run.
fn safety() -> Vec<Property<PayoutModel>> {
    vec![
        Property::always(ONE_VALUE_MOVE_IN_CHAIN, |_, s: &State| {
            truth::value_moves(&s.chain, &s.store.attempts) <= 1
        }),
        Property::always(ONE_VALUE_MOVE_EVER_FINAL, |_, s: &State| {
            s.ghost.final_moves.count_ones() <= 1
        }),
        Property::always(SETTLED_ON_FINAL_TRANSFER, |_, s: &State| {
            no(s, violation::SETTLED_WITHOUT_FINAL_TRANSFER)
        }),
        Property::always(SETTLED_STAYS_FINAL, |m: &PayoutModel, s: &State| {
            s.store.hold != Hold::Settled
                || s.store.confirmed.is_some_and(|c| {
                    truth::settlement_backed(
                        &s.chain,
                        &s.store.attempts,
                        &c,
                        m.config.confirmations,
                    )
                })
        }),
        Property::always(RELEASED_ON_EVIDENCE, |_, s: &State| {
            no(s, violation::RELEASED_WITHOUT_EVIDENCE)
        }),
        Property::always(NEVER_PAID_WHILE_RELEASED, |_, s: &State| {
            s.store.hold != Hold::Released || truth::value_moves(&s.chain, &s.store.attempts) == 0
        }),
        Property::always(
            NEVER_RELEASED_WHILE_PAYABLE,
            |m: &PayoutModel, s: &State| {
                s.store.hold != Hold::Released
                    || !truth::transfer_possible(
                        &s.chain,
                        &s.store.attempts,
                        m.config.confirmations,
                    )
            },
        ),
        Property::always(MARKED_PROOF_NEVER_RELEASES, |_, s: &State| {
            no(s, violation::RELEASED_ON_MARKED_PROOF)
        }),
        Property::always(
            NEVER_PAID_AND_RELEASED_ONCE_WATCHED,
            |m: &PayoutModel, s: &State| {
                !paid_and_released(s) || !paid_and_released(&after_release_checks(m, s))
            },
        ),
        Property::always(UNKNOWN_LEFT_ON_EVIDENCE, |_, s: &State| {
            no(s, violation::LEFT_UNKNOWN_WITHOUT_EVIDENCE)
        }),
        Property::always(HOLD_MATCHES_STATE, |_, s: &State| {
            let state = s.store.state;
            no(s, violation::HOLD_EFFECT_ON_WRONG_HOLD)
                && (s.store.hold == Hold::Settled) == (state == OperationState::Confirmed)
                && (s.store.hold == Hold::Released) == (state == OperationState::VerifiedNotSent)
        }),
        Property::always(STEPS_ARE_LEGAL, |_, s: &State| {
            no(
                s,
                violation::ILLEGAL_TRANSITION | violation::UNEXPECTED_STEP,
            )
        }),
        Property::always(ESCALATED_WITH_CAUSE, |_, s: &State| {
            no(s, violation::ESCALATED_WITHOUT_CAUSE)
                && (s.store.state != OperationState::FailedTerminal || s.store.escalation.is_some())
        }),
    ]
}

/// The liveness properties the configuration supports ([`crate::liveness`]).
fn push_liveness(config: &Config, properties: &mut Vec<Property<PayoutModel>>) {
    properties.push(Property::always(
        ENDS_TERMINAL_OR_ESCALATED,
        liveness::ends_well,
    ));
    if config.reorgs_beyond_finality() {
        properties.push(Property::always(
            REOPENED_RELEASE_DECIDED,
            liveness::reopened_release_decided,
        ));
    }
    if config.compromised == Compromised::Nobody && !config.persistent_fault {
        properties.push(Property::always(
            RELEASED_AFTER_FINAL_CANCEL,
            liveness::released_after_final_cancel,
        ));
    }
}

/// Examples of the outcomes every run can reach: a proposal awaiting the witness (and one it
/// refused, with a compromised proposer), settlement, a release by a cancel, an escalation
/// without a verdict.
fn push_outcome_examples(config: &Config, properties: &mut Vec<Property<PayoutModel>>) {
    properties.push(Property::sometimes(
        REACH_AWAITING_WITNESS,
        |_, s: &State| {
            s.store.hold == Hold::Held
                && s.store.state == OperationState::Unknown
                && s.store.unwitnessed().next().is_some()
        },
    ));
    if matches!(
        config.compromised,
        Compromised::ReconcilerLogin | Compromised::Operator
    ) {
        properties.push(Property::sometimes(
            REACH_WITNESS_REFUSED,
            |_, s: &State| !s.store.refusals.is_empty(),
        ));
    }
    properties.push(Property::sometimes(REACH_SETTLED, |_, s: &State| {
        s.store.state == OperationState::Confirmed && s.store.hold == Hold::Settled
    }));
    properties.push(Property::sometimes(
        REACH_RELEASED_BY_CANCEL,
        |m: &PayoutModel, s: &State| {
            s.store.state == OperationState::VerifiedNotSent
                && truth::cancelled(&s.chain, &s.store.attempts, m.config.confirmations)
        },
    ));
    properties.push(Property::sometimes(
        REACH_ESCALATED_NO_VERDICT,
        |_, s: &State| escalated(s, Escalation::NO_VERDICT),
    ));
}

/// Examples of the replacements: a settlement by the fee bump, a bump of a cancel, and a
/// replacement after a rotation.
fn push_replacement_examples(config: &Config, properties: &mut Vec<Property<PayoutModel>>) {
    if config.replacement == ReplacementRule::OriginalSender {
        properties.push(Property::sometimes(
            REACH_SETTLED_BY_BUMP,
            |_, s: &State| {
                s.store.state == OperationState::Confirmed
                    && s.store.confirmed.is_some_and(|c| {
                        s.store
                            .attempts
                            .get(usize::from(c.attempt))
                            .is_some_and(|a| a.requested == Some(ReplacementRequest::FeeBump))
                    })
            },
        ));
        properties.push(Property::sometimes(REACH_BUMP_OF_CANCEL, |_, s: &State| {
            s.store.attempts.iter().any(|a| {
                a.requested == Some(ReplacementRequest::FeeBump) && a.kind == AttemptKind::Cancel
            })
        }));
        if config.rotation != Rotation::Never {
            properties.push(Property::sometimes(
                REACH_ROTATED_REPLACEMENT,
                |_, s: &State| {
                    s.store
                        .attempts
                        .iter()
                        .any(|a| a.after_rotation && a.sender == Wallet::A)
                },
            ));
        }
    }
}

/// Examples of the faults the configuration allows: reverts, reorganizations (deeper than
/// finality too) and a compromised key.
fn push_fault_examples(config: &Config, properties: &mut Vec<Property<PayoutModel>>) {
    if config.reverts {
        properties.push(Property::sometimes(
            REACH_ESCALATED_REVERTED,
            |_, s: &State| escalated(s, Escalation::REVERTED),
        ));
        if config.operator {
            properties.push(Property::sometimes(
                REACH_OPERATOR_RELEASED_REVERT,
                |m: &PayoutModel, s: &State| {
                    s.store.state == OperationState::VerifiedNotSent
                        && truth::reverted(&s.chain, &s.store.attempts, m.config.confirmations)
                },
            ));
        }
    }
    if config.reorgs > 0 && config.reorg_depth > 0 {
        properties.push(Property::sometimes(
            REACH_TRANSFER_REORGED,
            |_, s: &State| s.chain.transfer_reorged,
        ));
    }
    if config.compromised_key {
        properties.push(Property::sometimes(REACH_NONCE_MOVED, |_, s: &State| {
            escalated(s, Escalation::NONCE_MOVED)
        }));
    }
    if config.reorgs_beyond_finality() {
        properties.push(Property::sometimes(REACH_REOPENED, |_, s: &State| {
            s.ghost.reopened
        }));
        properties.push(Property::sometimes(
            REACH_RELEASE_REOPENED,
            |_, s: &State| {
                s.ghost.release_reopened
                    && s.store.state == OperationState::Unknown
                    && s.store.hold == Hold::Held
            },
        ));
        properties.push(Property::sometimes(
            REACH_REOPENED_RELEASED_AGAIN,
            |_, s: &State| {
                s.ghost.release_reopened
                    && s.store.state == OperationState::VerifiedNotSent
                    && s.store.hold == Hold::Released
            },
        ));
        properties.push(Property::sometimes(
            REACH_REOPENED_SETTLED,
            |_, s: &State| {
                s.ghost.release_reopened
                    && s.store.state == OperationState::Confirmed
                    && s.store.hold == Hold::Settled
            },
        ));
    }
}
