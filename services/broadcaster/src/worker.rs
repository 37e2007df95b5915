//! The broadcast loop: get APPROVED operations signed, submit the stored bytes of SIGNED ones,
//! and move each by compare-and-swap according to the classified result.

use futures::StreamExt;
use opledger_chain::{Rpc, SubmitClass, Verdict};
use opledger_domain::state::{Actor, OperationState};
use opledger_grpc::telemetry;
use opledger_grpc::telemetry::grpc::TracedChannel;
use opledger_proto::v1 as pb;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_store::broadcast::Due;
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tracing::Instrument as _;

/// What one pass over an operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Submitted; the class and the state the operation moved to.
    Submitted(SubmitClass, OperationState),
    /// Nothing to do now (the signer refused or is busy, another worker moved it, no attempt).
    Skipped,
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

/// A broadcaster worker.
#[derive(Debug, Clone)]
pub struct Broadcaster {
    store: Store,
    signer: SignerServiceClient<TracedChannel>,
    signer_token: String,
    rpcs: HashMap<String, Rpc>,
    worker_id: String,
    submissions: Arc<[AtomicU64; 8]>,
}

impl Broadcaster {
    /// A worker over this store, signer client and RPC endpoints.
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
            rpcs,
            worker_id,
            submissions: Arc::default(),
        }
    }

    /// Works until `stop` resolves: polls for due operations and handles up to `concurrency` at a
    /// time; sleeps `poll` when there is nothing to do.
    pub async fn run(
        &self,
        batch: u32,
        concurrency: usize,
        poll: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        loop {
            let worked = tokio::select! {
                () = &mut stop => return,
                worked = self.tick(batch, concurrency) => worked,
            };
            if worked == 0 {
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(poll) => {}
                }
            }
        }
    }

    /// One pass: handles what is due now; returns how many operations it submitted.
    pub async fn tick(&self, batch: u32, concurrency: usize) -> usize {
        let due = match self.store.due_for_broadcast(batch).await {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read due operations");
                return 0;
            }
        };
        futures::stream::iter(due)
            .map(|d| async move {
                match self.handle(&d).await {
                    Ok(Outcome::Submitted(..)) => 1,
                    Ok(Outcome::Skipped) => 0,
                    Err(e) => {
                        tracing::warn!(op_id = %d.op_id, error = %e, "broadcast deferred");
                        0
                    }
                }
            })
            .buffer_unordered(concurrency)
            .fold(0, |acc, n| async move { acc + n })
            .await
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
            Err(_) => "deferred",
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
        let rpc = self
            .rpcs
            .get(&due.network)
            .ok_or_else(|| BroadcastError::NoRpc(due.network.clone()))?;
        // APPROVED, or SIGNING whose signer died mid-claim: the signer (re)claims and signs once.
        let unsigned = matches!(
            due.state,
            OperationState::Approved | OperationState::Signing
        );
        if unsigned && !self.sign(due).await {
            return Ok(Outcome::Skipped);
        }
        // Only bytes the signer persisted are ever submitted: read them back from the store.
        let Some(latest) = self.store.attempts(due.tenant_id, due.op_id).await?.pop() else {
            return Ok(Outcome::Skipped);
        };
        opledger_failpoint::hit("broadcast.before_submit");
        let class = self.submit(rpc, &latest.signed.raw_tx).await;
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
        for (tenant_id, op_id) in stuck {
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
                continue;
            }
            let latest = match self.store.attempts(tenant_id, op_id).await {
                Ok(mut attempts) => attempts.pop(),
                Err(e) => {
                    tracing::warn!(%op_id, error = %e.log_safe(), "cannot read the bump");
                    continue;
                }
            };
            if let Some(latest) = latest {
                let class = self.submit(rpc, &latest.signed.raw_tx).await;
                span.in_scope(|| tracing::info!(%op_id, attempt = latest.attempt, class = class.as_str(), "fee bump submitted"));
                classes.push(class);
            }
        }
        classes
    }

    /// Submits stored bytes and counts the result's class.
    async fn submit(&self, rpc: &Rpc, raw: &[u8]) -> SubmitClass {
        let class = rpc.send_raw_transaction(raw).await;
        self.submissions[class.index()].fetch_add(1, Ordering::Relaxed);
        class
    }

    /// Submissions so far by class, in [`SubmitClass::ALL`] order.
    pub fn submission_counts(&self) -> Vec<(SubmitClass, u64)> {
        SubmitClass::ALL
            .iter()
            .map(|c| (*c, self.submissions[c.index()].load(Ordering::Relaxed)))
            .collect()
    }

    /// Prometheus text exposition of the submission counters (and this process's gRPC metrics).
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
        out.push_str(&opledger_grpc::metrics::global().render());
        out
    }

    /// Asks the signer to sign (idempotent); false when it cannot now.
    async fn sign(&self, due: &Due) -> bool {
        let mut request = tonic::Request::new(pb::SignWithdrawalRequest {
            tenant_id: due.tenant_id.to_string(),
            withdrawal_id: due.op_id.to_string(),
        });
        if let Ok(value) = format!("Bearer {}", self.signer_token).parse() {
            request.metadata_mut().insert("authorization", value);
        }
        match self.signer.clone().sign_withdrawal(request).await {
            Ok(_) => true,
            Err(status) => {
                let reason = opledger_grpc::status::reason_of(&status).unwrap_or_default();
                tracing::warn!(op_id = %due.op_id, code = ?status.code(), reason, "signer did not sign");
                false
            }
        }
    }
}
