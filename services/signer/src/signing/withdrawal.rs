//! Signing an original withdrawal: the order of the checks (hash, approvals, plan), the claim,
//! the checks again under the claim, the persisted attempt, and the ending of a final refusal.

use super::error::{Ending, SignerError};
use super::signer::{Signed, Signer};
use crate::batch::Job;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState};
use opledger_store::StoreError;
use opledger_store::signing::SigningInput;

impl Signer {
    /// Signs an APPROVED withdrawal once; any later call returns the persisted attempt. A refusal
    /// that is final (see [`SignerError::ending`]) also ends the operation: APPROVED ->
    /// FAILED_TERMINAL with an escalation naming its owner and reason, hold kept, so it is
    /// neither retried nor left at the head of anyone's queue.
    pub async fn sign_withdrawal(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Signed, SignerError> {
        let result = self.try_sign_withdrawal(tenant, op).await;
        if let Err(e) = &result
            && let Some(ending) = e.ending()
        {
            self.end(tenant, op, ending).await?;
        }
        result
    }

    /// APPROVED -> FAILED_TERMINAL with an escalation (a lease left expired by a dead claimant is
    /// given back first). An operation another call moved first is left alone.
    async fn end(
        &self,
        tenant: TenantId,
        op: OperationId,
        ending: Ending,
    ) -> Result<(), SignerError> {
        let actor_id = self.config.instance_id.as_str();
        match self
            .store
            .release_claim(tenant, op, None, actor_id, "expired lease reclaimed")
            .await
        {
            Ok(()) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let request = opledger_store::transition::TransitionRequest::new(
            tenant,
            op,
            OperationState::Approved,
            OperationState::FailedTerminal,
            Actor::Signer,
            actor_id,
            "refused by the signer: ended with an owner, hold kept",
        );
        let owner = if ending.security {
            &self.config.security_owner
        } else {
            &self.config.operations_owner
        };
        match self
            .store
            .escalate(&request, owner, ending.reason_code)
            .await
        {
            Ok(()) => {
                tracing::error!(%op, owner = %owner, reason = ending.reason_code, "refused withdrawal ended: FAILED_TERMINAL, hold kept");
                Ok(())
            }
            Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn try_sign_withdrawal(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Signed, SignerError> {
        // An operation that is APPROVED or SIGNING has no attempt yet (the original attempt is
        // persisted in the very transaction that moves SIGNING -> SIGNED), so its attempts are
        // read only when it is past them: one query fewer on every signature.
        let input = self
            .store
            .signing_input(tenant, op)
            .await?
            .ok_or(SignerError::NotFound)?;
        let state = input.operation.state;
        if !matches!(state, OperationState::Approved | OperationState::Signing) {
            // Already signed (by an earlier or a concurrent call): answer with its artifact.
            return match self.stored(tenant, op).await? {
                Some(stored) => Ok(stored),
                None => Err(SignerError::NotSignable {
                    state,
                    retry: false,
                }),
            };
        }
        self.verify(tenant, op, &input).await?;
        self.verify_approvals(tenant, op, &input).await?;
        let (wallet, request) = self.plan(tenant, &input.operation.payload)?;
        let owner = format!(
            "{}:{}",
            self.config.instance_id,
            uuid::Uuid::new_v4().simple()
        );
        if let Err(e) = self.claim(tenant, op, &owner, &input).await {
            // Another call claimed first; if it has finished, its artifact is the answer.
            return match self.stored(tenant, op).await? {
                Some(stored) => Ok(stored),
                None => Err(e),
            };
        }
        opledger_failpoint::hit("sign.after_claim");
        let under_claim = self.verify_under_claim(tenant, op, &owner, &input).await?;
        let network = under_claim.operation.payload.network.as_str();
        let job = Job {
            tenant_id: tenant,
            op_id: op,
            owner: owner.clone(),
            request,
            key: wallet.key.clone(),
            initial_nonce: wallet.initial_nonce,
        };
        self.persist_original(tenant, op, &owner, network, &wallet.address, job)
            .await
    }

    /// Verifies again under the claim held by `owner`: the stored fields must still produce the
    /// approved hash, and evidence that differs from what `input` carried is verified again. On a
    /// refusal the claim is given back. Returns the input read under the claim.
    async fn verify_under_claim(
        &self,
        tenant: TenantId,
        op: OperationId,
        owner: &str,
        input: &SigningInput,
    ) -> Result<SigningInput, SignerError> {
        // Verify again under the claim: the stored fields must still produce the approved hash.
        let under_claim = self
            .store
            .signing_input(tenant, op)
            .await?
            .ok_or(SignerError::NotFound)?;
        // The approvals verified above stand when the claim sees the very same evidence
        // (decisions and trust statement, byte for byte); anything new is verified again.
        let same_evidence =
            under_claim.decisions == input.decisions && under_claim.trust == input.trust;
        let verified = match self.verify(tenant, op, &under_claim).await {
            Ok(()) if same_evidence => Ok(()),
            Ok(()) => self.verify_approvals(tenant, op, &under_claim).await,
            Err(e) => Err(e),
        };
        if let Err(e) = verified {
            self.store
                .release_claim(tenant, op, Some(owner), owner, "verification failed")
                .await?;
            return Err(e);
        }
        Ok(under_claim)
    }

    /// Signs and persists `job` on the lane of `sender` on `network`, under the claim held by
    /// `owner`; a failure gives the claim back.
    async fn persist_original(
        &self,
        tenant: TenantId,
        op: OperationId,
        owner: &str,
        network: &str,
        sender: &str,
        job: Job,
    ) -> Result<Signed, SignerError> {
        // Persisted with the sender's next nonce, in one transaction with the other signatures
        // of this sender that are ready now (see `batch`).
        let persisted = match self
            .lanes
            .persist(network, sender, job)
            .await
            .map_err(|_| SignerError::Interrupted)?
        {
            // Another signer rotated this wallet out: this signer's configuration is out of
            // date. The claim is given back at once, for a signer holding the active wallet.
            Err(StoreError::WalletNotActive) => {
                self.store
                    .release_claim(tenant, op, Some(owner), owner, "wallet not active")
                    .await?;
                return Err(StoreError::WalletNotActive.into());
            }
            other => other?,
        };
        match persisted {
            Ok(attempt) => {
                tracing::info!(%op, nonce = attempt.signed.nonce, released = attempt.released, "withdrawal signed and persisted");
                Ok(Signed {
                    attempt,
                    already_signed: false,
                })
            }
            Err(e) => {
                self.store
                    .release_claim(tenant, op, Some(owner), owner, "signing failed")
                    .await?;
                Err(e.into())
            }
        }
    }
}
