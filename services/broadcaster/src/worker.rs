//! The broadcast loop: get APPROVED operations signed, submit the stored bytes of SIGNED ones,
//! and move each by compare-and-swap according to the classified result.
//!
//! Work comes from the store's fair queue ([`Store::next_due`]): every tenant's due operations in
//! turn, without those in back-off. [`Broadcaster::run`] starts the next one whenever one of its
//! `concurrency` slots frees up, each tenant within its share of the slots while others have
//! work, so no pass of one tenant's slow calls holds another's back. A pass that cannot move an
//! operation (the signer refused, was unavailable or busy, the call was interrupted, no RPC
//! endpoint) puts it in back-off ([`Backoff`]): retried at once the first time, then after
//! `base`, `2 base`, ... up to `max`. A refusal the signer makes final ends the operation there
//! (FAILED_TERMINAL), which takes it out of the queue and clears its back-off.

use futures::StreamExt;
use opledger_chain::{Rpc, SubmitClass, Verdict};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState};
use opledger_grpc::telemetry;
use opledger_grpc::telemetry::grpc::TracedChannel;
use opledger_proto::v1 as pb;
use opledger_proto::v1::ErrorReason;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_store::broadcast::Due;
use opledger_store::pass::PassLocks;
use opledger_store::queue::{BackOff, Backoff, Queued};
use opledger_store::signing::Attempt;
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tracing::Instrument as _;

/// The most often [`Broadcaster::run`] reads the queue again while its local copy still holds
/// operations (each read ranks every due operation).
pub const REFRESH: Duration = Duration::from_millis(200);

/// How long [`Broadcaster::run`] lets operations in flight finish once told to stop.
pub const DRAIN: Duration = Duration::from_secs(5);

/// What one pass over an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Submitted; the class and the state the operation moved to.
    Submitted(SubmitClass, OperationState),
    /// Nothing to do: another worker moved it first.
    Skipped,
    /// Not moved now, and why: the queue puts it in back-off.
    Deferred(Deferral),
}

/// Why a pass did not move an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deferral {
    /// The kind of failure.
    pub class: DeferralClass,
    /// The signer's `ErrorInfo` reason, when it gave one.
    pub reason: Option<ErrorReason>,
}

impl Deferral {
    /// A deferral of `class` without a signer reason.
    pub fn of(class: DeferralClass) -> Deferral {
        Deferral {
            class,
            reason: None,
        }
    }

    /// What the back-off row records: the signer's reason, else the class (UPPER_SNAKE).
    pub fn label(&self) -> &'static str {
        match self.reason {
            Some(reason) if reason != ErrorReason::Unspecified => reason.as_str_name(),
            _ => self.class.as_reason(),
        }
    }
}

/// The kinds of failure that defer an operation; every one of them puts it in back-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferralClass {
    /// The signer could not be reached or is not serving (UNAVAILABLE, a transport failure).
    SignerUnavailable,
    /// The call ended without an answer (DEADLINE_EXCEEDED, CANCELLED).
    Interrupted,
    /// Another signer holds the claim, or the operation moved meanwhile (ABORTED, for example
    /// `NOT_SIGNABLE` with a live lease).
    SignerBusy,
    /// The signer will not sign it now (FAILED_PRECONDITION and kin: the fee cap, its
    /// configuration, the approvals). A refusal the signer makes final also ends the operation.
    SignerRefused,
    /// The signer refused this broadcaster (UNAUTHENTICATED, PERMISSION_DENIED).
    CallerRefused,
    /// Any other answer of the signer.
    SignerFailed,
    /// SIGNED, and yet no stored attempt to submit.
    NoAttempt,
    /// The latest stored attempt is held back by the signed-bytes gate: its signing commit was
    /// not seen acknowledged yet (the signer's sweep releases it after a probe commit).
    NotReleased,
    /// No RPC endpoint for the operation's network in this broadcaster's configuration.
    NoRpc,
    /// The store failed while working on it.
    Store,
}

impl DeferralClass {
    /// Every class, in metric order.
    pub const ALL: [DeferralClass; 10] = [
        DeferralClass::SignerUnavailable,
        DeferralClass::Interrupted,
        DeferralClass::SignerBusy,
        DeferralClass::SignerRefused,
        DeferralClass::CallerRefused,
        DeferralClass::SignerFailed,
        DeferralClass::NoAttempt,
        DeferralClass::NotReleased,
        DeferralClass::NoRpc,
        DeferralClass::Store,
    ];

    /// The class of a signer's answer. Every code defers (and so backs off): the decision is a
    /// match without a catch-all, so a new code forces one.
    pub fn of_signer(code: tonic::Code) -> DeferralClass {
        use tonic::Code;
        match code {
            Code::Unavailable => DeferralClass::SignerUnavailable,
            Code::DeadlineExceeded | Code::Cancelled => DeferralClass::Interrupted,
            Code::Aborted => DeferralClass::SignerBusy,
            Code::FailedPrecondition
            | Code::InvalidArgument
            | Code::NotFound
            | Code::OutOfRange => DeferralClass::SignerRefused,
            Code::Unauthenticated | Code::PermissionDenied => DeferralClass::CallerRefused,
            Code::Ok
            | Code::Unknown
            | Code::AlreadyExists
            | Code::ResourceExhausted
            | Code::Unimplemented
            | Code::Internal
            | Code::DataLoss => DeferralClass::SignerFailed,
        }
    }

    /// The metric label (lowercase).
    pub fn as_str(self) -> &'static str {
        match self {
            DeferralClass::SignerUnavailable => "signer_unavailable",
            DeferralClass::Interrupted => "interrupted",
            DeferralClass::SignerBusy => "signer_busy",
            DeferralClass::SignerRefused => "signer_refused",
            DeferralClass::CallerRefused => "caller_refused",
            DeferralClass::SignerFailed => "signer_failed",
            DeferralClass::NoAttempt => "no_attempt",
            DeferralClass::NotReleased => "not_released",
            DeferralClass::NoRpc => "no_rpc",
            DeferralClass::Store => "store",
        }
    }

    /// The back-off row's reason when the signer gave none (UPPER_SNAKE).
    pub fn as_reason(self) -> &'static str {
        match self {
            DeferralClass::SignerUnavailable => "SIGNER_UNAVAILABLE",
            DeferralClass::Interrupted => "INTERRUPTED",
            DeferralClass::SignerBusy => "SIGNER_BUSY",
            DeferralClass::SignerRefused => "SIGNER_REFUSED",
            DeferralClass::CallerRefused => "CALLER_REFUSED",
            DeferralClass::SignerFailed => "SIGNER_FAILED",
            DeferralClass::NoAttempt => "NO_ATTEMPT",
            DeferralClass::NotReleased => "NOT_RELEASED",
            DeferralClass::NoRpc => "NO_RPC",
            DeferralClass::Store => "STORE",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why an operation could not be worked on (it stays where it is and is retried).
#[derive(Debug, thiserror::Error)]
pub enum BroadcastError {
    /// No RPC endpoint for the operation's network.
    #[error("no rpc endpoint configured for network {0}")]
    NoRpc(String),
    /// The store failed.
    #[error("store: {}", .0.log_safe())]
    Store(#[from] StoreError),
}

/// The operations [`Broadcaster::run`] has in flight, by task, operation and tenant.
#[derive(Debug, Default)]
struct InFlight {
    by_task: HashMap<tokio::task::Id, (OperationId, TenantId)>,
    ops: HashSet<OperationId>,
    per_tenant: HashMap<TenantId, usize>,
}

impl InFlight {
    fn contains(&self, op: OperationId) -> bool {
        self.ops.contains(&op)
    }

    fn start(&mut self, task: tokio::task::Id, op: OperationId, tenant: TenantId) {
        self.by_task.insert(task, (op, tenant));
        self.ops.insert(op);
        *self.per_tenant.entry(tenant).or_default() += 1;
    }

    fn finish(&mut self, task: tokio::task::Id) {
        let Some((op, tenant)) = self.by_task.remove(&task) else {
            return;
        };
        self.ops.remove(&op);
        if let Some(n) = self.per_tenant.get_mut(&tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_tenant.remove(&tenant);
            }
        }
    }

    /// Where in `queue` the next operation to start is: the first one not in flight whose tenant
    /// holds fewer than its share of the `concurrency` slots. The slots are shared equally by the
    /// tenants with work queued or in flight, so a tenant alone may use them all, and one
    /// tenant's slow or refused calls (which also occupy the signer's connections) never take
    /// every slot from another tenant's withdrawals.
    fn next(&self, queue: &VecDeque<Queued>, concurrency: usize) -> Option<usize> {
        let tenants: HashSet<TenantId> = queue
            .iter()
            .map(|q| q.due.tenant_id)
            .chain(self.per_tenant.keys().copied())
            .collect();
        let share = fair_share(concurrency, tenants.len());
        queue.iter().position(|q| {
            !self.ops.contains(&q.due.op_id)
                && self.per_tenant.get(&q.due.tenant_id).copied().unwrap_or(0) < share
        })
    }
}

/// How often [`Broadcaster::run`] reads the queue again while a slot is free: every `poll` when
/// its local copy is used up, at most every [`REFRESH`] (or `poll`, if longer) while it still
/// holds operations, so that another tenant's new withdrawal is seen without a full read per
/// finished operation.
fn refresh_after(poll: Duration, queue: &VecDeque<Queued>) -> Duration {
    if queue.is_empty() {
        poll
    } else {
        poll.max(REFRESH)
    }
}

/// Each tenant's share of `concurrency` slots among `tenants` (rounded up, at least one).
fn fair_share(concurrency: usize, tenants: usize) -> usize {
    concurrency.div_ceil(tenants.max(1)).max(1)
}

/// A broadcaster worker.
#[derive(Debug, Clone)]
pub struct Broadcaster {
    store: Store,
    signer: SignerServiceClient<TracedChannel>,
    signer_token: String,
    rpcs: Arc<HashMap<String, Rpc>>,
    worker_id: String,
    backoff: Backoff,
    pass_locks: Option<PassLocks>,
    submissions: Arc<[AtomicU64; 8]>,
    deferrals: Arc<[AtomicU64; DeferralClass::ALL.len()]>,
}

impl Broadcaster {
    /// A worker over this store, signer client and RPC endpoints, with the default back-off
    /// (see [`Broadcaster::with_backoff`]).
    pub fn new(
        store: Store,
        signer: SignerServiceClient<TracedChannel>,
        signer_token: String,
        rpcs: HashMap<String, Rpc>,
        worker_id: String,
    ) -> Broadcaster {
        Broadcaster {
            store,
            signer,
            signer_token,
            rpcs: Arc::new(rpcs),
            worker_id,
            backoff: crate::Config::default().backoff(),
            pass_locks: None,
            submissions: Arc::default(),
            deferrals: Arc::default(),
        }
    }

    /// The same worker with this back-off for operations a pass could not move.
    pub fn with_backoff(mut self, backoff: Backoff) -> Broadcaster {
        self.backoff = backoff;
        self
    }

    /// The same worker taking each operation's pass lock before working on it
    /// ([`PassLocks::try_lock`]), so that of several broadcasters on one database only one signs
    /// and submits it; without, two that read the same queue may both submit the same bytes.
    pub fn with_pass_locks(mut self, locks: PassLocks) -> Broadcaster {
        self.pass_locks = Some(locks);
        self
    }

    /// Works until `stop` resolves, keeping up to `concurrency` operations in flight: whenever
    /// one finishes, the next due one starts, each tenant within its share of the slots while
    /// others have work. Due operations come from the fair queue, read again when the local copy
    /// is used up (at once if the last read was a full batch, else after `poll`) and every
    /// `poll` or [`REFRESH`], whichever is longer, while it is not; so a tenant's new
    /// withdrawal waits for one such read and one free slot, never for a whole pass of another
    /// tenant's slow refusals. On `stop` it starts nothing more and lets what is in flight finish
    /// for up to [`DRAIN`].
    pub async fn run(
        &self,
        batch: u32,
        concurrency: usize,
        poll: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let concurrency = concurrency.max(1);
        // Each operation is worked on in its own task, so reading the queue never holds up the
        // operations in flight; `in_flight` keeps one from being started twice and each tenant
        // within its share of the slots.
        let mut running: JoinSet<()> = JoinSet::new();
        let mut in_flight = InFlight::default();
        let mut queue: VecDeque<Queued> = VecDeque::new();
        // When the queue was last read, and whether it had more than one batch to give.
        let mut read: Option<(Instant, bool)> = None;
        loop {
            if running.len() < concurrency {
                let stale = read.is_none_or(|(at, more)| {
                    at.elapsed() >= refresh_after(poll, &queue) || (more && queue.is_empty())
                });
                if stale {
                    let due = tokio::select! {
                        () = &mut stop => break,
                        due = self.store.next_due(batch) => due,
                    };
                    let more = match due {
                        Ok(due) => {
                            let full = due.len() >= usize::try_from(batch).unwrap_or(usize::MAX);
                            queue = due
                                .into_iter()
                                .filter(|q| !in_flight.contains(q.due.op_id))
                                .collect();
                            full && !queue.is_empty()
                        }
                        Err(e) => {
                            tracing::warn!(error = %e.log_safe(), "cannot read due operations");
                            queue.clear();
                            false
                        }
                    };
                    read = Some((Instant::now(), more));
                }
                while running.len() < concurrency {
                    let Some(queued) = in_flight
                        .next(&queue, concurrency)
                        .and_then(|at| queue.remove(at))
                    else {
                        break;
                    };
                    let (op_id, tenant_id) = (queued.due.op_id, queued.due.tenant_id);
                    let worker = self.clone();
                    let task = running.spawn(async move {
                        worker.work(&queued).await;
                    });
                    in_flight.start(task.id(), op_id, tenant_id);
                }
            }
            let next_read = read.map_or(Duration::ZERO, |(at, _)| {
                refresh_after(poll, &queue).saturating_sub(at.elapsed())
            });
            tokio::select! {
                () = &mut stop => break,
                Some(done) = running.join_next_with_id(), if !running.is_empty() => {
                    let id = match done {
                        Ok((id, ())) => id,
                        Err(e) => {
                            tracing::error!(error = %e, "broadcast task failed");
                            e.id()
                        }
                    };
                    in_flight.finish(id);
                }
                () = tokio::time::sleep(next_read), if running.len() < concurrency => {}
            }
        }
        let drained = tokio::time::timeout(DRAIN, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("stopped with operations still in flight");
            running.abort_all();
        }
    }

    /// One pass: handles what the fair queue says is due now (each tenant in turn, nothing in
    /// back-off), `concurrency` at a time, and puts what it could not move in back-off; returns
    /// how many operations it submitted.
    pub async fn tick(&self, batch: u32, concurrency: usize) -> usize {
        let due = match self.store.next_due(batch).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read due operations");
                return 0;
            }
        };
        futures::stream::iter(due)
            .map(|queued| async move { usize::from(self.work(&queued).await) })
            .buffer_unordered(concurrency.max(1))
            .fold(0, |acc, n| async move { acc + n })
            .await
    }

    /// Handles one queued operation and puts it in back-off when it could not be moved; true
    /// when it was submitted.
    async fn work(&self, queued: &Queued) -> bool {
        let deferral = match self.handle(&queued.due).await {
            Ok(Outcome::Submitted(..)) => return true,
            Ok(Outcome::Skipped) => return false,
            Ok(Outcome::Deferred(deferral)) => deferral,
            Err(e) => {
                tracing::warn!(op_id = %queued.due.op_id, error = %e, "broadcast deferred");
                Deferral::of(match e {
                    BroadcastError::NoRpc(_) => DeferralClass::NoRpc,
                    BroadcastError::Store(_) => DeferralClass::Store,
                })
            }
        };
        self.defer(queued, deferral).await;
        false
    }

    /// Puts an operation a pass could not move in back-off, counted by class.
    async fn defer(&self, queued: &Queued, deferral: Deferral) {
        self.deferrals[deferral.class.index()].fetch_add(1, Ordering::Relaxed);
        let failures = queued.failures.saturating_add(1);
        let retry_in = self.backoff.delay(failures);
        let recorded = self
            .store
            .back_off(&BackOff {
                tenant_id: queued.due.tenant_id,
                op_id: queued.due.op_id,
                failures,
                retry_in,
                reason: deferral.label(),
            })
            .await;
        match recorded {
            Ok(_) => tracing::info!(
                op_id = %queued.due.op_id,
                class = deferral.class.as_str(),
                reason = deferral.label(),
                failures,
                retry_in_ms = u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX),
                "operation in back-off"
            ),
            Err(e) => {
                tracing::warn!(
                    op_id = %queued.due.op_id,
                    error = %e.log_safe(),
                    "cannot record the back-off"
                );
            }
        }
    }

    /// Moves one operation as far as the broadcaster may, in a span of the operation's trace.
    pub async fn handle(&self, due: &Due) -> Result<Outcome, BroadcastError> {
        let span = tracing::info_span!(
            "broadcaster.handle",
            opledger.service = "broadcaster",
            op_id = %due.op_id,
            from_state = due.state.as_str(),
            outcome = tracing::field::Empty,
        );
        self.join_trace(&span, due.tenant_id, due.op_id).await;
        let result = self.step(due).instrument(span.clone()).await;
        let outcome = match &result {
            Ok(Outcome::Submitted(class, _)) => class.as_str(),
            Ok(Outcome::Skipped) => "skipped",
            Ok(Outcome::Deferred(_)) | Err(_) => "deferred",
        };
        span.record("outcome", outcome);
        result
    }

    /// Parents `span` on the trace context stored with the operation (when tracing is on).
    async fn join_trace(
        &self,
        span: &tracing::Span,
        tenant_id: opledger_domain::ids::TenantId,
        op_id: opledger_domain::ids::OperationId,
    ) {
        if telemetry::enabled() {
            let stored = self.store.trace_context(tenant_id, op_id).await;
            telemetry::parent_on(span, stored.ok().flatten().as_deref());
        }
    }

    async fn step(&self, due: &Due) -> Result<Outcome, BroadcastError> {
        let Some(locks) = &self.pass_locks else {
            return self.pass(due).await;
        };
        // Another broadcaster's pass holds it: that one moves it.
        let Some(lock) = locks.try_lock(due.tenant_id, due.op_id).await? else {
            return Ok(Outcome::Skipped);
        };
        // The queue was read before the lock: the pass starts from the state found under it (a
        // pass that finished meanwhile moved it on, one that died left it signed or not).
        let state = lock.state;
        let result = if matches!(
            state,
            OperationState::Approved | OperationState::Signing | OperationState::Signed
        ) {
            let now = Due {
                state,
                ..due.clone()
            };
            self.pass(&now).await
        } else {
            Ok(Outcome::Skipped)
        };
        lock.release().await;
        result
    }

    /// One pass: signs if need be, submits the stored bytes and records the result.
    async fn pass(&self, due: &Due) -> Result<Outcome, BroadcastError> {
        let rpc = self
            .rpcs
            .get(&due.network)
            .ok_or_else(|| BroadcastError::NoRpc(due.network.clone()))?;
        // APPROVED, or SIGNING whose signer died mid-claim: the signer (re)claims and signs once.
        let unsigned = matches!(
            due.state,
            OperationState::Approved | OperationState::Signing
        );
        if unsigned && let Err(deferral) = self.sign(due).await {
            return Ok(Outcome::Deferred(deferral));
        }
        // Only bytes the signer persisted are ever submitted: read them back from the store.
        let Some(latest) = self.store.attempts(due.tenant_id, due.op_id).await?.pop() else {
            return Ok(Outcome::Deferred(Deferral::of(DeferralClass::NoAttempt)));
        };
        opledger_failpoint::hit("broadcast.before_submit");
        let Some(class) = self.submit(rpc, &latest).await else {
            return Ok(Outcome::Deferred(Deferral::of(DeferralClass::NotReleased)));
        };
        opledger_failpoint::hit("broadcast.after_submit");
        let to = match class.verdict() {
            Verdict::Broadcast => OperationState::Broadcast,
            Verdict::Unknown => OperationState::Unknown,
        };
        let reason = format!("submission {}", class.as_str());
        let request = TransitionRequest::new(
            due.tenant_id,
            due.op_id,
            OperationState::Signed,
            to,
            Actor::Broadcaster,
            &self.worker_id,
            &reason,
        );
        match self.store.transition(&request).await {
            Ok(_) => {
                tracing::info!(op_id = %due.op_id, class = class.as_str(), state = to.as_str(), "submitted");
                Ok(Outcome::Submitted(class, to))
            }
            // Another worker recorded its own submission of the same bytes first.
            Err(StoreError::Conflict { .. }) => Ok(Outcome::Skipped),
            Err(e) => Err(e.into()),
        }
    }

    /// Fee-bumps BROADCAST transfers on `network` whose latest attempt is older than
    /// `older_than_secs`: the signer persists the replacement (same nonce, recipient and amount,
    /// fees up, never above the payload's fee cap) and only its stored bytes are submitted. Returns
    /// the submission classes; an operation at its fee cap is left as it is.
    pub async fn bump_stuck(
        &self,
        network: &str,
        older_than_secs: u64,
        limit: u32,
    ) -> Vec<SubmitClass> {
        let Some(rpc) = self.rpcs.get(network) else {
            return Vec::new();
        };
        let stuck = match self.store.stuck(network, older_than_secs, limit).await {
            Ok(stuck) => stuck,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read stuck operations");
                return Vec::new();
            }
        };
        let mut classes = Vec::new();
        let older_than = Duration::from_secs(older_than_secs);
        for (tenant_id, op_id) in stuck {
            let Some(locks) = &self.pass_locks else {
                classes.extend(self.bump(rpc, tenant_id, op_id).await);
                continue;
            };
            // Another broadcaster may be bumping it, or have just bumped it: decide under the
            // operation's pass lock, on the state and latest attempt found there.
            let lock = match locks.try_lock(tenant_id, op_id).await {
                Ok(Some(lock)) => lock,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(%op_id, error = %e.log_safe(), "cannot lock the fee bump");
                    continue;
                }
            };
            if lock.state == OperationState::Broadcast
                && lock.latest_attempt_age.is_some_and(|age| age >= older_than)
            {
                classes.extend(self.bump(rpc, tenant_id, op_id).await);
            }
            lock.release().await;
        }
        classes
    }

    /// Gets one fee bump signed and submits its stored bytes; its submission's class.
    async fn bump(
        &self,
        rpc: &Rpc,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Option<SubmitClass> {
        let mut request = tonic::Request::new(pb::SignReplacementRequest {
            tenant_id: tenant_id.to_string(),
            withdrawal_id: op_id.to_string(),
            kind: pb::AttemptKind::FeeBump as i32,
        });
        if let Ok(value) = format!("Bearer {}", self.signer_token).parse() {
            request.metadata_mut().insert("authorization", value);
        }
        let span = tracing::info_span!(
            "broadcaster.bump",
            opledger.service = "broadcaster",
            %op_id
        );
        self.join_trace(&span, tenant_id, op_id).await;
        let mut signer = self.signer.clone();
        let bumped = signer.sign_replacement(request).instrument(span.clone());
        if let Err(status) = bumped.await {
            let reason = opledger_grpc::status::reason_of(&status).unwrap_or_default();
            tracing::info!(%op_id, reason, "no fee bump");
            return None;
        }
        let latest = match self.store.attempts(tenant_id, op_id).await {
            Ok(mut attempts) => attempts.pop(),
            Err(e) => {
                tracing::warn!(%op_id, error = %e.log_safe(), "cannot read the bump");
                return None;
            }
        };
        let latest = latest?;
        let Some(class) = self.submit(rpc, &latest).await else {
            tracing::info!(%op_id, "fee bump held back by the signed-bytes gate: not submitted yet");
            return None;
        };
        span.in_scope(|| tracing::info!(%op_id, attempt = latest.attempt, class = class.as_str(), "fee bump submitted"));
        Some(class)
    }

    /// Submits an attempt's stored bytes and counts the result's class; `None` (nothing sent)
    /// while the signed-bytes gate holds the attempt back.
    async fn submit(&self, rpc: &Rpc, attempt: &Attempt) -> Option<SubmitClass> {
        if !attempt.released {
            return None;
        }
        let class = rpc.send_raw_transaction(&attempt.signed.raw_tx).await;
        self.submissions[class.index()].fetch_add(1, Ordering::Relaxed);
        Some(class)
    }

    /// Submissions so far by class, in [`SubmitClass::ALL`] order.
    pub fn submission_counts(&self) -> Vec<(SubmitClass, u64)> {
        SubmitClass::ALL
            .iter()
            .map(|c| (*c, self.submissions[c.index()].load(Ordering::Relaxed)))
            .collect()
    }

    /// Passes that deferred an operation so far, by class, in [`DeferralClass::ALL`] order.
    pub fn deferral_counts(&self) -> Vec<(DeferralClass, u64)> {
        DeferralClass::ALL
            .iter()
            .map(|c| (*c, self.deferrals[c.index()].load(Ordering::Relaxed)))
            .collect()
    }

    /// Prometheus text exposition of the submission and deferral counters (and this process's
    /// gRPC metrics).
    pub fn metrics(&self) -> String {
        let mut out = String::from(
            "# HELP opledger_submissions_total eth_sendRawTransaction results by class.\n\
             # TYPE opledger_submissions_total counter\n",
        );
        for (class, count) in self.submission_counts() {
            out.push_str(&format!(
                "opledger_submissions_total{{class=\"{}\"}} {count}\n",
                class.as_str()
            ));
        }
        out.push_str(
            "# HELP opledger_broadcast_deferrals_total Passes that could not move an operation \
             (each puts it in back-off), by class.\n\
             # TYPE opledger_broadcast_deferrals_total counter\n",
        );
        for (class, count) in self.deferral_counts() {
            out.push_str(&format!(
                "opledger_broadcast_deferrals_total{{class=\"{}\"}} {count}\n",
                class.as_str()
            ));
        }
        out.push_str(&opledger_grpc::metrics::global().render());
        out
    }

    /// [`Broadcaster::metrics`] with the back-off gauges read from the database at scrape time
    /// (what every replica sees): due operations waiting in back-off, and the longest run of
    /// failed passes. A store failure leaves the gauges out of this scrape.
    pub async fn scrape(&self) -> String {
        let mut out = self.metrics();
        match self.store.backoff_summary().await {
            Ok(summary) => out.push_str(&format!(
                "# HELP opledger_broadcast_backoff_operations Due operations waiting in back-off.\n\
                 # TYPE opledger_broadcast_backoff_operations gauge\n\
                 opledger_broadcast_backoff_operations {}\n\
                 # HELP opledger_broadcast_backoff_max_failures Most consecutive failed passes \
                 of a due operation.\n\
                 # TYPE opledger_broadcast_backoff_max_failures gauge\n\
                 opledger_broadcast_backoff_max_failures {}\n",
                summary.waiting, summary.max_failures
            )),
            Err(e) => tracing::warn!(error = %e.log_safe(), "cannot read the back-off gauges"),
        }
        out.push_str(&opledger_chain::evidence::no_evidence().render("broadcaster"));
        out
    }

    /// Asks the signer to sign (idempotent); why not, when it did not.
    async fn sign(&self, due: &Due) -> Result<(), Deferral> {
        let mut request = tonic::Request::new(pb::SignWithdrawalRequest {
            tenant_id: due.tenant_id.to_string(),
            withdrawal_id: due.op_id.to_string(),
        });
        if let Ok(value) = format!("Bearer {}", self.signer_token).parse() {
            request.metadata_mut().insert("authorization", value);
        }
        match self.signer.clone().sign_withdrawal(request).await {
            Ok(_) => Ok(()),
            Err(status) => {
                let reason = opledger_grpc::status::reason_of(&status);
                tracing::warn!(
                    op_id = %due.op_id,
                    code = ?status.code(),
                    reason = reason.as_deref().unwrap_or_default(),
                    "signer did not sign"
                );
                Err(Deferral {
                    class: DeferralClass::of_signer(status.code()),
                    reason: reason.as_deref().and_then(ErrorReason::from_str_name),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(tenant: TenantId) -> Queued {
        Queued {
            due: Due {
                tenant_id: tenant,
                op_id: OperationId::new(),
                state: OperationState::Approved,
                network: "anvil".into(),
            },
            failures: 0,
        }
    }

    /// Starts what [`InFlight::next`] picks until it picks nothing; the tenants started, in order.
    fn fill(
        in_flight: &mut InFlight,
        queue: &mut VecDeque<Queued>,
        concurrency: usize,
    ) -> Vec<TenantId> {
        let mut started = Vec::new();
        while in_flight.ops.len() < concurrency {
            let Some(at) = in_flight.next(queue, concurrency) else {
                break;
            };
            let Some(q) = queue.remove(at) else { break };
            in_flight.start(task_id(), q.due.op_id, q.due.tenant_id);
            started.push(q.due.tenant_id);
        }
        started
    }

    /// A fresh task id (ids come only from the runtime, unique in the process).
    fn task_id() -> tokio::task::Id {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(async { tokio::spawn(async {}).id() })
    }

    #[test]
    fn each_tenant_gets_an_equal_share_of_the_slots_and_one_alone_gets_them_all() {
        assert_eq!(fair_share(8, 0), 8);
        assert_eq!(fair_share(8, 1), 8);
        assert_eq!(fair_share(8, 2), 4);
        assert_eq!(fair_share(8, 3), 3);
        assert_eq!(fair_share(8, 9), 1);
        assert_eq!(fair_share(16, 8), 2);
        assert_eq!(fair_share(0, 3), 1);
    }

    #[test]
    fn a_tenant_with_many_due_operations_leaves_slots_to_another() {
        let (a, b) = (TenantId::new(), TenantId::new());
        // a's eight come first in the queue, b's one last.
        let mut queue: VecDeque<Queued> = (0..8).map(|_| queued(a)).collect();
        queue.push_back(queued(b));
        let mut in_flight = InFlight::default();
        let started = fill(&mut in_flight, &mut queue, 8);
        assert_eq!(
            started,
            [a, a, a, a, b],
            "a stops at its share, b is not left behind"
        );
        assert_eq!(queue.len(), 4);

        // Alone, a tenant may use every slot.
        let mut alone: VecDeque<Queued> = (0..10).map(|_| queued(a)).collect();
        let mut in_flight = InFlight::default();
        assert_eq!(fill(&mut in_flight, &mut alone, 8).len(), 8);
    }

    #[test]
    fn an_operation_in_flight_is_never_started_again_and_a_finished_slot_is_reused() {
        let a = TenantId::new();
        let first = queued(a);
        let mut in_flight = InFlight::default();
        let task = task_id();
        in_flight.start(task, first.due.op_id, a);
        let queue: VecDeque<Queued> = VecDeque::from([first.clone()]);
        assert_eq!(in_flight.next(&queue, 8), None, "already in flight");
        in_flight.finish(task);
        assert!(!in_flight.contains(first.due.op_id));
        assert_eq!(in_flight.next(&queue, 8), Some(0));
        assert!(in_flight.per_tenant.is_empty());
    }
}
