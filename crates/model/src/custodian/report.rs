//! Running a check of the custodian model and reporting it as the payout model's checks do:
//! one `model: states=... elapsed=...ms check="..."` line per check on standard output, every
//! property's outcome, and counterexample traces readable in a CI log.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path, Property};

use super::config::CustodianConfig;
use super::model::CustodianModel;
use super::properties;
use super::state::{Action, Pc, State};
use crate::report::Until;

impl Model for CustodianModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State::initial()]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        self.enabled(state, actions);
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        self.successor(state, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::for_config(&self.config)
    }

    fn format_action(&self, action: &Action) -> String {
        format!("{action:?}")
    }
}

/// A path from the initial state, cut at the first state that decides its property.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The initial state.
    pub start: State,
    /// Each action with the state it led to.
    pub steps: Vec<(Action, State)>,
}

impl Discovery {
    /// The state the path ends in.
    pub fn last_state(&self) -> &State {
        self.steps.last().map_or(&self.start, |(_, s)| s)
    }

    fn from_path(
        model: &CustodianModel,
        property: &Property<CustodianModel>,
        path: Path<State, Action>,
    ) -> Discovery {
        let decided = |state: &State| match property.expectation {
            Expectation::Sometimes => (property.condition)(model, state),
            Expectation::Always | Expectation::Eventually => !(property.condition)(model, state),
        };
        let mut pairs = path.into_vec().into_iter();
        let Some((start, mut action)) = pairs.next() else {
            return Discovery {
                start: State::initial(),
                steps: Vec::new(),
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
        Discovery { start, steps }
    }
}

/// The outcome of one check of the custodian model.
#[derive(Debug)]
pub struct CustodianReport {
    /// What was checked.
    pub label: String,
    /// Distinct states explored.
    pub unique_states: usize,
    /// States generated, repeats included.
    pub states: usize,
    /// The longest path explored.
    pub max_depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// True when every reachable state was explored.
    pub complete: bool,
    /// Every property's name with its expectation.
    pub expectations: BTreeMap<&'static str, Expectation>,
    /// The path found for a property: a counterexample or an example.
    pub discoveries: BTreeMap<&'static str, Discovery>,
}

/// Checks `config` breadth first as far as `until` says, prints `model: states=...` and returns
/// the report.
pub fn check(label: &str, config: CustodianConfig, until: Until) -> CustodianReport {
    let threads = config.threads.max(1);
    let model = CustodianModel::new(config);
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
    let report = CustodianReport {
        label: label.to_owned(),
        unique_states: checker.unique_state_count(),
        states: checker.state_count(),
        max_depth: checker.max_depth(),
        elapsed: started.elapsed(),
        complete: until == Until::Exhausted,
        expectations,
        discoveries,
    };
    let _ = writeln!(std::io::stdout().lock(), "{}", report.summary());
    report
}

impl CustodianReport {
    /// `model: states=<unique> generated=<all> depth=<max> liveness_states=0 elapsed=<ms>ms
    /// check="<label>"`, the payout model's line.
    pub fn summary(&self) -> String {
        format!(
            "model: states={} generated={} depth={} liveness_states=0 elapsed={}ms check=\"{}\"",
            self.unique_states,
            self.states,
            self.max_depth,
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

    /// Everything wrong with a check that should pass; empty when all holds.
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
                "  {:>2}. {action:?}\n        -> {}",
                n + 1,
                brief(state)
            );
        }
        Some(out)
    }
}

/// A one-line summary of a state.
pub fn brief(state: &State) -> String {
    let ledger = &state.ledger;
    let txns: Vec<String> = state
        .provider
        .txns
        .iter()
        .zip(["ours", "fresh"])
        .filter_map(|(t, name)| {
            t.map(|t| {
                format!(
                    "{name}:{:?}{}{}",
                    t.phase,
                    if t.replaced { "/replaced" } else { "" },
                    if t.indexed { "" } else { "/unindexed" }
                )
            })
        })
        .collect();
    let pcs: Vec<String> = state
        .executors
        .iter()
        .map(|pc| match pc {
            Pc::Idle => "idle".to_owned(),
            other => format!("{other:?}"),
        })
        .collect();
    let mut line = format!(
        "{} hold={:?} sends={} provider=[{}] executors=[{}]",
        ledger.state,
        ledger.hold,
        ledger.sends,
        txns.join(", "),
        pcs.join(", ")
    );
    if let Some(i) = ledger.owner {
        let _ = write!(line, " claim_lease={i}");
    }
    if let Some(i) = ledger.follower {
        let _ = write!(line, " follow_lease={i}");
    }
    if let Some(r) = state.provider.delayed {
        let _ = write!(line, " delayed={r:?}");
    }
    if state.window_passed {
        line.push_str(" window=passed");
    }
    if !ledger.records.is_empty() {
        let records: Vec<String> = ledger
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let proposed = u8::try_from(i + 1).is_ok_and(|id| ledger.is_proposed(id));
                format!(
                    "#{}:{}{}{}",
                    i + 1,
                    r.status,
                    r.hash.map(|h| format!("/0x{h:02x}..")).unwrap_or_default(),
                    if proposed { "/proposed" } else { "" }
                )
            })
            .collect();
        let _ = write!(
            line,
            " records=[{}] attested={:?}",
            records.join(", "),
            ledger.attested
        );
    }
    if let Some(e) = ledger.escalation {
        let _ = write!(line, " escalated={e:?}");
    }
    line
}
