//! Everything the double remembers: operations, call counters, the request log, the transfers it
//! put on chain, Fireblocks idempotency keys and JWT nonces, the fault schedule, the clock.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Serialize;

use crate::clock::Clock;
use crate::faults::{Call, Fired, Schedule};
use crate::profile::{Endpoint, Profile};
use crate::record::{Operation, StoredAnswer};

/// One request received (`GET /sim/requests`).
#[derive(Debug, Clone, Serialize)]
pub struct RequestEntry {
    /// Double's clock, ms.
    pub at_ms: i64,
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The profile served.
    pub profile: Option<Profile>,
    /// Our reference, when the request carried one.
    pub reference: Option<String>,
    /// The status answered; absent when the connection was closed without an answer.
    pub status: Option<u16>,
    /// Labels of the faults applied (`kind#rule index`).
    pub faults: Vec<String>,
}

/// One transaction put on chain (`GET /sim/transfers`).
#[derive(Debug, Clone, Serialize)]
pub struct ChainTransfer {
    /// Our reference.
    pub reference: String,
    /// The profile.
    pub profile: Profile,
    /// The provider record's id.
    pub provider_id: String,
    /// The hash broadcast.
    pub hash: String,
    /// Its nonce.
    pub nonce: u64,
    /// Destination, lowercase.
    pub destination: String,
    /// Amount in wei (decimal string).
    pub amount_wei: String,
    /// Hashes signed and reported for the same transfer but replaced by this one, never sent.
    pub replaced_hashes: Vec<String>,
    /// Double's clock, ms.
    pub at_ms: i64,
}

/// How long a Fireblocks `Idempotency-Key` is remembered (24 h).
pub const IDEMPOTENCY_WINDOW_MS: i64 = 24 * 3600 * 1000;

/// Locks, ignoring poisoning (no lock is held across code that can panic on input).
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

type OpKey = (Profile, String);

/// The shared state.
#[derive(Debug)]
pub struct Shared {
    /// The double's clock.
    pub clock: Arc<Clock>,
    schedule: Mutex<Schedule>,
    ops: Mutex<HashMap<OpKey, Operation>>,
    calls: Mutex<HashMap<(Profile, String, Endpoint), u32>>,
    requests: Mutex<Vec<RequestEntry>>,
    transfers: Mutex<Vec<ChainTransfer>>,
    idempotency: Mutex<HashMap<String, (StoredAnswer, i64)>>,
    nonces: Mutex<HashSet<String>>,
}

impl Shared {
    /// Empty state with `schedule`.
    pub fn new(clock: Arc<Clock>, schedule: Schedule) -> Shared {
        Shared {
            clock,
            schedule: Mutex::new(schedule),
            ops: Mutex::default(),
            calls: Mutex::default(),
            requests: Mutex::default(),
            transfers: Mutex::default(),
            idempotency: Mutex::default(),
            nonces: Mutex::default(),
        }
    }

    /// The current fault schedule.
    pub fn schedule(&self) -> Schedule {
        lock(&self.schedule).clone()
    }

    /// Replaces the fault schedule.
    pub fn set_schedule(&self, schedule: Schedule) {
        *lock(&self.schedule) = schedule;
    }

    /// Counts a call of kind `endpoint` for `reference` and gives the rules that fire for it
    /// with its 1-based index.
    pub fn call(&self, profile: Profile, reference: &str, endpoint: Endpoint) -> (u32, Vec<Fired>) {
        let index = {
            let mut calls = lock(&self.calls);
            let count = calls
                .entry((profile, reference.to_owned(), endpoint))
                .or_insert(0);
            *count += 1;
            *count
        };
        let call = Call {
            profile,
            reference,
            endpoint,
            index,
        };
        (index, self.schedule().fired(call))
    }

    /// Stores `op` unless its reference is already stored; gives back the stored one then.
    pub fn insert(&self, op: Operation) -> Result<(), Box<Operation>> {
        let mut ops = lock(&self.ops);
        let key = (op.profile, op.reference.clone());
        if let Some(existing) = ops.get(&key) {
            return Err(Box::new(existing.clone()));
        }
        ops.insert(key, op);
        Ok(())
    }

    /// A copy of the operation for `reference`.
    pub fn op(&self, profile: Profile, reference: &str) -> Option<Operation> {
        lock(&self.ops)
            .get(&(profile, reference.to_owned()))
            .cloned()
    }

    /// Changes the operation for `reference`.
    pub fn update<R>(
        &self,
        profile: Profile,
        reference: &str,
        change: impl FnOnce(&mut Operation) -> R,
    ) -> Option<R> {
        lock(&self.ops)
            .get_mut(&(profile, reference.to_owned()))
            .map(change)
    }

    /// Copies of every operation of `profile` (all profiles when `None`).
    pub fn ops(&self, profile: Option<Profile>) -> Vec<Operation> {
        let mut ops: Vec<Operation> = lock(&self.ops)
            .values()
            .filter(|op| profile.is_none_or(|p| p == op.profile))
            .cloned()
            .collect();
        ops.sort_by_key(|op| op.accepted_ms);
        ops
    }

    /// Logs a request.
    pub fn log_request(&self, entry: RequestEntry) {
        lock(&self.requests).push(entry);
    }

    /// The request log.
    pub fn requests(&self) -> Vec<RequestEntry> {
        lock(&self.requests).clone()
    }

    /// Records a transaction put on chain.
    pub fn log_transfer(&self, transfer: ChainTransfer) {
        lock(&self.transfers).push(transfer);
    }

    /// Every transaction put on chain.
    pub fn transfers(&self) -> Vec<ChainTransfer> {
        lock(&self.transfers).clone()
    }

    /// The answer stored under a Fireblocks `Idempotency-Key` within the window.
    pub fn idempotent_answer(&self, key: &str) -> Option<StoredAnswer> {
        let now = self.clock.now_ms();
        lock(&self.idempotency)
            .get(key)
            .filter(|(_, at)| now.saturating_sub(*at) < IDEMPOTENCY_WINDOW_MS)
            .map(|(answer, _)| answer.clone())
    }

    /// Stores the answer given under a Fireblocks `Idempotency-Key` (the first one only).
    pub fn remember_answer(&self, key: &str, answer: StoredAnswer) {
        let now = self.clock.now_ms();
        let mut map = lock(&self.idempotency);
        let fresh = map
            .get(key)
            .is_none_or(|(_, at)| now.saturating_sub(*at) >= IDEMPOTENCY_WINDOW_MS);
        if fresh {
            map.insert(key.to_owned(), (answer, now));
        }
    }

    /// Whether a JWT nonce is new (and remembers it).
    pub fn fresh_nonce(&self, nonce: &str) -> bool {
        lock(&self.nonces).insert(nonce.to_owned())
    }
}
