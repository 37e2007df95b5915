//! The executor (`services/custodian/src/executor.rs`), one step per store write or provider
//! call, deciding only with the run's [`Decisions`] (the domain's `after_submit` and
//! `after_lookup`, or a mutant) and moving only through the ledger's checked transitions. Its
//! glue, which state a decision moves to, is the executor's `apply`, written here as it is there:
//! - a follow reads the operation as due (no live lease on it), then takes the follow lease
//!   (ending the pass when another instance holds it) and goes on with what it read; it gives the
//!   lease back when the pass ends (a crash leaves it to lapse);
//! - a send is asked of the store first (`begin_custodian_send`): it numbers the send only while
//!   the operation is SIGNED, BROADCAST or UNKNOWN and the instance holds a live lease on it (the
//!   claim's, held from the claim through the first send, or the follow's), and otherwise nothing
//!   is sent; the round is the store's number (the first is 1), whatever the pass read;
//! - a follow of SIGNED sends the first request when it read no send, and otherwise moves to
//!   UNKNOWN (a send without an answer may have arrived);
//! - a follow of BROADCAST or UNKNOWN escalates to an operator without lookup until the operation
//!   is bound to a listed transaction (ours or, an operator's mistake, another withdrawal's),
//!   which it then reads from the list and decides on as any record (`after_record`; not
//!   listed, nothing), except that a release is proposed only when the run's bound-release rule
//!   ([`super::bound`]) allows it over the other listed candidates and the listing window, and
//!   the pass otherwise ends with nothing concluded; with lookup it looks the request's reference
//!   up, stores the record and decides; a resend is sent from there;
//! - `Follow` or `Chain` moves SIGNED or UNKNOWN to BROADCAST; `LookUp` moves SIGNED to UNKNOWN;
//!   `Operator` escalates (and moves SIGNED to UNKNOWN); `Refused` moves SIGNED to FAILED_TERMINAL
//!   with an escalation; `NotSent` proposes the record, moves BROADCAST to UNKNOWN, then asks for
//!   the release; anything else changes nothing;
//! - after a record with a hash (`Chain`) is applied, the chain is asked about its transaction
//!   (`settle`): paid at final depth settles BROADCAST -> CONFIRMED; on a network the executor
//!   does not watch, a COMPLETED record settles alone;
//! - without lookup, a send restarts the provider's consistency window (the listing's).

use opledger_domain::custodian::{Lookup, Next, ProviderStatus, Round, SubmitAnswer, after_record};
use opledger_domain::evidence::Hash32;
use opledger_domain::state::{Actor, OperationState as S};

use super::bound;
use super::chain::{self, ChainSays};
use super::config::CustodianConfig;
use super::decisions::Decisions;
use super::ghost::violation;
use super::ledger::{Escalation, Moved, Rec};
use super::provider::{Candidate, Outcome, Reference, outcomes};
use super::state::{Pc, State, Step};

/// One run's executor: its configuration and decisions.
#[derive(Debug, Clone, Copy)]
pub struct Executor<'a> {
    /// The run.
    pub config: &'a CustodianConfig,
    /// The decisions it takes.
    pub decisions: &'a Decisions,
}

impl Executor<'_> {
    /// The steps instance `i` may take in `state`.
    pub fn steps(&self, state: &State, i: u8, steps: &mut Vec<Step>) {
        let ledger = &state.ledger;
        let unleased = ledger.owner.is_none() && ledger.follower.is_none();
        match state.pc(i) {
            Pc::Idle => match ledger.state {
                S::Approved => steps.push(Step::Claim),
                S::Signing if ledger.owner.is_none() => steps.push(Step::Reclaim),
                S::Signed | S::Broadcast | S::Unknown if unleased => steps.push(Step::Read),
                _ => {}
            },
            pc => {
                match pc {
                    Pc::Idle => {}
                    Pc::Claimed => steps.push(Step::Persist),
                    Pc::Due { from, .. } => {
                        steps.push(Step::Follow { failed: false });
                        if matches!(from, S::Broadcast | S::Unknown)
                            && self.config.profile.has_lookup()
                        {
                            steps.push(Step::Follow { failed: true });
                        }
                    }
                    Pc::Send { round, .. } => match self.send_round(state, i, round) {
                        None => steps.push(Step::NoSend),
                        Some(_) if ledger.sends >= self.config.max_sends => {}
                        Some(sent) => {
                            let taken = state.provider.txn(self.reference(state, round)).is_some();
                            for outcome in outcomes(self.config.profile, sent, taken) {
                                steps.push(Step::Send(outcome));
                            }
                        }
                    },
                    Pc::Sent { .. } => steps.push(Step::Answer),
                    Pc::Decided { .. } => steps.push(Step::Apply),
                    Pc::Release => steps.push(Step::Release),
                    Pc::Settle { .. } => steps.push(Step::Settle),
                }
                steps.push(Step::Crash);
            }
        }
    }

    /// Instance `i` takes `step`; false when it is not enabled (nothing changes). A pass that
    /// ends (not by a crash) gives its follow lease back.
    pub fn take(&self, state: &mut State, i: u8, step: Step) -> bool {
        let Some(next_pc) = self.next_pc(state, i, step) else {
            return false;
        };
        if next_pc == Pc::Idle && step != Step::Crash && state.ledger.follower == Some(i) {
            state.ledger.follower = None;
        }
        state.set_pc(i, next_pc);
        true
    }

    /// Where instance `i` goes on after `step`; `None` when it is not enabled.
    fn next_pc(&self, state: &mut State, i: u8, step: Step) -> Option<Pc> {
        match (step, state.pc(i)) {
            (Step::Crash, _) => Some(Pc::Idle),
            (Step::Claim | Step::Reclaim | Step::Persist, pc) => self.claim(state, i, step, pc),
            (Step::Read, Pc::Idle) => Some(Pc::Due {
                from: state.ledger.state,
                sent: state.ledger.sends > 0,
            }),
            (Step::Follow { failed }, Pc::Due { from, sent }) => {
                if state.ledger.follower.is_some_and(|holder| holder != i) {
                    return Some(Pc::Idle);
                }
                state.ledger.follower = Some(i);
                Some(self.follow(state, from, sent, failed))
            }
            (Step::NoSend, Pc::Send { round, .. }) => self
                .send_round(state, i, round)
                .is_none()
                .then_some(Pc::Idle),
            (Step::Send(outcome), Pc::Send { from, round }) => {
                let sent = self.send_round(state, i, round)?;
                self.send(state, round, sent, outcome).then_some(Pc::Sent {
                    from,
                    round: sent,
                    answer: outcome.answer,
                })
            }
            (
                Step::Answer,
                Pc::Sent {
                    from,
                    round,
                    answer,
                },
            ) => {
                let next = (self.decisions.after_submit)(self.config.profile, round, answer);
                if !self.config.profile.has_lookup() && answer == SubmitAnswer::Accepted {
                    // The answer names the transaction our request created (Prime's
                    // `transaction_id`), recorded with it: followed from now on.
                    state.ledger.answered = Some(Candidate::Own);
                }
                // Concluded on a read still current (the store would take its move) while the
                // provider holds something of the operation.
                if next == Next::Refused
                    && state.ledger.state == from
                    && state.provider.stored().next().is_some()
                {
                    state.ghost.violations |= violation::REFUSAL_WHILE_STORED;
                }
                Some(self.apply(state, from, next, None))
            }
            (Step::Apply, Pc::Decided { from, next, record }) => {
                Some(self.apply_looked_up(state, from, next, record))
            }
            (Step::Settle, Pc::Settle { hash, completed }) => {
                self.settle(state, hash, completed);
                Some(Pc::Idle)
            }
            (Step::Release, Pc::Release) => {
                let _ = self.transition(state, S::Unknown, S::VerifiedNotSent);
                Some(Pc::Idle)
            }
            _ => None,
        }
    }

    /// Whether a send by instance `i` of a pass that meant `meant` happens, and as which round:
    /// the store's number (`begin_custodian_send`) through the run's send rule.
    fn send_round(&self, state: &State, i: u8, meant: Round) -> Option<Round> {
        (self.decisions.send_rule)(state.ledger.send_number(i), meant)
    }

    /// The claim's steps: claim, take back an abandoned claim, persist the request (only while
    /// the claim is still this instance's, the lease guard). `None` when not enabled.
    fn claim(&self, state: &mut State, i: u8, step: Step, pc: Pc) -> Option<Pc> {
        match (step, pc) {
            (Step::Claim, Pc::Idle) => {
                (self.transition(state, S::Approved, S::Signing) == Moved::Done).then_some(())?;
                state.ledger.owner = Some(i);
                Some(Pc::Claimed)
            }
            (Step::Reclaim, Pc::Idle) => {
                (self.transition(state, S::Signing, S::Approved) == Moved::Done).then_some(())?;
                state.ledger.owner = None;
                Some(Pc::Idle)
            }
            (Step::Persist, Pc::Claimed) => {
                if state.ledger.owner != Some(i)
                    || self.transition(state, S::Signing, S::Signed) != Moved::Done
                {
                    Some(Pc::Idle)
                } else {
                    // The persist renews the claim lease; it holds through the first send.
                    state.ledger.owner = Some(i);
                    Some(Pc::Send {
                        from: S::Signed,
                        round: Round::First,
                    })
                }
            }
            _ => None,
        }
    }

    /// Applies a lookup's decision; after a record with a hash, the chain is asked next.
    fn apply_looked_up(&self, state: &mut State, from: S, next: Next, record: Option<u8>) -> Pc {
        let after = self.apply(state, from, next, record);
        match next {
            Next::Chain(hash) => Pc::Settle {
                hash,
                completed: record
                    .and_then(|id| state.ledger.rec(id))
                    .is_some_and(|r| r.status == ProviderStatus::Completed),
            },
            _ => after,
        }
    }

    /// The reference a send of `round` carries.
    fn reference(&self, state: &State, round: Round) -> Reference {
        match round {
            Round::First => state.ledger.reference,
            Round::Resend => (self.decisions.resend_reference)(state.ledger.reference),
        }
    }

    fn transition(&self, state: &mut State, from: S, to: S) -> Moved {
        state.ledger.transition(
            from,
            to,
            Actor::Custodian,
            self.decisions.release_rule,
            &mut state.ghost,
        )
    }

    /// A pass over the operation as read (`from`, with a send recorded or not); the lookup is
    /// the provider's now.
    fn follow(&self, state: &mut State, from: S, sent: bool, failed: bool) -> Pc {
        match from {
            S::Signed if !sent => {
                return Pc::Send {
                    from,
                    round: Round::First,
                };
            }
            S::Signed => return self.apply(state, from, Next::LookUp, None),
            S::Broadcast | S::Unknown => {}
            _ => return Pc::Idle,
        }
        let profile = self.config.profile;
        if !profile.has_lookup() {
            return self.follow_bound(state, from);
        }
        let lookup = if failed {
            Lookup::Failed
        } else {
            state.provider.lookup(state.ledger.reference)
        };
        let record = match (lookup, state.provider.txn(state.ledger.reference)) {
            (Lookup::Found(_), Some(txn)) => Some(state.ledger.record(Rec::of(&txn))),
            _ => None,
        };
        let next = (self.decisions.after_lookup)(profile, lookup, state.window());
        if next == Next::ResendSameReference {
            return Pc::Send {
                from,
                round: Round::Resend,
            };
        }
        Pc::Decided { from, next, record }
    }

    /// A pass over a `no_lookup` operation as read (`from`): left to an operator until it is
    /// bound; then the bound transaction, read from the provider's list, decided as any record
    /// (not listed, nothing is concluded), a release only when the run's bound-release rule
    /// allows it over the listing window and the other listed candidates (otherwise the pass
    /// ends with nothing concluded).
    fn follow_bound(&self, state: &mut State, from: S) -> Pc {
        let Some(bound) = state.ledger.followed() else {
            return self.apply(state, from, Next::Operator, None);
        };
        let Some(listed) = bound::listed(&state.provider, state.ledger.reference, bound) else {
            return Pc::Idle;
        };
        let record = state
            .provider
            .candidate(state.ledger.reference, bound)
            .map(|txn| state.ledger.record(Rec::of(&txn)));
        let next = after_record(listed.record);
        if next == Next::NotSent {
            let others = bound::others(&state.provider, state.ledger.reference, bound, |c| {
                state.ledger.bound_elsewhere(c)
            });
            if !(self.decisions.bound_release)(state.window(), listed, &others) {
                if others.iter().any(|c| !c.ended_without_hash()) {
                    state.ghost.bound_release_waited = true;
                }
                return Pc::Idle;
            }
        }
        Pc::Decided { from, next, record }
    }

    /// Records a send (the store's round `sent`) of the request the pass meant as `round` and
    /// calls the provider, which does `outcome`; false when the provider cannot do it now.
    fn send(&self, state: &mut State, round: Round, sent: Round, outcome: Outcome) -> bool {
        let reference = self.reference(state, round);
        let held = state.provider.txn(reference).is_some();
        if !state.provider.submit(reference, outcome) {
            return false;
        }
        state.ledger.reference = reference;
        state.ledger.sends += 1;
        if !self.config.profile.has_lookup() {
            // Without lookup the window is the listing's since the last send.
            state.window_passed = false;
        }
        state.ghost.references |= reference.bit();
        if sent == Round::Resend && reference == Reference::Ours && held {
            state.ghost.resend_deduplicated = true;
        }
        true
    }

    /// The executor's `settle`: BROADCAST -> CONFIRMED when the chain shows the transaction paid
    /// (or, on a network it does not watch, when the record said COMPLETED); a contradiction is
    /// a security escalation, never a settlement.
    fn settle(&self, state: &mut State, hash: Hash32, completed: bool) {
        let says = chain::judge(
            &state.provider,
            state.ledger.reference,
            hash,
            self.config.watched_network,
        );
        match says {
            ChainSays::Paid(_) => {
                let _ = self.transition(state, S::Broadcast, S::Confirmed);
            }
            ChainSays::Unwatched if completed => {
                let _ = self.transition(state, S::Broadcast, S::Confirmed);
            }
            ChainSays::Unwatched | ChainSays::NotYet => {}
            ChainSays::Contradicted => state.ledger.escalation = Some(Escalation::Contradicted),
        }
    }

    /// The executor's `apply` of `next` to an operation read in `from`; where the pass goes on.
    fn apply(&self, state: &mut State, from: S, next: Next, record: Option<u8>) -> Pc {
        let target = match (next, from) {
            (Next::Follow | Next::Chain(_), S::Signed | S::Unknown) => S::Broadcast,
            (Next::LookUp, S::Signed) => S::Unknown,
            (Next::Operator, S::Signed) => {
                state.ledger.escalation = Some(Escalation::NoLookup);
                S::Unknown
            }
            (Next::Operator, _) => {
                state.ledger.escalation = Some(Escalation::NoLookup);
                return Pc::Idle;
            }
            (Next::Refused, S::Signed) => {
                // The move and its escalation in one transaction.
                if self.transition(state, S::Signed, S::FailedTerminal) == Moved::Done {
                    state.ledger.escalation = Some(Escalation::Refused);
                }
                return Pc::Idle;
            }
            (Next::NotSent, _) => {
                if let Some(id) = record {
                    state.ledger.propose(id);
                }
                if from == S::Broadcast {
                    let _ = self.transition(state, S::Broadcast, S::Unknown);
                }
                return Pc::Release;
            }
            _ => return Pc::Idle,
        };
        if self.transition(state, from, target) == Moved::Done
            && from == S::Unknown
            && target == S::Broadcast
        {
            state.ghost.unknown_resolved = true;
        }
        Pc::Idle
    }
}
