//! The model itself: its configuration and its memos of pure computations, the initial state,
//! the evidence the endpoints may give, and what a worker knows when it asks them. The workers'
//! decisions and the steps are `impl PayoutModel` blocks in the modules above this one.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use super::state::{Ghost, State, Task, Worker};
use crate::chain::{Chain, Mined};
use crate::config::{Config, Side};
use crate::endpoints::{self, Evidence};
use crate::liveness::Goal;
use crate::store::{Store, Wallets};

type EvidenceKey = (Side, u8, Option<Mined>, Option<Mined>, usize);

/// The model: a configuration, and memos of pure computations (the endpoints' possible evidence
/// for a chain, and the liveness verdict of a state).
pub struct PayoutModel {
    /// What this run explores.
    pub config: Config,
    evidence: Mutex<HashMap<EvidenceKey, Arc<Vec<Evidence>>>>,
    pub(crate) liveness: Mutex<HashMap<(u64, Goal), bool>>,
}

impl fmt::Debug for PayoutModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PayoutModel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PayoutModel {
    /// A model of `config`.
    pub fn new(config: Config) -> PayoutModel {
        PayoutModel {
            config,
            evidence: Mutex::new(HashMap::new()),
            liveness: Mutex::new(HashMap::new()),
        }
    }

    /// The initial state: a SIGNED operation with its original attempt, nothing submitted.
    pub fn initial(&self) -> State {
        State {
            chain: Chain::genesis(self.config.reorgs),
            store: Store::signed(),
            wallets: Wallets {
                rotated: false,
                a_key: true,
            },
            watcher: Task::Idle,
            reconciler: Task::Idle,
            ghost: Ghost::default(),
        }
    }

    /// How many states the liveness check has judged.
    pub fn liveness_states(&self) -> usize {
        self.liveness.lock().map_or(0, |memo| memo.len())
    }

    /// Every evidence a worker may hold after asking `side`'s endpoints in `state`.
    pub fn evidence(&self, state: &State, side: Side) -> Arc<Vec<Evidence>> {
        let key = (
            side,
            state.chain.height,
            state.chain.a,
            state.chain.b,
            state.store.attempts.len(),
        );
        if let Ok(memo) = self.evidence.lock()
            && let Some(found) = memo.get(&key)
        {
            return Arc::clone(found);
        }
        let computed = Arc::new(endpoints::outcomes(
            &self.config,
            side,
            &state.chain,
            state.store.attempts.len(),
        ));
        if let Ok(mut memo) = self.evidence.lock() {
            memo.insert(key, Arc::clone(&computed));
        }
        computed
    }

    /// What `worker` knows of `state` when it asks the endpoints, if it is ready to: the state
    /// itself, or with [`Config::split_read`] the state with only the attempts it read.
    pub fn view(&self, state: &State, worker: Worker) -> Option<State> {
        match (state.task(worker), self.config.split_read) {
            (Task::Idle, false) => Some(state.clone()),
            (Task::StoreRead { attempts }, true) => {
                let mut view = state.clone();
                view.store.attempts.truncate(usize::from(attempts));
                Some(view)
            }
            _ => None,
        }
    }
}
