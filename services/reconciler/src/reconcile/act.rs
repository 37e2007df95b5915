//! The steps the reconciler carries out once the evidence allows them: confirming, moving,
//! escalating, proposing and applying a release, and signing and submitting cancels.

use super::Reconciler;
use super::types::{Assessment, Finding, ReconcileError};
use opledger_chain::SubmitClass;
use opledger_chain::evidence::B256;
use opledger_domain::evidence::{Escalation, EscalationOwner, Verdict};
use opledger_domain::state::{Actor, OperationState};
use opledger_domain::witness::{Principal, ReleaseEvidence};
use opledger_proto::v1 as pb;
use opledger_store::StoreError;
use opledger_store::broadcast::{Inclusion, Unresolved};
use opledger_store::signing::{Attempt, AttemptKind};
use opledger_store::transition::TransitionRequest;

impl Reconciler {
    /// Records the inclusion of attempt `attempt` at `inclusion`: CONFIRMED, hold settled.
    pub(super) async fn confirm(
        &self,
        op: &Unresolved,
        state: OperationState,
        attempts: &[Attempt],
        attempt: usize,
        inclusion: opledger_domain::evidence::Inclusion,
    ) -> Result<Finding, ReconcileError> {
        let inclusion = self.inclusion(op, attempts, attempt, inclusion)?;
        let request = self.request(
            op,
            state,
            OperationState::Confirmed,
            "transfer included at final depth, agreed by the quorum",
        );
        self.store.confirm(&request, &inclusion).await?;
        tracing::info!(op_id = %op.op_id, "reconciled: confirmed");
        Ok(Finding::Confirmed)
    }

    /// Submits a cancel's stored bytes: what was submitted, or waiting while the signed-bytes
    /// gate holds it back.
    pub(super) async fn submit_cancel(
        &self,
        op: &Unresolved,
        cancel: &Attempt,
    ) -> Result<Finding, ReconcileError> {
        Ok(self
            .submit(op, cancel)
            .await?
            .map_or(Finding::Waiting, Finding::CancelSubmitted))
    }

    pub(super) fn request<'a>(
        &'a self,
        op: &Unresolved,
        from: OperationState,
        to: OperationState,
        reason: &'a str,
    ) -> TransitionRequest<'a> {
        TransitionRequest::new(
            op.tenant_id,
            op.op_id,
            from,
            to,
            Actor::Reconciler,
            &self.worker_id,
            reason,
        )
    }

    /// The inclusion to record for attempt `attempt` at `inclusion`.
    pub(super) fn inclusion(
        &self,
        op: &Unresolved,
        attempts: &[Attempt],
        attempt: usize,
        inclusion: opledger_domain::evidence::Inclusion,
    ) -> Result<Inclusion, ReconcileError> {
        let attempt = attempts.get(attempt).ok_or(StoreError::Corrupt {
            what: "attempt index",
        })?;
        Ok(Inclusion {
            tenant_id: op.tenant_id,
            op_id: op.op_id,
            tx_hash: attempt.signed.tx_hash.clone(),
            block_number: inclusion.block.number,
            block_hash: format!("{:#x}", B256::from(inclusion.block.hash)),
        })
    }

    /// FAILED_TERMINAL with the escalation's owner and reason code, hold kept; an escalation to
    /// security is also a security event.
    pub(super) async fn escalate(
        &self,
        op: &Unresolved,
        from: OperationState,
        escalation: Escalation,
    ) -> Result<(), ReconcileError> {
        let owner = match escalation.owner {
            EscalationOwner::Operations => &self.escalation.owner,
            EscalationOwner::Security => &self.escalation.security_owner,
        };
        let request = self.request(
            op,
            from,
            OperationState::FailedTerminal,
            escalation.reason_code,
        );
        self.store
            .escalate(&request, owner, escalation.reason_code)
            .await?;
        if escalation.owner == EscalationOwner::Security {
            self.store
                .record_security_event(
                    op.tenant_id,
                    op.op_id,
                    escalation.reason_code,
                    Actor::Reconciler,
                    &self.worker_id,
                    "chain evidence points to a compromised key or a tampered attempt",
                )
                .await?;
        }
        tracing::error!(op_id = %op.op_id, owner = %owner, reason = escalation.reason_code, "escalated: FAILED_TERMINAL, hold kept");
        Ok(())
    }

    /// VERIFIED_NOT_SENT is reached from UNKNOWN; a BROADCAST operation passes through UNKNOWN.
    /// The release is proposed with the cancel's evidence first, and the move (which releases the
    /// hold) is made only once the witness has attested the same evidence: until then the
    /// operation stays UNKNOWN with its hold, and the next pass looks again.
    pub(super) async fn release(
        &self,
        op: &Unresolved,
        from: OperationState,
        assessment: &Assessment,
    ) -> Result<Finding, ReconcileError> {
        const REASON: &str = "our cancel included at final depth, agreed by the quorum";
        let witnessed = self
            .propose(op, assessment, Principal::Reconciler, &self.worker_id)
            .await?;
        let mut from = from;
        if from == OperationState::Broadcast {
            self.move_op(op, from, OperationState::Unknown, REASON)
                .await?;
            from = OperationState::Unknown;
        }
        if !witnessed {
            tracing::info!(op_id = %op.op_id, "release proposed: awaiting the witness, hold kept");
            return Ok(Finding::AwaitingWitness);
        }
        self.move_op(op, from, OperationState::VerifiedNotSent, REASON)
            .await?;
        Ok(Finding::VerifiedNotSent)
    }

    /// Records the release's evidence (the final cancel, or for an operator a final reverted
    /// attempt) as `principal`'s proposal, and answers whether the database would release the
    /// hold now: true when the operation was never signed or the witness attested that evidence.
    pub(super) async fn propose(
        &self,
        op: &Unresolved,
        assessment: &Assessment,
        principal: Principal,
        principal_id: &str,
    ) -> Result<bool, ReconcileError> {
        let found = match assessment.verdict {
            Verdict::Cancelled { attempt, inclusion }
            | Verdict::Reverted {
                attempt, inclusion, ..
            } => Some((attempt, inclusion.block)),
            _ => None,
        };
        if let Some((attempt, block)) = found {
            let tx_hash = *assessment.hashes.get(attempt).ok_or(StoreError::Corrupt {
                what: "attempt index",
            })?;
            let evidence = ReleaseEvidence { tx_hash, block };
            self.store
                .propose_release(op.tenant_id, op.op_id, principal, principal_id, &evidence)
                .await?;
        }
        Ok(self.store.release_witnessed(op.tenant_id, op.op_id).await?)
    }

    pub(super) async fn move_op(
        &self,
        op: &Unresolved,
        from: OperationState,
        to: OperationState,
        reason: &str,
    ) -> Result<(), ReconcileError> {
        let request = self.request(op, from, to, reason);
        self.store.transition(&request).await?;
        tracing::info!(op_id = %op.op_id, from = from.as_str(), to = to.as_str(), "reconciled");
        Ok(())
    }

    /// Submits exactly the stored bytes of `attempt`; `None` (nothing sent) while the
    /// signed-bytes gate holds it back (its signing commit not seen acknowledged yet).
    pub(super) async fn submit(
        &self,
        op: &Unresolved,
        attempt: &Attempt,
    ) -> Result<Option<SubmitClass>, ReconcileError> {
        if !attempt.released {
            tracing::info!(op_id = %op.op_id, "cancel held back by the signed-bytes gate: not submitted yet");
            return Ok(None);
        }
        let network = self
            .networks
            .get(&op.network)
            .ok_or_else(|| ReconcileError::NoRpc(op.network.clone()))?;
        let class = network
            .rpc
            .send_raw_transaction(&attempt.signed.raw_tx)
            .await;
        tracing::info!(op_id = %op.op_id, class = class.as_str(), "cancel replacement submitted");
        Ok(Some(class))
    }

    /// Asks the signer for a CANCEL replacement and returns it as persisted in the store.
    pub(super) async fn sign_cancel(&self, op: &Unresolved) -> Result<Attempt, ReconcileError> {
        self.signer
            .replace(op.tenant_id, op.op_id, pb::AttemptKind::Cancel)
            .await
            .map_err(|s| {
                ReconcileError::Signer(
                    opledger_grpc::status::reason_of(&s)
                        .unwrap_or_else(|| format!("{:?}", s.code())),
                )
            })?;
        // Only stored bytes are ever submitted.
        self.store
            .attempts(op.tenant_id, op.op_id)
            .await?
            .pop()
            .filter(|a| a.signed.kind == AttemptKind::Cancel)
            .ok_or(ReconcileError::Signer(
                "the cancel was not persisted".to_owned(),
            ))
    }
}
