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

    /// Whether the provider's consistency window may pass now. Without lookup it is the
    /// listing's, and the provider's (an assumption the operator's configuration must meet): it
    /// passes only once every request of ours stored is listed and no create is still in the
    /// network (Coinbase Prime refuses a request signed more than 30 s before it arrives). With
    /// lookup it asks nothing of the provider: a "not found" after it is only a resend, which
    /// the provider deduplicates.
    fn window_may_pass(&self, state: &State) -> bool {
        let provider = &state.provider;
        self.config.profile.has_lookup()
            || (provider.delayed.is_none() && provider.stored().all(|t| t.indexed))
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
        if !state.window_passed && state.ledger.sends > 0 && self.window_may_pass(state) {
            actions.push(Action::WindowPasses);
        }
        if state.ledger.owner.is_some() {
            actions.push(Action::Lapse(Lease::Claim));
        }
        if state.ledger.follower.is_some() {
            actions.push(Action::Lapse(Lease::Follow));
        }
        let (profile, rule) = (self.config.profile, self.decisions.bound_release);
        for id in witness::judgeable(profile, rule, state) {
            actions.push(Action::Witness(id));
        }
        for candidate in witness::bindable(profile, &state.provider, &state.ledger) {
            actions.push(Action::Bind(candidate));
        }
        if witness::bindable_elsewhere(&state.provider, &state.ledger) {
            actions.push(Action::BindElsewhere);
        }
        if self.config.compromised_executor {
            let mut rogue: Vec<RogueStep> = Vec::new();
            rogue::steps(profile, state, &mut rogue);
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
            Action::Witness(id) => witness::judge(
                self.config.profile,
                self.decisions.bound_release,
                &mut next,
                id,
            ),
            Action::Bind(candidate) => {
                next.ledger.bound = Some(candidate);
                true
            }
            Action::BindElsewhere => {
                next.ledger.foreign_bound_elsewhere = true;
                // The other withdrawal's concern from now on: nothing of ours reads it any more
                // (not a candidate of ours, not bindable to ours), so the model stops following it.
                next.provider.foreign = None;
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
