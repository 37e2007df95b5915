//! The chain watcher: when a network's agreed head moves, it judges every BROADCAST operation by
//! the domain's decision core on evidence a quorum of endpoints agreed on at one pinned block:
//! a transfer attempt that succeeded at final depth is CONFIRMED (the hold settled and the
//! inclusion recorded, in one transaction); a cancel, included or final, goes to the reconciler
//! (UNKNOWN), which alone may release; a reverted attempt, a nonce consumed without any of our
//! attempts or an attempt that is not what it is stored as is escalated with an owner, the hold
//! kept. No agreement, or no answer, concludes nothing. Operations a webhook hinted at are judged
//! first; the hint never settles anything by itself.

mod judge;
mod record;
mod reorg;

use judge::{Judged, inclusion_of, judge_all};
use opledger_chain::evidence::{BlockRef, EvidenceReader, no_evidence, reason_label};
use opledger_domain::evidence::Step;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;
use opledger_evm::evidence::Judgements;
use opledger_store::pass::WatchLease;
use opledger_store::roles::BroadcasterStore;
use std::collections::HashMap;
use std::sync::Mutex;

/// One network the watcher follows.
#[derive(Debug, Clone)]
pub struct Watched {
    /// The quorum of endpoints whose agreement is evidence, with the network's finality.
    pub evidence: EvidenceReader,
    /// How many blocks below the pinned block confirmed inclusions are re-checked for
    /// reorganizations.
    pub reorg_window: u64,
}

/// Who owns what the watcher escalates.
#[derive(Debug, Clone)]
pub struct Owners {
    /// Payments: a reverted attempt.
    pub operations: String,
    /// Security: a nonce consumed without us, an attempt that is not what it is stored as.
    pub security: String,
}

/// Watches BROADCAST operations on every configured network.
#[derive(Debug)]
pub struct Watcher {
    store: BroadcasterStore,
    networks: HashMap<String, Watched>,
    worker_id: String,
    owners: Owners,
    last_pin: Mutex<HashMap<String, BlockRef>>,
    /// With several instances on one database: each network's lease (only its holder watches
    /// the network); `None` watches every network.
    leases: Option<HashMap<String, WatchLease>>,
    /// The networks whose lease this instance held at its latest pass.
    leading: Mutex<HashMap<String, bool>>,
    /// The attempts' judgements of the latest pass, reused while their bytes are unchanged (each
    /// signature recovered once, not once per pass).
    judgements: Mutex<HashMap<String, Judgements<(TenantId, OperationId)>>>,
}

/// What a watcher pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Networks whose agreed head moved since the last pass.
    pub new_heads: usize,
    /// Operations moved to CONFIRMED.
    pub confirmed: usize,
    /// Operations escalated to FAILED_TERMINAL (reverted, nonce moved without us, tampered).
    pub escalated: usize,
    /// Operations handed to the reconciler (a cancel included): BROADCAST -> UNKNOWN.
    pub to_reconciler: usize,
    /// CONFIRMED operations whose inclusion a reorganization removed (back to BROADCAST).
    pub reopened: usize,
    /// VERIFIED_NOT_SENT operations whose release's proof a reorganization removed (back to
    /// UNKNOWN, the funds held again, escalated).
    pub releases_reopened: usize,
    /// Where the pass spent its time, summed over its networks.
    pub stages: Stages,
}

/// Time a watcher pass spent in each of its stages (for benchmarks and diagnosis).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages {
    /// Pinning the agreed block (the endpoints' heads and hashes).
    pub pin: std::time::Duration,
    /// Re-checking recent inclusions for reorganizations.
    pub reorgs: std::time::Duration,
    /// Reading the BROADCAST operations and their attempts from the store.
    pub load: std::time::Duration,
    /// Reading the chain evidence for them at the pinned block.
    pub read: std::time::Duration,
    /// Re-reading attempts, and recording confirmations, escalations and hand-overs.
    pub record: std::time::Duration,
}

impl Watcher {
    /// A watcher of `networks`; escalations name `owners`.
    pub fn new(
        store: BroadcasterStore,
        networks: HashMap<String, Watched>,
        worker_id: String,
        owners: Owners,
    ) -> Watcher {
        Watcher {
            store,
            networks,
            worker_id,
            owners,
            last_pin: Mutex::new(HashMap::new()),
            leases: None,
            leading: Mutex::new(HashMap::new()),
            judgements: Mutex::new(HashMap::new()),
        }
    }

    /// Watches each network only while this instance holds its lease on the store's database
    /// ([`WatchLease`]): of several broadcasters on one database one watches (and fee-bumps)
    /// each network, and another takes over within a pass of its end.
    pub fn with_leases(mut self) -> Watcher {
        self.leases = Some(
            self.networks
                .keys()
                .map(|network| (network.clone(), self.store.watch_lease(network)))
                .collect(),
        );
        self
    }

    /// Whether this instance watched `network` at its latest pass (always, without leases): the
    /// fee bumps of its stuck transfers follow the same lease.
    pub fn leads(&self, network: &str) -> bool {
        if self.leases.is_none() {
            return true;
        }
        self.leading
            .lock()
            .is_ok_and(|leading| leading.get(network).copied().unwrap_or(false))
    }

    /// Takes or keeps `network`'s lease (true without leases), and remembers the answer.
    async fn lead(&self, network: &str) -> bool {
        let Some(lease) = self.leases.as_ref().and_then(|l| l.get(network)) else {
            return true;
        };
        let held = lease.hold().await;
        if let Ok(mut leading) = self.leading.lock() {
            leading.insert(network.to_owned(), held);
        }
        held
    }

    /// One pass: for each network whose agreed head moved, checks recent inclusions for
    /// reorganizations and judges its BROADCAST operations.
    pub async fn tick(&self, limit: u32) -> Pass {
        let mut pass = Pass::default();
        for (network, watched) in &self.networks {
            if !self.lead(network).await {
                continue;
            }
            self.watch(network, watched, limit, &mut pass).await;
        }
        pass
    }

    /// One network's part of a pass: when its agreed head moved, checks recent inclusions for
    /// reorganizations, judges its BROADCAST operations and records what the verdicts allow,
    /// each stage's time added to `pass`.
    async fn watch(&self, network: &str, watched: &Watched, limit: u32, pass: &mut Pass) {
        let mut clock = std::time::Instant::now();
        let mut lap = |stage: &mut std::time::Duration| {
            let now = std::time::Instant::now();
            *stage += now - clock;
            clock = now;
        };
        let pinned = watched.evidence.pin().await;
        lap(&mut pass.stages.pin);
        let pinned = match pinned {
            Ok(pinned) => pinned,
            Err(e) => {
                no_evidence().record(network, reason_label(&e.no_agreement()));
                return;
            }
        };
        let moved = match self.last_pin.lock() {
            Ok(mut last) => last.insert(network.to_owned(), pinned.pinned) != Some(pinned.pinned),
            Err(_) => true,
        };
        if !moved {
            return;
        }
        pass.new_heads += 1;
        let (reopened, releases_reopened) = self.check_reorgs(network, watched, &pinned).await;
        pass.reopened += reopened;
        pass.releases_reopened += releases_reopened;
        // What later passes no longer re-check (signers keep a retiring wallet until its
        // confirmed withdrawals are at or below it).
        let floor = pinned.pinned.number.saturating_sub(watched.reorg_window);
        if let Err(e) = self.store.record_reorg_floor(network, floor).await {
            tracing::warn!(error = %e.log_safe(), "cannot record the reorganization floor");
        }
        lap(&mut pass.stages.reorgs);
        let watching = self.store.watching(network, limit).await;
        lap(&mut pass.stages.load);
        let watching = match watching {
            Ok(watching) => watching,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read in-flight operations");
                return;
            }
        };
        let judged = judge_all(watching, &pinned, network, &self.judgements).await;
        lap(&mut pass.stages.read);
        let judged = self.still_current(network, judged).await;
        self.act(judged, pass).await;
        lap(&mut pass.stages.record);
    }

    /// Carries out the steps the verdicts of `judged` allow (the confirmations in one batch),
    /// counted in `pass`, and clears the webhook hints of the judged operations.
    async fn act(&self, judged: Vec<Judged>, pass: &mut Pass) {
        let hinted: Vec<(TenantId, OperationId)> = judged
            .iter()
            .filter(|j| j.op.hinted)
            .map(|j| (j.op.tenant_id, j.op.op_id))
            .collect();
        let mut confirm = Vec::new();
        for j in judged {
            match j.step {
                Step::Confirm { attempt, inclusion } => {
                    if let Some(inclusion) = inclusion_of(&j.op, attempt, inclusion) {
                        confirm.push((j, inclusion));
                    }
                }
                Step::Move(OperationState::Unknown) => {
                    if self.to_reconciler(&j).await {
                        pass.to_reconciler += 1;
                    }
                }
                Step::Escalate(escalation) => {
                    if self.escalate(&j, escalation).await {
                        pass.escalated += 1;
                    }
                }
                Step::Wait
                | Step::Move(_)
                | Step::Release
                | Step::SignCancel
                | Step::ResubmitCancel => {}
            }
        }
        pass.confirmed += self.confirm_all(&confirm).await;
        if let Err(e) = self.store.clear_hints(&hinted).await {
            tracing::warn!(error = %e.log_safe(), "cannot clear webhook hints");
        }
    }

    /// Drops the judgements of operations that gained an attempt since they were read (a
    /// replacement persisted while the chain was read would look like a nonce moved without us):
    /// they are judged again on the next head.
    async fn still_current(&self, network: &str, judged: Vec<Judged>) -> Vec<Judged> {
        let acting: Vec<(TenantId, OperationId)> = judged
            .iter()
            .filter(|j| !matches!(j.step, Step::Wait))
            .map(|j| (j.op.tenant_id, j.op.op_id))
            .collect();
        if acting.is_empty() {
            return judged;
        }
        let counts = match self.store.attempt_counts(&acting).await {
            Ok(counts) => counts,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot re-read attempts: no verdict this pass");
                return Vec::new();
            }
        };
        judged
            .into_iter()
            .filter(|j| {
                let now = counts.get(&(j.op.tenant_id, j.op.op_id)).copied();
                let same = matches!(j.step, Step::Wait) || now == Some(j.op.attempts.len());
                if !same {
                    no_evidence().record(network, "inconsistent");
                }
                same
            })
            .collect()
    }
}
