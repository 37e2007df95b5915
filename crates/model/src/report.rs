//! Running a check and reporting it: the states explored, the time taken, and every property's
//! outcome, with counterexample traces readable in a CI log.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path, Property};

use crate::PayoutModel;
use crate::config::Config;
use crate::liveness::Goal;
use crate::model::{Action, State};

mod format;

pub use format::{brief, describe};

/// The outcome of one check.
#[derive(Debug)]
pub struct Report {
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
    pub discoveries: BTreeMap<&'static str, Discovery>,
}

/// A path from the initial state: a counterexample to an `always` property, cut at the first
/// state that breaks it, or an example of a `sometimes` one, cut at the first state that shows
/// it.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The initial state.
    pub start: State,
    /// Each action with the state it led to.
    pub steps: Vec<(Action, State)>,
    /// For the liveness property: a fair continuation of the last state that never ends.
    pub continuation: Vec<(Action, State)>,
}

impl Discovery {
    /// The state the path ends in.
    pub fn last_state(&self) -> &State {
        self.steps.last().map_or(&self.start, |(_, s)| s)
    }

    /// Stateright reports the last path it found, not the first: this keeps the path up to the
    /// first state where `property` is decided (broken, or shown).
    fn from_path(
        model: &PayoutModel,
        property: &Property<PayoutModel>,
        path: Path<State, Action>,
    ) -> Discovery {
        let mut pairs = path.into_vec().into_iter();
        let decided = |state: &State| match property.expectation {
            Expectation::Sometimes => (property.condition)(model, state),
            Expectation::Always | Expectation::Eventually => !(property.condition)(model, state),
        };
        let Some((start, mut action)) = pairs.next() else {
            return Discovery {
                start: model.initial(),
                steps: Vec::new(),
                continuation: Vec::new(),
            };
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
        let goal = match property.name {
            crate::properties::ENDS_TERMINAL_OR_ESCALATED => Some(Goal::Ends),
            crate::properties::RELEASED_AFTER_FINAL_CANCEL => Some(Goal::Released),
            crate::properties::REOPENED_RELEASE_DECIDED => Some(Goal::Redecided),
            _ => None,
        };
        if let Some(goal) = goal {
            found.continuation = crate::liveness::witness(model, goal, found.last_state());
        }
        found
    }
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
/// the report. The line goes to the process's standard output itself, past the test harness's
/// capture, so that CI logs show it for passing tests too.
pub fn check(label: &str, config: Config, until: Until) -> Report {
    let threads = config.threads.max(1);
    let model = PayoutModel::new(config);
    let expectations = model
        .properties()
        .into_iter()
        .map(|p| (p.name, p.expectation))
        .collect();
    let started = Instant::now();
    let mut builder = model.checker().threads(threads);
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
            Some((name, Discovery::from_path(checker.model(), property, path)))
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

impl Report {
    /// `model: states=<unique> generated=<all> depth=<max> liveness_states=<n> elapsed=<ms>ms`.
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
        let mut out = format!("   start: {}\n", brief(&found.start));
        for (n, (action, state)) in found.steps.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:>2}. {}\n        -> {}",
                n + 1,
                describe(action),
                brief(state)
            );
        }
        if !found.continuation.is_empty() {
            out.push_str("   a fair continuation from there that never ends:\n");
            for (n, (action, state)) in found.continuation.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "  {:>2}. {}\n        -> {}",
                    n + 1,
                    describe(action),
                    brief(state)
                );
            }
            out.push_str("   (from here no fair step changes anything, or the steps loop)\n");
        }
        Some(out)
    }
}
