//! The broadcast loop: get APPROVED operations signed, submit the stored bytes of SIGNED ones,
//! and move each by compare-and-swap according to the classified result.
//!
//! Work comes from the store's fair queue ([`BroadcasterStore::next_due`]): every tenant's due operations in
//! turn, without those in back-off. [`Broadcaster::run`] starts the next one whenever one of its
//! `concurrency` slots frees up, each tenant within its share of the slots while others have
//! work, so no pass of one tenant's slow calls holds another's back. A pass that cannot move an
//! operation (the signer refused, was unavailable or busy, the call was interrupted, no RPC
//! endpoint) puts it in back-off ([`Backoff`]): retried at once the first time, then after
//! `base`, `2 base`, ... up to `max`. A refusal the signer makes final ends the operation there
//! (FAILED_TERMINAL), which takes it out of the queue and clears its back-off.

mod bump;
mod metrics;
mod run;
mod types;

pub use run::{DRAIN, REFRESH};
pub use types::{BroadcastError, Deferral, DeferralClass, Outcome};

use futures::StreamExt;
use opledger_chain::{Rpc, SubmitClass, Verdict};
use opledger_domain::state::{Actor, OperationState};
use opledger_grpc::client::SignerClient;
use opledger_grpc::telemetry;
use opledger_proto::v1::ErrorReason;
use opledger_store::StoreError;
use opledger_store::broadcast::Due;
use opledger_store::pass::PassLocks;
use opledger_store::queue::{BackOff, Backoff, Queued};
use opledger_store::roles::BroadcasterStore;
use opledger_store::signing::Attempt;
use opledger_store::transition::TransitionRequest;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::Instrument as _;

/// A broadcaster worker.
#[derive(Debug, Clone)]
pub struct Broadcaster {
    store: BroadcasterStore,
    signer: SignerClient,
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
        store: BroadcasterStore,
        signer: SignerClient,
        rpcs: HashMap<String, Rpc>,
        worker_id: String,
    ) -> Broadcaster {
        Broadcaster {
            store,
            signer,
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

    /// Asks the signer to sign (idempotent); why not, when it did not.
    async fn sign(&self, due: &Due) -> Result<(), Deferral> {
        match self.signer.sign(due.tenant_id, due.op_id).await {
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
