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

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use opledger_domain::state::OperationState;
use stateright::Model;

use crate::PayoutModel;
use crate::endpoints;
use crate::model::{Action, Clock, Plan, Planned, State, Submission, Task, Worker};
use crate::workers::Decision;

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
    let evidence = endpoints::honest(&model.config, &view.chain, view.store.attempts.len());
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
    explore(model, state, &mut OnPath::default()).0
}

/// Whether `state` ends well and, when that answer assumed a loop back to a state still being
/// explored ends well too, the lowest such state's place on the path (such an answer is not
/// remembered: it holds only if that state's does).
fn explore(model: &PayoutModel, state: &State, path: &mut OnPath) -> (bool, Option<usize>) {
    if state.store.has_ended() {
        return (true, None);
    }
    let key = fingerprint(state);
    if let Ok(memo) = model.liveness.lock()
        && let Some(known) = memo.get(&key)
    {
        return (*known, None);
    }
    if let Some(&at) = path.index.get(&key) {
        // A loop. Time passes along it; if the operation stays UNKNOWN all the way round, and
        // somewhere on it the reconciler escalates once the window has elapsed (a step explored
        // beside this one), the loop is not a fair run. Any other loop never ends.
        let on_loop = &path.states[at..];
        let excused = on_loop.iter().all(|(unknown, _)| *unknown)
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
        let (next_ends, next_assumed) = explore(model, next, path);
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
            memo.insert(key, ends);
        }
        return (ends, None);
    }
    (ends, assumed)
}

/// A fair continuation of `state` that never ends: each step to a state that does not end well,
/// until one with no fair step that changes anything, or one already on the continuation (a
/// loop). Empty when `state` ends well.
pub fn witness(model: &PayoutModel, state: &State) -> Vec<(Action, State)> {
    const LONGEST: usize = 200;
    let mut steps: Vec<(Action, State)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut current = state.clone();
    while !ends_well(model, &current) && seen.insert(fingerprint(&current)) && steps.len() < LONGEST
    {
        let Some((action, next)) = fair_steps(model, &current)
            .into_iter()
            .find(|(_, next)| !ends_well(model, next))
        else {
            break;
        };
        steps.push((action, next.clone()));
        current = next;
    }
    steps
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
    for worker in [Worker::Watcher, Worker::Reconciler] {
        match state.task(worker) {
            Task::Planned(_) | Task::Releasing { .. } => {
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
        let evidence = if config.persistent_fault {
            endpoints::persistent_fault(config, &view.chain, view.store.attempts.len())
        } else {
            vec![endpoints::honest(
                config,
                &view.chain,
                view.store.attempts.len(),
            )]
        };
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
        if let Some(next) = model.next_state(state, action.clone())
            && next != *state
            && !steps.iter().any(|(_, s)| *s == next)
        {
            steps.push((action, next));
        }
    }
    steps
}
