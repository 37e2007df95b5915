//! Recording what the verdicts allow: BROADCAST -> CONFIRMED (holds settled, inclusions
//! recorded), hand-overs to the reconciler and escalations, each in the operation's trace.

use super::Watcher;
use super::judge::Judged;
use opledger_domain::evidence::{Escalation, EscalationOwner};
use opledger_domain::state::{Actor, OperationState};
use opledger_grpc::telemetry;
use opledger_store::StoreError;
use opledger_store::broadcast::Inclusion;
use opledger_store::transition::TransitionRequest;
use tracing::Instrument as _;

impl Watcher {
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
    pub(super) async fn to_reconciler(&self, j: &Judged) -> bool {
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
    pub(super) async fn escalate(&self, j: &Judged, escalation: Escalation) -> bool {
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
    pub(super) async fn confirm_all(&self, confirmed: &[(Judged, Inclusion)]) -> usize {
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
