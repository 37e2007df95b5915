//! The custodian model itself: a configuration and its decisions, the actions enabled in a state
//! and the step each takes.

use super::config::CustodianConfig;
use super::decisions::Decisions;
use super::executor::Executor;
use super::provider::ProviderStep;
use super::state::{Action, Lease, RogueStep, State, Step};
use super::{rogue, witness};

/// The model of one run.
#[derive(Debug, Clone)]
pub struct CustodianModel {
    /// What the run explores.
    pub config: CustodianConfig,
    /// The decisions its principals take.
    pub decisions: Decisions,
}

impl CustodianModel {
    /// The model of `config`, deciding as its mutant says.
    pub fn new(config: CustodianConfig) -> CustodianModel {
        CustodianModel {
            config,
            decisions: Decisions::of(config.mutant),
        }
    }

    fn executor(&self) -> Executor<'_> {
        Executor {
            config: &self.config,
            decisions: &self.decisions,
        }
    }

    /// Every action enabled in `state`.
    pub fn enabled(&self, state: &State, actions: &mut Vec<Action>) {
        let mut steps: Vec<Step> = Vec::new();
        for i in self.config.instances() {
            steps.clear();
            self.executor().steps(state, i, &mut steps);
            actions.extend(steps.iter().map(|s| Action::Executor(i, *s)));
        }
        let mut provider: Vec<ProviderStep> = Vec::new();
        state.provider.steps(&mut provider);
        actions.extend(provider.into_iter().map(Action::Provider));
        if !state.window_passed && state.ledger.sends > 0 {
            actions.push(Action::WindowPasses);
        }
        if state.ledger.owner.is_some() {
            actions.push(Action::Lapse(Lease::Claim));
        }
        if state.ledger.follower.is_some() {
            actions.push(Action::Lapse(Lease::Follow));
        }
        for id in witness::judgeable(self.config.profile, &state.provider, &state.ledger) {
            actions.push(Action::Witness(id));
        }
        if witness::bindable(self.config.profile, &state.provider, &state.ledger) {
            actions.push(Action::Bind);
        }
        if self.config.compromised_executor {
            let mut rogue: Vec<RogueStep> = Vec::new();
            rogue::steps(&state.ledger, &state.ghost, &mut rogue);
            actions.extend(rogue.into_iter().map(Action::Rogue));
        }
    }

    /// The state `action` leads to from `state`; `None` when it changes nothing.
    pub fn successor(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        let taken = match action {
            Action::Executor(i, step) => self.executor().take(&mut next, i, step),
            Action::Provider(step) => {
                next.provider.take(step);
                true
            }
            Action::WindowPasses => {
                next.window_passed = true;
                true
            }
            Action::Lapse(Lease::Claim) => next.ledger.owner.take().is_some(),
            Action::Lapse(Lease::Follow) => next.ledger.follower.take().is_some(),
            Action::Witness(id) => {
                witness::judge(self.config.profile, &next.provider, &mut next.ledger, id)
            }
            Action::Bind => {
                next.ledger.bound = true;
                true
            }
            Action::Rogue(step) => rogue::take(
                &mut next.ledger,
                &mut next.ghost,
                self.decisions.release_rule,
                step,
            ),
        };
        (taken && next != *state).then_some(next)
    }
}
