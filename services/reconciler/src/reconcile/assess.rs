//! Gathering the evidence about one operation ([`Reconciler::assess`]) and an operator's
//! resolution checked against it ([`Reconciler::resolve`]).

use super::Reconciler;
use super::types::{Assessment, ReconcileError, describe};
use opledger_chain::evidence::{NoAgreement, Pinned, no_evidence, reason_label};
use opledger_domain::evidence::{NoVerdict, Resolution, Verdict, decide, resolution_allowed};
use opledger_domain::state::{Actor, OperationState};
use opledger_domain::witness::Principal;
use opledger_evm::evidence::StoredAttempt;
use opledger_store::broadcast::Unresolved;
use opledger_store::signing::Attempt;
use opledger_store::transition::TransitionRequest;

impl Reconciler {
    /// What the chain says about an operation's attempts, read now at a fresh pinned block,
    /// without changing anything.
    pub async fn assess(&self, op: &Unresolved) -> Result<Assessment, ReconcileError> {
        self.assess_at(op, None).await
    }

    pub(super) async fn assess_at(
        &self,
        op: &Unresolved,
        pinned: Option<Result<Pinned, NoAgreement>>,
    ) -> Result<Assessment, ReconcileError> {
        let network = self
            .networks
            .get(&op.network)
            .ok_or_else(|| ReconcileError::NoRpc(op.network.clone()))?;
        let attempts = self.store.attempts(op.tenant_id, op.op_id).await?;
        let Some(original) = attempts.first() else {
            return Ok(Assessment {
                attempts,
                roles: Vec::new(),
                hashes: Vec::new(),
                verdict: Verdict::NeverSigned,
            });
        };
        // A held-back attempt has no bytes for this login (the signed-bytes gate): nothing is
        // judged by content until the signer releases it.
        if attempts.iter().any(|a| !a.released) {
            no_evidence().record(&op.network, "inconsistent");
            return Ok(Assessment {
                attempts,
                roles: Vec::new(),
                hashes: Vec::new(),
                verdict: Verdict::NoVerdict(NoVerdict::Inconsistent),
            });
        }
        let operation = self.store.withdrawal(op.tenant_id, op.op_id).await?;
        let stored: Vec<StoredAttempt<'_>> = attempts.iter().map(Attempt::as_stored).collect();
        let judged = opledger_evm::evidence::judge_payout(&stored, &operation.payload);
        let roles = judged.roles;
        let pinned = match pinned {
            Some(pinned) => pinned,
            None => network.evidence.pin().await.map_err(|e| e.no_agreement()),
        };
        let nonce = original.signed.nonce;
        let mut verdict = match &pinned {
            Ok(pinned) => {
                pinned
                    .verdict(&roles, judged.sender, nonce, &judged.hashes)
                    .await
            }
            Err(no) => decide(&roles, nonce, &Err(*no)),
        };
        // Attempts read before the chain: a replacement persisted (and mined) in between would
        // look like a nonce moved without us. Read them again; any change is no verdict now.
        if !matches!(verdict, Verdict::NoVerdict(_) | Verdict::Tampered { .. })
            && self.store.attempts(op.tenant_id, op.op_id).await?.len() != attempts.len()
        {
            verdict = Verdict::NoVerdict(NoVerdict::Inconsistent);
        }
        match verdict {
            Verdict::NoVerdict(NoVerdict::NoAgreement(no)) => {
                no_evidence().record(&op.network, reason_label(&no));
            }
            Verdict::NoVerdict(NoVerdict::Inconsistent) => {
                no_evidence().record(&op.network, "inconsistent");
            }
            _ => {}
        }
        Ok(Assessment {
            attempts,
            roles,
            hashes: judged.hashes.iter().map(|h| h.0).collect(),
            verdict,
        })
    }

    /// An operator's resolution of an UNKNOWN or FAILED_TERMINAL operation: applied only when the
    /// evidence, read now by the quorum, supports exactly `outcome`
    /// ([`opledger_domain::evidence::resolution_allowed`]).
    pub async fn resolve(
        &self,
        op: &Unresolved,
        outcome: OperationState,
        operator: &str,
        reason: &str,
    ) -> Result<OperationState, ReconcileError> {
        if !matches!(
            op.state,
            OperationState::Unknown | OperationState::FailedTerminal
        ) {
            return Err(ReconcileError::NotUnresolved);
        }
        let assessment = self.assess(op).await?;
        let verdict = assessment.verdict;
        let shows = describe(&verdict);
        let resolution = match outcome {
            OperationState::Confirmed => Resolution::Confirmed,
            OperationState::VerifiedNotSent => Resolution::VerifiedNotSent,
            OperationState::Broadcast => Resolution::Broadcast,
            _ => return Err(ReconcileError::EvidenceMismatch { shows }),
        };
        if !resolution_allowed(verdict, resolution) {
            return Err(ReconcileError::EvidenceMismatch { shows });
        }
        let request = TransitionRequest::new(
            op.tenant_id,
            op.op_id,
            op.state,
            outcome,
            Actor::Operator,
            operator,
            reason,
        );
        match verdict {
            Verdict::Settled { attempt, inclusion } => {
                let inclusion = self.inclusion(op, &assessment.attempts, attempt, inclusion)?;
                self.store.confirm(&request, &inclusion).await?;
            }
            _ => {
                if outcome == OperationState::VerifiedNotSent
                    && !self
                        .propose(op, &assessment, Principal::Operator, operator)
                        .await?
                {
                    return Err(ReconcileError::AwaitingWitness);
                }
                self.store.transition(&request).await?;
            }
        }
        tracing::info!(op_id = %op.op_id, to = outcome.as_str(), "resolved by an operator");
        Ok(outcome)
    }
}
