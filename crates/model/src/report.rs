//! Running a check and reporting it: the states explored, the time taken, and every property's
//! outcome, with counterexample traces readable in a CI log. The payout model's checks and the
//! custodian model's ([`crate::custodian::report`]) share it through [`Traced`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};
use std::hash::Hash;
use std::io::Write as _;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path, Property};

use crate::PayoutModel;
use crate::config::Config;
use crate::liveness::Goal;
use crate::model::{Action, State};

mod format;

pub use format::{brief, describe};

/// A model whose checks this module runs and reports: how a trace writes its states and
/// actions, and what only the model knows of its liveness check.
pub trait Traced:
    Model<
        State: Clone + fmt::Debug + Hash + PartialEq + Send + Sync + 'static,
        Action: Clone + fmt::Debug + PartialEq,
    > + fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// A one-line summary of `state`.
    fn brief(state: &Self::State) -> String;

    /// A one-line description of `action`.
    fn describe(action: &Self::Action) -> String;

    /// How many states the liveness check has judged; none for a model without one.
    fn liveness_states(&self) -> usize {
        0
    }

    /// For a liveness property, a fair continuation of `last` that never reaches its goal;
    /// empty for any other property, or for a model without a liveness check.
    fn continuation(
        &self,
        property: &'static str,
        last: &Self::State,
    ) -> Vec<(Self::Action, Self::State)> {
        let _ = (property, last);
        Vec::new()
    }
}

impl Traced for PayoutModel {
    fn brief(state: &State) -> String {
        format::brief(state)
    }

    fn describe(action: &Action) -> String {
        format::describe(action)
    }

    fn liveness_states(&self) -> usize {
        PayoutModel::liveness_states(self)
    }

    fn continuation(&self, property: &'static str, last: &State) -> Vec<(Action, State)> {
        let goal = match property {
            crate::properties::ENDS_TERMINAL_OR_ESCALATED => Goal::Ends,
            crate::properties::RELEASED_AFTER_FINAL_CANCEL => Goal::Released,
            crate::properties::REOPENED_RELEASE_DECIDED => Goal::Redecided,
            _ => return Vec::new(),
        };
        crate::liveness::witness(self, goal, last)
    }
}

/// The outcome of one check.
#[derive(Debug)]
pub struct Report<M: Traced = PayoutModel> {
    /// What was checked.
    pub label: String,
    /// Distinct states explored.
    pub unique_states: usize,
    /// States generated, repeats included.
    pub states: usize,
    /// The longest path explored.
    pub max_depth: usize,
    /// States the liveness check judged (reachable ones and their fair continuations).
    pub liveness_states: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// True when every reachable state was explored.
    pub complete: bool,
    /// Every property's name with its expectation.
    pub expectations: BTreeMap<&'static str, Expectation>,
    /// The path found for a property: a counterexample for `always`, an example for
    /// `sometimes`.
    pub discoveries: BTreeMap<&'static str, Discovery<M::State, M::Action>>,
}

/// A path from the initial state: a counterexample to an `always` property, cut at the first
/// state that breaks it, or an example of a `sometimes` one, cut at the first state that shows
/// it.
#[derive(Debug, Clone)]
pub struct Discovery<S = State, A = Action> {
    /// The initial state.
    pub start: S,
    /// Each action with the state it led to.
    pub steps: Vec<(A, S)>,
    /// For a liveness property: a fair continuation of the last state that never ends.
    pub continuation: Vec<(A, S)>,
}

impl<S, A> Discovery<S, A> {
    /// The state the path ends in.
    pub fn last_state(&self) -> &S {
        self.steps.last().map_or(&self.start, |(_, s)| s)
    }
}

/// Stateright reports the last path it found, not the first: this keeps the path up to the
/// first state where `property` is decided (broken, or shown), and the model's fair
/// continuation from there. `None` only for a model without an initial state.
fn discovery<M: Traced>(
    model: &M,
    property: &Property<M>,
    path: Path<M::State, M::Action>,
) -> Option<Discovery<M::State, M::Action>> {
    let mut pairs = path.into_vec().into_iter();
    let decided = |state: &M::State| match property.expectation {
        Expectation::Sometimes => (property.condition)(model, state),
        Expectation::Always | Expectation::Eventually => !(property.condition)(model, state),
    };
    let Some((start, mut action)) = pairs.next() else {
        return Some(Discovery {
            start: model.init_states().into_iter().next()?,
            steps: Vec::new(),
            continuation: Vec::new(),
        });
    };
    let mut steps = Vec::new();
    if !decided(&start) {
        for (state, next_action) in pairs {
            let Some(done) = action.take() else { break };
            let stop = decided(&state);
            steps.push((done, state));
            if stop {
                break;
            }
            action = next_action;
        }
    }
    let mut found = Discovery {
        start,
        steps,
        continuation: Vec::new(),
    };
    found.continuation = model.continuation(property.name, found.last_state());
    Some(found)
}

/// How far a check goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Every reachable state.
    Exhausted,
    /// Until each of these properties has a discovery (or every state was explored).
    Found(&'static [&'static str]),
}

/// Checks `config` breadth first as far as `until` says, prints `model: states=...` and returns
/// the report (see [`run`]).
pub fn check(label: &str, config: Config, until: Until) -> Report {
    let threads = config.threads;
    run(label, PayoutModel::new(config), threads, until)
}

/// Checks `model` breadth first on `threads` checker threads (one at least) as far as `until`
/// says, prints `model: states=...` and returns the report. The line goes to the process's
/// standard output itself, past the test harness's capture, so that CI logs show it for passing
/// tests too.
pub fn run<M: Traced>(label: &str, model: M, threads: usize, until: Until) -> Report<M> {
    let expectations = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation))
        .collect();
    let started = Instant::now();
    let mut builder = model.checker().threads(threads.max(1));
    if let Until::Found(names) = until {
        builder = builder.finish_when(HasDiscoveries::AllOf(names.iter().copied().collect()));
    }
    let checker = builder.spawn_bfs().join();
    let properties = checker.model().properties();
    let discoveries = checker
        .discoveries()
        .into_iter()
        .filter_map(|(name, path)| {
            let property = properties.iter().find(|p| p.name == name)?;
            Some((name, discovery(checker.model(), property, path)?))
        })
        .collect();
    let report = Report {
        label: label.to_owned(),
        unique_states: checker.unique_state_count(),
        states: checker.state_count(),
        max_depth: checker.max_depth(),
        liveness_states: checker.model().liveness_states(),
        elapsed: started.elapsed(),
        complete: until == Until::Exhausted,
        expectations,
        discoveries,
    };
    let _ = writeln!(std::io::stdout().lock(), "{}", report.summary());
    report
}

impl<M: Traced> Report<M> {
    /// `model: states=<unique> generated=<all> depth=<max> liveness_states=<n> elapsed=<ms>ms
    /// check="<label>"`.
    pub fn summary(&self) -> String {
        format!(
            "model: states={} generated={} depth={} liveness_states={} elapsed={}ms check=\"{}\"",
            self.unique_states,
            self.states,
            self.max_depth,
            self.liveness_states,
            self.elapsed.as_millis(),
            self.label
        )
    }

    /// The properties with a counterexample.
    pub fn violated(&self) -> BTreeSet<&'static str> {
        self.discoveries
            .keys()
            .filter(|name| {
                self.expectations
                    .get(*name)
                    .is_some_and(|e| *e != Expectation::Sometimes)
            })
            .copied()
            .collect()
    }

    /// The `sometimes` properties without an example.
    pub fn unreached(&self) -> BTreeSet<&'static str> {
        self.expectations
            .iter()
            .filter(|(name, e)| {
                **e == Expectation::Sometimes && !self.discoveries.contains_key(*name)
            })
            .map(|(name, _)| *name)
            .collect()
    }

    /// Everything wrong with a check that should pass: each violated property with its trace,
    /// and each unreached example. Empty when all holds.
    pub fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self
            .violated()
            .into_iter()
            .map(|name| format!("violated: {name}\n{}", self.trace(name).unwrap_or_default()))
            .collect();
        problems.extend(
            self.unreached()
                .into_iter()
                .map(|n| format!("never reached: {n}")),
        );
        if !self.complete {
            problems.push("the check did not explore every state".to_owned());
        }
        problems
    }

    /// The path found for `property`, one numbered step a line, each followed by the state it
    /// led to.
    pub fn trace(&self, property: &str) -> Option<String> {
        let found = self.discoveries.get(property)?;
        let mut out = format!("   start: {}\n", M::brief(&found.start));
        write_steps::<M>(&mut out, &found.steps);
        if !found.continuation.is_empty() {
            out.push_str("   a fair continuation from there that never ends:\n");
            write_steps::<M>(&mut out, &found.continuation);
            out.push_str("   (from here no fair step changes anything, or the steps loop)\n");
        }
        Some(out)
    }
}

/// Appends `steps` to `out`, numbered from 1, each action on its line and the state it led to
/// on the next.
fn write_steps<M: Traced>(out: &mut String, steps: &[(M::Action, M::State)]) {
    for (n, (action, state)) in steps.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:>2}. {}\n        -> {}",
            n + 1,
            M::describe(action),
            M::brief(state)
        );
    }
}
