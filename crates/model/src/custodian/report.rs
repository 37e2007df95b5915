//! Running a check of the custodian model and reporting it with the payout model's report
//! ([`crate::report`]): one `model: states=... elapsed=...ms check="..."` line per check on
//! standard output, every property's outcome, and counterexample traces readable in a CI log.
//! What is the custodian model's own: its stateright [`Model`], and how a trace writes its
//! states ([`brief`]) and actions.

use std::fmt::Write as _;

use stateright::{Model, Property};

use super::config::CustodianConfig;
use super::model::CustodianModel;
use super::properties;
use super::state::{Action, Pc, State};
use crate::report::{Report, Traced, Until, run};

impl Model for CustodianModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State::initial(self.config.lists_foreign())]
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

/// The outcome of one check of the custodian model.
pub type CustodianReport = Report<CustodianModel>;

/// A path from the initial state, cut at the first state that decides its property (never with
/// a continuation: the custodian model has no liveness check).
pub type Discovery = crate::report::Discovery<State, Action>;

impl Traced for CustodianModel {
    fn brief(state: &State) -> String {
        brief(state)
    }

    fn describe(action: &Action) -> String {
        format!("{action:?}")
    }
}

/// Checks `config` breadth first as far as `until` says, prints `model: states=...` (with
/// `liveness_states=0`, the payout model's line) and returns the report.
pub fn check(label: &str, config: CustodianConfig, until: Until) -> CustodianReport {
    let threads = config.threads;
    run(label, CustodianModel::new(config), threads, until)
}

/// Each executor instance's step, `idle` when it has none.
fn executors(state: &State) -> Vec<String> {
    state
        .executors
        .iter()
        .map(|pc| match pc {
            Pc::Idle => "idle".to_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

/// A one-line summary of a state.
pub fn brief(state: &State) -> String {
    let ledger = &state.ledger;
    let txns: Vec<String> = state
        .provider
        .txns
        .iter()
        .chain([&state.provider.foreign])
        .zip(["ours", "fresh", "foreign"])
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
    let mut line = format!(
        "{} hold={:?} sends={} provider=[{}] executors=[{}]",
        ledger.state,
        ledger.hold,
        ledger.sends,
        txns.join(", "),
        executors(state).join(", ")
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
    if let Some(c) = ledger.bound {
        let _ = write!(line, " bound={c:?}");
    }
    if let Some(c) = ledger.answered {
        let _ = write!(line, " answered={c:?}");
    }
    if ledger.foreign_bound_elsewhere {
        line.push_str(" foreign_bound_elsewhere");
    }
    line
}
