//! What each action does: the step from a state to the next, through the chain's, the
//! signer's, the workers', the witness's and the compromised principal's own functions.

use opledger_domain::evidence::ReplacementRequest;

use super::action::Action;
use super::payout::PayoutModel;
use super::state::{Clock, State, Task, Worker};
use crate::truth;

impl PayoutModel {
    /// The state `action` leads to from `state`: `None` when the action is not enabled there
    /// (the store refuses it, or the worker decides nothing).
    pub(crate) fn successor(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        match action {
            Action::Broadcast(submission) => self.broadcast(&mut next, submission)?,
            Action::Publish(i) => next.chain.public |= 1 << i,
            Action::Mine { tx, succeeded } => {
                next.chain.mine(Some((tx, succeeded)), &next.store.attempts);
            }
            Action::MineEmpty => next.chain.mine(None, &next.store.attempts),
            Action::Reorg { depth, refill } => {
                let attempts = next.store.attempts.clone();
                next.chain.reorganize(
                    depth,
                    refill.map(|r| (r.tx, r.succeeded, r.offset)),
                    &attempts,
                    |m| truth::is_value_move(m, &attempts),
                );
            }
            Action::Rotate { keep_retired_key } => {
                next.wallets.rotated = true;
                next.wallets.a_key = keep_retired_key;
            }
            Action::Bump => {
                if !self.sign_replacement(&mut next, ReplacementRequest::FeeBump) {
                    return None;
                }
            }
            Action::ReadStore(worker) => {
                let attempts = u8::try_from(next.store.attempts.len()).ok()?;
                *next.task_mut(worker) = Task::StoreRead { attempts };
            }
            Action::Evaluate {
                worker,
                evidence,
                clock,
            } => self.evaluate(&mut next, worker, &evidence, clock)?,
            Action::Webhook { evidence } => {
                self.evaluate(&mut next, Worker::Watcher, &evidence, Clock::ALL[0])?;
            }
            Action::TrustedWebhook { attempt } => self.trust_webhook(&mut next, attempt)?,
            Action::Attest { proposal, evidence } => {
                self.witness(&mut next, usize::from(proposal), &evidence)?;
            }
            Action::Rogue(step) => self.rogue(&mut next, step)?,
            Action::Commit(worker) => self.commit(&mut next, worker),
            Action::Crash(worker) => *next.task_mut(worker) = Task::Idle,
            Action::Resolve { outcome, evidence } => {
                let resolved = self.resolve(state, outcome, &evidence)?;
                self.apply_resolution(&mut next, resolved);
            }
        }
        next.ghost.final_moves |=
            truth::final_value_moves(&next.chain, &next.store.attempts, self.config.confirmations);
        Some(next)
    }
}
