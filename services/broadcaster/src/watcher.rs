//! The chain watcher: when a network's agreed head moves, it judges every BROADCAST operation by
//! the domain's decision core on evidence a quorum of endpoints agreed on at one pinned block:
//! a transfer attempt that succeeded at final depth is CONFIRMED (the hold settled and the
//! inclusion recorded, in one transaction); a cancel, included or final, goes to the reconciler
//! (UNKNOWN), which alone may release; a reverted attempt, a nonce consumed without any of our
//! attempts or an attempt that is not what it is stored as is escalated with an owner, the hold
//! kept. No agreement, or no answer, concludes nothing. Operations a webhook hinted at are judged
//! first; the hint never settles anything by itself.

use opledger_chain::evidence::{
    B256, BlockRef, EvidenceReader, Pinned, Query, no_evidence, reason_label,
};
use opledger_domain::evidence::Step;
use opledger_domain::evidence::{
    Escalation, EscalationOwner, NoVerdict, Verdict, decide, watcher_step,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState};
use opledger_evm::evidence::{Judgements, StoredAttempt};
use opledger_grpc::telemetry;
use opledger_store::broadcast::{AppliedRelease, Inclusion, ReleaseReopened, Watching};
use opledger_store::pass::WatchLease;
use opledger_store::signing::Attempt;
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;
use tracing::Instrument as _;

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
    store: Store,
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

/// An operation's verdict, and the step it allows.
struct Judged {
    op: Watching,
    verdict: Verdict,
    step: Step,
}

impl Watcher {
    /// A watcher of `networks`; escalations name `owners`.
    pub fn new(
        store: Store,
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
                    continue;
                }
            };
            let moved = match self.last_pin.lock() {
                Ok(mut last) => last.insert(network.clone(), pinned.pinned) != Some(pinned.pinned),
                Err(_) => true,
            };
            if !moved {
                continue;
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
                    continue;
                }
            };
            let judged = judge_all(watching, &pinned, network, &self.judgements).await;
            lap(&mut pass.stages.read);
            let judged = self.still_current(network, judged).await;
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
            lap(&mut pass.stages.record);
        }
        pass
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

    /// Re-checks, at or below the pinned block and within the window, the blocks of recent
    /// inclusions and of the proofs of applied releases; returns how many settlements and how
    /// many releases the quorum agrees were reorganized away (and reopened). No agreement: no
    /// conclusion.
    async fn check_reorgs(
        &self,
        network: &str,
        watched: &Watched,
        pinned: &Pinned,
    ) -> (usize, usize) {
        let from = pinned.pinned.number.saturating_sub(watched.reorg_window);
        let to = pinned.pinned.number;
        let blocks = match self.store.recent_inclusion_blocks(network, from, to).await {
            Ok(blocks) => blocks,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read recent inclusions");
                Vec::new()
            }
        };
        let releases = match self.store.applied_releases(network, from, to).await {
            Ok(releases) => releases,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read applied releases");
                Vec::new()
            }
        };
        let mut all: Vec<(u64, String)> = blocks.clone();
        all.extend(
            releases
                .iter()
                .map(|r| (r.block_number, r.block_hash.clone())),
        );
        all.sort();
        all.dedup();
        let gone = gone_blocks(network, pinned, all).await;
        let settled_gone: Vec<(u64, String)> = blocks
            .into_iter()
            .filter(|block| gone.contains(block))
            .collect();
        let reopened = self.reopen_settlements(network, &settled_gone).await;
        let released_gone: Vec<AppliedRelease> = releases
            .into_iter()
            .filter(|r| gone.contains(&(r.block_number, r.block_hash.clone())))
            .collect();
        (reopened, self.reopen_releases(&released_gone).await)
    }

    /// Reopens the settlements recorded in `gone` blocks (CONFIRMED -> BROADCAST).
    async fn reopen_settlements(&self, network: &str, gone: &[(u64, String)]) -> usize {
        let inclusions = match self.store.inclusions_in(network, gone).await {
            Ok(inclusions) => inclusions,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read reorganized inclusions");
                return 0;
            }
        };
        let mut reopened = 0;
        for inclusion in inclusions {
            let span = self
                .reopen_span(inclusion.tenant_id, inclusion.op_id, inclusion.block_number)
                .await;
            let reopened_now = self
                .store
                .reopen(&inclusion, &self.worker_id)
                .instrument(span.clone())
                .await;
            let _in_span = span.enter();
            match reopened_now {
                Ok(()) => {
                    tracing::warn!(op_id = %inclusion.op_id, "confirmed inclusion reorganized away; back to BROADCAST");
                    reopened += 1;
                }
                Err(e) => {
                    tracing::warn!(op_id = %inclusion.op_id, error = %e.log_safe(), "reopen deferred")
                }
            }
        }
        reopened
    }

    /// Reopens the releases whose proofs are in blocks the quorum agrees are gone
    /// (VERIFIED_NOT_SENT -> UNKNOWN, the funds held again, escalated to the operations owner).
    async fn reopen_releases(&self, gone: &[AppliedRelease]) -> usize {
        let mut reopened = 0;
        for release in gone {
            let span = self
                .reopen_span(release.tenant_id, release.op_id, release.block_number)
                .await;
            let reopened_now = self
                .store
                .reopen_release(release, &self.worker_id, &self.owners.operations)
                .instrument(span.clone())
                .await;
            let _in_span = span.enter();
            match reopened_now {
                Ok(ReleaseReopened::Reopened) => {
                    tracing::error!(op_id = %release.op_id, "release's proof reorganized away; back to UNKNOWN, funds held again, escalated");
                    reopened += 1;
                }
                Ok(ReleaseReopened::ProofMarked) => {
                    tracing::warn!(op_id = %release.op_id, "a release's proof reorganized away; the release stands on another witnessed proof");
                }
                Ok(ReleaseReopened::Already) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => {
                    tracing::warn!(op_id = %release.op_id, error = %e.log_safe(), "release reopen deferred")
                }
            }
        }
        reopened
    }

    /// The span of a reopening, parented on the operation's stored trace.
    async fn reopen_span(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        block_number: u64,
    ) -> tracing::Span {
        let span = tracing::info_span!(
            "watcher.reopen",
            opledger.service = "broadcaster",
            op_id = %op_id,
            block_number = block_number,
        );
        if telemetry::enabled() {
            let stored = self.store.trace_context(tenant_id, op_id);
            telemetry::parent_on(&span, stored.await.ok().flatten().as_deref());
        }
        span
    }

    fn request<'a>(
        &'a self,
        j: &Judged,
        to: OperationState,
        reason: &'a str,
    ) -> TransitionRequest<'a> {
        TransitionRequest::new(
            j.op.tenant_id,
            j.op.op_id,
            OperationState::Broadcast,
            to,
            Actor::ChainWatcher,
            &self.worker_id,
            reason,
        )
    }

    /// BROADCAST -> UNKNOWN: a cancel is included; the reconciler follows it to final depth and
    /// alone releases the hold. False when another worker moved it first.
    async fn to_reconciler(&self, j: &Judged) -> bool {
        let request = self.request(
            j,
            OperationState::Unknown,
            "a cancel is included: the reconciler follows it",
        );
        match self.store.transition(&request).await {
            Ok(_) => {
                tracing::info!(op_id = %j.op.op_id, "cancel included: handed to the reconciler");
                true
            }
            Err(StoreError::Conflict { .. }) => false,
            Err(e) => {
                tracing::warn!(op_id = %j.op.op_id, error = %e.log_safe(), "watch deferred");
                false
            }
        }
    }

    /// BROADCAST -> FAILED_TERMINAL with the escalation's owner and reason, hold kept; an
    /// escalation to security is also a security event. False when another worker moved it first.
    async fn escalate(&self, j: &Judged, escalation: Escalation) -> bool {
        let owner = match escalation.owner {
            EscalationOwner::Operations => &self.owners.operations,
            EscalationOwner::Security => &self.owners.security,
        };
        let request = self.request(j, OperationState::FailedTerminal, escalation.reason_code);
        let span = self.op_span(j, OperationState::FailedTerminal).await;
        let recorded = self
            .store
            .escalate(&request, owner, escalation.reason_code)
            .instrument(span.clone())
            .await;
        let _in_span = span.enter();
        match recorded {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => return false,
            Err(e) => {
                tracing::warn!(op_id = %j.op.op_id, error = %e.log_safe(), "escalation deferred");
                return false;
            }
        }
        if escalation.owner == EscalationOwner::Security {
            let recorded = self
                .store
                .record_security_event(
                    j.op.tenant_id,
                    j.op.op_id,
                    escalation.reason_code,
                    Actor::ChainWatcher,
                    &self.worker_id,
                    "chain evidence points to a compromised key or a tampered attempt",
                )
                .await;
            if let Err(e) = recorded {
                tracing::warn!(op_id = %j.op.op_id, error = %e.log_safe(), "security event not recorded");
            }
        }
        tracing::error!(op_id = %j.op.op_id, owner = %owner, reason = escalation.reason_code, verdict = ?j.verdict, "escalated: FAILED_TERMINAL, hold kept");
        true
    }

    /// BROADCAST -> CONFIRMED for every settled operation, holds settled and inclusions recorded,
    /// in one transaction; returns how many moved. Should the batch fail as a whole, each is
    /// recorded on its own, so one bad item cannot hold back the others.
    async fn confirm_all(&self, confirmed: &[(Judged, Inclusion)]) -> usize {
        const REASON: &str = "transfer included at final depth, agreed by the quorum";
        if confirmed.is_empty() {
            return 0;
        }
        let items: Vec<_> = confirmed
            .iter()
            .map(|(j, inclusion)| {
                (
                    self.request(j, OperationState::Confirmed, REASON),
                    inclusion.clone(),
                )
            })
            .collect();
        let moved = match self.store.confirm_many(&items).await {
            Ok(moved) => moved,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), size = items.len(), "batch of confirmations rolled back; recording one by one");
                let mut moved = Vec::with_capacity(items.len());
                for (request, inclusion) in &items {
                    moved.push(match self.store.confirm(request, inclusion).await {
                        Ok(()) => true,
                        Err(StoreError::Conflict { .. }) => false,
                        Err(e) => {
                            tracing::warn!(op_id = %request.op_id, error = %e.log_safe(), "watch deferred");
                            false
                        }
                    });
                }
                moved
            }
        };
        for ((j, inclusion), _) in confirmed.iter().zip(&moved).filter(|(_, m)| **m) {
            // The step that concludes joins the operation's trace.
            let span = self.op_span(j, OperationState::Confirmed).await;
            span.in_scope(|| tracing::info!(op_id = %j.op.op_id, state = "CONFIRMED", block_number = inclusion.block_number, "inclusion recorded"));
        }
        moved.iter().filter(|m| **m).count()
    }

    /// The span of a step on the operation, in its trace (when tracing is on).
    async fn op_span(&self, j: &Judged, to: OperationState) -> tracing::Span {
        let span = tracing::info_span!(
            "watcher.record_inclusion",
            opledger.service = "broadcaster",
            op_id = %j.op.op_id,
            to_state = to.as_str(),
        );
        if telemetry::enabled() {
            let stored = self.store.trace_context(j.op.tenant_id, j.op.op_id).await;
            telemetry::parent_on(&span, stored.ok().flatten().as_deref());
        }
        span
    }
}

/// The verdicts on `ops` at `pinned`, and the watcher's steps: the chain is read for all of them
/// at once (a few batched requests per endpoint, not one per operation).
async fn judge_all(
    ops: Vec<Watching>,
    pinned: &Pinned,
    network: &str,
    judgements: &Mutex<HashMap<String, Judgements<(TenantId, OperationId)>>>,
) -> Vec<Judged> {
    let prepared = judge_attempts(ops, network, judgements);
    // One query per operation that has an original attempt and a decodable sender, in order.
    let queries: Vec<Query> = prepared
        .iter()
        .filter_map(|(op, judged)| {
            Some(Query {
                sender: judged.sender?,
                nonce: op.attempts.first()?.signed.nonce,
                attempts: judged.hashes.clone(),
            })
        })
        .collect();
    let mut readings = pinned.read_all(&queries).await.into_iter();
    prepared
        .into_iter()
        .map(|(op, judged)| {
            let verdict = match (op.attempts.first(), judged.sender) {
                (None, _) => Verdict::NeverSigned,
                (Some(original), Some(_)) => {
                    let reading = readings
                        .next()
                        .unwrap_or(Err(opledger_domain::evidence::NoAgreement::Disagreement));
                    decide(&judged.roles, original.signed.nonce, &reading)
                }
                // Undecodable: every role is a defect, whatever the chain says.
                (Some(original), None) => decide(
                    &judged.roles,
                    original.signed.nonce,
                    &Err(opledger_domain::evidence::NoAgreement::Disagreement),
                ),
            };
            if let Verdict::NoVerdict(NoVerdict::NoAgreement(no)) = verdict
                && let Some(network) = op.attempts.first().map(|a| a.network.clone())
            {
                no_evidence().record(&network, reason_label(&no));
            }
            Judged {
                step: watcher_step(verdict),
                verdict,
                op,
            }
        })
        .collect()
}

/// Each operation of `network` with the judgement of its attempts (kept from the network's last
/// pass where unchanged).
fn judge_attempts(
    ops: Vec<Watching>,
    network: &str,
    judgements: &Mutex<HashMap<String, Judgements<(TenantId, OperationId)>>>,
) -> Vec<(Watching, opledger_evm::evidence::Judged)> {
    let mut all = judgements
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let kept = all.entry(network.to_owned()).or_default();
    let prepared: Vec<(Watching, opledger_evm::evidence::Judged)> = ops
        .into_iter()
        .map(|op| {
            let stored: Vec<StoredAttempt<'_>> =
                op.attempts.iter().map(Attempt::as_stored).collect();
            let judged = kept.judge(
                &(op.tenant_id, op.op_id),
                &stored,
                &op.destination,
                op.amount,
            );
            (op, judged)
        })
        .collect();
    kept.end_pass();
    prepared
}

/// The inclusion row for attempt `attempt` of `op` at `inclusion`.
fn inclusion_of(
    op: &Watching,
    attempt: usize,
    inclusion: opledger_domain::evidence::Inclusion,
) -> Option<Inclusion> {
    let attempt = op.attempts.get(attempt)?;
    Some(Inclusion {
        tenant_id: op.tenant_id,
        op_id: op.op_id,
        tx_hash: attempt.signed.tx_hash.clone(),
        block_number: inclusion.block.number,
        block_hash: format!("{:#x}", B256::from(inclusion.block.hash)),
    })
}

/// Of `blocks` (number, stored hash), those the quorum agrees are no longer canonical at the
/// pinned block. Above the pinned block the pass cannot tell (the store leaves those out); the
/// next pass will. The store only holds hashes the watcher or the witness parsed; one that does
/// not parse is left alone. No agreement on a block: no conclusion about it.
async fn gone_blocks(
    network: &str,
    pinned: &Pinned,
    blocks: Vec<(u64, String)>,
) -> std::collections::BTreeSet<(u64, String)> {
    let checked: Vec<((u64, String), BlockRef)> = blocks
        .into_iter()
        .filter(|(number, _)| *number <= pinned.pinned.number)
        .filter_map(|(number, hash)| {
            let parsed = hash.parse::<B256>().ok()?;
            Some((
                (number, hash),
                BlockRef {
                    number,
                    hash: parsed.0,
                },
            ))
        })
        .collect();
    let refs: Vec<BlockRef> = checked.iter().map(|(_, block)| *block).collect();
    let verdicts = pinned.canonical_all(&refs).await;
    let mut gone = std::collections::BTreeSet::new();
    for ((stored, _), verdict) in checked.into_iter().zip(verdicts) {
        match verdict {
            Ok(true) => {}
            Ok(false) => {
                gone.insert(stored);
            }
            Err(no) => no_evidence().record(network, reason_label(&no)),
        }
    }
    gone
}
