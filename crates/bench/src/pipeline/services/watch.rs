//! The chain watcher of a broadcaster instance in the pipeline, looping the way
//! `opledger_broadcaster::run` loops it (a pass per new head, a fee-bump sweep after each), and
//! what its passes did.

use opledger_broadcaster::Broadcaster;
use opledger_broadcaster::watcher::{Pass, Watcher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

use crate::pipeline::options::NETWORK;

/// What the chain watcher did, summed over its passes that saw a new head.
#[derive(Debug, Clone, Copy, Default)]
pub struct WatchTotals {
    /// Passes that saw a new head (and so looked up receipts).
    pub passes: u64,
    /// Time spent in those passes.
    pub busy: Duration,
    /// The longest of them.
    pub longest: Duration,
    /// Operations moved to CONFIRMED.
    pub confirmed: u64,
    /// Operations escalated to FAILED_TERMINAL (reverted, nonce moved without us, tampered).
    pub escalated: u64,
    /// Confirmations undone by a reorganization.
    pub reopened: u64,
    /// Time those passes spent in each stage.
    pub stages: opledger_broadcaster::watcher::Stages,
}

impl WatchTotals {
    /// What happened from `self` until `later` (the longest pass is `later`'s since its reset).
    pub fn until(&self, later: &WatchTotals) -> WatchTotals {
        WatchTotals {
            passes: later.passes - self.passes,
            busy: later.busy.saturating_sub(self.busy),
            longest: later.longest,
            confirmed: later.confirmed - self.confirmed,
            escalated: later.escalated - self.escalated,
            reopened: later.reopened - self.reopened,
            stages: opledger_broadcaster::watcher::Stages {
                pin: later.stages.pin.saturating_sub(self.stages.pin),
                reorgs: later.stages.reorgs.saturating_sub(self.stages.reorgs),
                load: later.stages.load.saturating_sub(self.stages.load),
                read: later.stages.read.saturating_sub(self.stages.read),
                record: later.stages.record.saturating_sub(self.stages.record),
            },
        }
    }

    /// Counts one pass that saw a new head, took `took` and did `pass`.
    fn record(&mut self, pass: &Pass, took: Duration) {
        self.passes += 1;
        self.busy += took;
        self.longest = self.longest.max(took);
        self.confirmed += pass.confirmed as u64;
        self.escalated += pass.escalated as u64;
        self.reopened += pass.reopened as u64;
        self.stages.pin += pass.stages.pin;
        self.stages.reorgs += pass.stages.reorgs;
        self.stages.load += pass.stages.load;
        self.stages.read += pass.stages.read;
        self.stages.record += pass.stages.record;
    }
}

/// How a watcher loop runs: its batch, its pause when the head has not moved, and the fee-bump
/// sweep it runs after each new head.
#[derive(Debug, Clone, Copy)]
pub(super) struct WatchLoop {
    /// BROADCAST operations examined per pass (`watch_batch_size`).
    pub(super) watch_batch: u32,
    /// Pause when the head has not moved.
    pub(super) watch_poll: Duration,
    /// Seconds after which a transfer is stuck and fee-bumped (`bump_after_secs`).
    pub(super) bump_after: u64,
    /// Stuck operations bumped per sweep (`batch_size`).
    pub(super) batch: u32,
}

/// Spawns the watcher loop of one instance: each pass that saw a new head is counted in `totals`
/// and followed by `bumper`'s fee-bump sweep.
pub(super) fn spawn(
    watcher: Watcher,
    bumper: Broadcaster,
    totals: Arc<Mutex<WatchTotals>>,
    settings: WatchLoop,
) -> JoinHandle<()> {
    let WatchLoop {
        watch_batch,
        watch_poll,
        bump_after,
        batch,
    } = settings;
    tokio::spawn(async move {
        loop {
            let started = Instant::now();
            let pass = watcher.tick(watch_batch).await;
            if pass.new_heads == 0 {
                tokio::time::sleep(watch_poll).await;
                continue;
            }
            let took = started.elapsed();
            if let Ok(mut t) = totals.lock() {
                t.record(&pass, took);
            }
            // The production loop also fee-bumps stuck transfers; once per new head here.
            bumper.bump_stuck(NETWORK, bump_after, batch).await;
        }
    })
}
