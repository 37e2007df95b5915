//! Liveness: "every approved operation ends terminal or escalated", checked from every reachable
//! state as "every fair continuation ends", where a fair continuation is one in which the faults
//! stop:
//!
//! - no more crashes, lost answers, lies, lagging answers, reorganizations, rotations, fee bumps
//!   or operator actions;
//! - every endpoint answers honestly at the head, so every evaluation reads the canonical chain
//!   (or, with [`crate::Config::persistent_fault`], the faulty endpoints stay faulty);
//! - each worker keeps evaluating and commits what it decided; submitted bytes reach the network;
//! - time passes: each evaluation of the reconciler may see either window elapsed or not, but a
//!   loop of steps that keeps the operation UNKNOWN all the way round is not fair when, somewhere
//!   on it, the reconciler escalates once the escalation window has elapsed (time diverges along
//!   the loop, so the window elapses; that escalation is a step the check explores beside it);
//!   any other loop is a counterexample;
//! - blocks keep coming, each including any transaction a miner may include, or nothing, for
//!   `confirmations` blocks past the explored height (a transaction may still be mined at one
//!   block past it, so everything mined can reach final depth).
//!
//! A state ends well when the operation has ended (CONFIRMED, VERIFIED_NOT_SENT, or
//! FAILED_TERMINAL with an escalation), or when it has a fair step and every fair step leads to a
//! state that ends well. A fair continuation that loops, or stops with the operation not ended,
//! is a counterexample. Stateright's own `eventually` is not used: it can miss counterexamples on
//! paths that join or loop, which this model has.
//!
//! The same search checks a narrower promise of the two-witness rule with honest principals: from
//! every reachable state where our cancel is at final depth, the hold still held, the operation
//! not escalated and no escalation decided, every fair continuation releases the hold
//! ([`released_after_final_cancel`]): the proposal, the witness's attestation and the release
//! all happen. Here every loop is a counterexample, and so is an end without the release.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use opledger_domain::state::OperationState;

use crate::PayoutModel;
use crate::config::Side;
use crate::endpoints;
use crate::model::{Action, Clock, Plan, Planned, State, Submission, Task, Worker};
use crate::store::Hold;
use crate::truth;
use crate::workers::Decision;

mod goal;

pub use goal::Goal;

fn fingerprint(state: &State) -> u64 {
    let mut hasher = DefaultHasher::new();
    state.hash(&mut hasher);
    hasher.finish()
}

/// The states of the fair continuation being explored, root first: for each, whether the
/// operation is UNKNOWN, and whether the reconciler escalates it once the escalation window has
/// elapsed.
#[derive(Default)]
struct OnPath {
    index: HashMap<u64, usize>,
    states: Vec<(bool, bool)>,
}

/// True when the reconciler, evaluating `state` with the escalation window elapsed, escalates.
fn escalates_in_time(model: &PayoutModel, state: &State) -> bool {
    let Some(view) = model.view(state, Worker::Reconciler) else {
        return false;
    };
    let evidence = endpoints::honest(
        &model.config,
        Side::Workers,
        &view.chain,
        view.store.attempts.len(),
    );
    [Clock::ALL[2], Clock::ALL[3]].into_iter().any(|clock| {
        matches!(
            model.reconciler_decision(&view, &evidence, clock),
            Decision::Plan(Plan {
                step: Planned::Escalate(_),
                ..
            })
        )
    })
}

/// True when every fair continuation of `state` ends terminal or escalated.
pub fn ends_well(model: &PayoutModel, state: &State) -> bool {
    explore(model, Goal::Ends, state, &mut OnPath::default()).0
}

/// True unless `state` has our cancel at final depth, the hold held, the operation neither
/// escalated nor with an escalation decided by a worker, and some fair continuation never
/// releases the hold.
pub fn released_after_final_cancel(model: &PayoutModel, state: &State) -> bool {
    let escalation_decided = Worker::ALL.iter().any(|w| {
        matches!(
            state.task(*w),
            Task::Planned(Plan {
                step: Planned::Escalate(_),
                ..
            })
        )
    });
    let applies = state.store.hold == Hold::Held
        && state.store.state != OperationState::FailedTerminal
        && !escalation_decided
        && truth::cancelled(
            &state.chain,
            &state.store.attempts,
            model.config.confirmations,
        );
    !applies || explore(model, Goal::Released, state, &mut OnPath::default()).0
}

/// True unless a release of `state`'s operation was reopened, the operation has not ended
/// since, and some fair continuation never decides it again ([`Goal::Redecided`]).
pub fn reopened_release_decided(model: &PayoutModel, state: &State) -> bool {
    let applies = state.ghost.release_reopened && !state.store.has_ended();
    !applies || explore(model, Goal::Redecided, state, &mut OnPath::default()).0
}

/// Whether every fair continuation of `state` reaches `goal` and, when that answer assumed a
/// loop back to a state still being explored does too, the lowest such state's place on the path
/// (such an answer is not remembered: it holds only if that state's does).
fn explore(
    model: &PayoutModel,
    goal: Goal,
    state: &State,
    path: &mut OnPath,
) -> (bool, Option<usize>) {
    if let Some(reached) = goal.reached(state) {
        return (reached, None);
    }
    let key = fingerprint(state);
    if let Ok(memo) = model.liveness.lock()
        && let Some(known) = memo.get(&(key, goal))
    {
        return (*known, None);
    }
    if let Some(&at) = path.index.get(&key) {
        // A loop. Time passes along it; if the operation stays UNKNOWN all the way round, and
        // somewhere on it the reconciler escalates once the window has elapsed (a step explored
        // beside this one), the loop is not a fair run, and it ends escalated (which decides a
        // reopened release too). Any other loop never ends; no loop releases.
        let on_loop = &path.states[at..];
        let excused = matches!(goal, Goal::Ends | Goal::Redecided)
            && on_loop.iter().all(|(unknown, _)| *unknown)
            && on_loop.iter().any(|(_, escalates)| *escalates);
        return if excused {
            (true, Some(at))
        } else {
            (false, None)
        };
    }
    let depth = path.states.len();
    path.index.insert(key, depth);
    let unknown = state.store.state == OperationState::Unknown;
    path.states
        .push((unknown, unknown && escalates_in_time(model, state)));
    let successors = fair_successors(model, state);
    let mut ends = !successors.is_empty();
    let mut assumed: Option<usize> = None;
    for next in &successors {
        let (next_ends, next_assumed) = explore(model, goal, next, path);
        if !next_ends {
            ends = false;
            break;
        }
        assumed = match (assumed, next_assumed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    path.states.pop();
    path.index.remove(&key);
    let assumed = assumed.filter(|at| *at < depth);
    if !ends || assumed.is_none() {
        if let Ok(mut memo) = model.liveness.lock() {
            memo.insert((key, goal), ends);
        }
        return (ends, None);
    }
    (ends, assumed)
}

/// A fair continuation of `state` that never reaches `goal`: each step to a state from which
/// some fair continuation does not, until one with no fair step that changes anything, one
/// already on the continuation (a loop), or one that can no longer reach it. Empty when every
/// fair continuation of `state` reaches it.
pub fn witness(model: &PayoutModel, goal: Goal, state: &State) -> Vec<(Action, State)> {
    const LONGEST: usize = 200;
    let fails = |s: &State| !explore(model, goal, s, &mut OnPath::default()).0;
    let mut steps: Vec<(Action, State)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut current = state.clone();
    while fails(&current)
        && goal.reached(&current).is_none()
        && seen.insert(fingerprint(&current))
        && steps.len() < LONGEST
    {
        let Some((action, next)) = fair_steps(model, &current)
            .into_iter()
            .find(|(_, next)| fails(next))
        else {
            break;
        };
        steps.push((action, next.clone()));
        current = next;
    }
    steps
}

/// What an evaluation through `side`'s endpoints reads on a fair continuation: the honest
/// reading at the head, or with [`crate::Config::persistent_fault`] whatever the faulty
/// endpoints make of it.
fn fair_evidence(model: &PayoutModel, view: &State, side: Side) -> Vec<endpoints::Evidence> {
    let attempts = view.store.attempts.len();
    if model.config.persistent_fault {
        endpoints::persistent_fault(&model.config, side, &view.chain, attempts)
    } else {
        vec![endpoints::honest(
            &model.config,
            side,
            &view.chain,
            attempts,
        )]
    }
}

/// The witness's evaluations of each proposal in its queue.
fn push_witness_steps(model: &PayoutModel, state: &State, actions: &mut Vec<Action>) {
    let queue: Vec<usize> = state.store.unwitnessed().map(|(i, _)| i).collect();
    if queue.is_empty() {
        return;
    }
    let evidence = fair_evidence(model, state, Side::Witness);
    for i in queue {
        let Ok(proposal) = u8::try_from(i) else {
            continue;
        };
        for e in &evidence {
            actions.push(Action::Attest {
                proposal,
                evidence: e.clone(),
            });
        }
    }
}

fn fair_successors(model: &PayoutModel, state: &State) -> Vec<State> {
    fair_steps(model, state)
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

/// The fair steps from `state`: each action with the (distinct, changed) state it leads to.
pub fn fair_steps(model: &PayoutModel, state: &State) -> Vec<(Action, State)> {
    let config = &model.config;
    let mut actions = Vec::new();
    if state.store.state == OperationState::Signed {
        actions.push(Action::Broadcast(Submission::Accepted));
    }
    for i in 0..state.store.attempts.len() {
        if let Ok(i) = u8::try_from(i)
            && state.chain.public & (1 << i) == 0
        {
            actions.push(Action::Publish(i));
        }
    }
    for worker in Worker::ALL {
        match state.task(worker) {
            Task::Planned(_) => {
                actions.push(Action::Commit(worker));
                continue;
            }
            Task::Idle if config.split_read => {
                actions.push(Action::ReadStore(worker));
                continue;
            }
            Task::Idle | Task::StoreRead { .. } => {}
        }
        let Some(view) = model.view(state, worker) else {
            continue;
        };
        let evidence = fair_evidence(model, &view, Side::Workers);
        let clocks: &[Clock] = match worker {
            Worker::Watcher => &Clock::ALL[..1],
            Worker::Reconciler => &Clock::ALL,
        };
        for e in &evidence {
            for clock in clocks {
                actions.push(Action::Evaluate {
                    worker,
                    evidence: e.clone(),
                    clock: *clock,
                });
            }
        }
    }
    push_witness_steps(model, state, &mut actions);
    let last_block = config.max_height.saturating_add(config.confirmations);
    if state.chain.height < last_block {
        actions.push(Action::MineEmpty);
        if state.chain.height < config.max_height.saturating_add(1) {
            let statuses: &[bool] = if config.reverts {
                &[true, false]
            } else {
                &[true]
            };
            for tx in state
                .chain
                .mineable(&state.store.attempts, config.compromised_key)
            {
                for succeeded in statuses {
                    actions.push(Action::Mine {
                        tx,
                        succeeded: *succeeded,
                    });
                }
            }
        }
    }
    let mut steps: Vec<(Action, State)> = Vec::new();
    for action in actions {
        if let Some(next) = model.successor(state, action.clone())
            && next != *state
            && !steps.iter().any(|(_, s)| *s == next)
        {
            steps.push((action, next));
        }
    }
    steps
}
