//! The checks of the evidence before signing (the payload hash recomputed from the stored fields,
//! the approvals against the pinned trust root) and the security events their refusals, and a
//! caller's, record.

use super::error::{Refusal, SignerError, unverified_kind};
use super::signer::Signer;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::operation::Executor;
use opledger_domain::state::Actor;
use opledger_store::signing::SigningInput;
use opledger_trust::Evidence;

impl Signer {
    /// Recomputes the payload hash from the stored fields; it must equal the stored hash and the
    /// hash every stored decision names (and there must be at least one decision).
    pub(super) async fn verify(
        &self,
        tenant: TenantId,
        op: OperationId,
        input: &SigningInput,
    ) -> Result<(), SignerError> {
        if input.operation.executor != Executor::LocalSigner {
            self.store
                .record_security_event(
                    tenant,
                    op,
                    "SIGNER_CUSTODIAN_WITHDRAWAL",
                    Actor::Signer,
                    &self.config.instance_id,
                    "asked to sign a withdrawal that a custodian executes",
                )
                .await?;
            tracing::error!(%op, "refused to sign: a custodian executes this withdrawal");
            return Err(SignerError::CustodianExecuted);
        }
        if Evidence::from(input).payload_hash_approved() {
            return Ok(());
        }
        self.store
            .record_security_event(
                tenant,
                op,
                "SIGNER_HASH_MISMATCH",
                Actor::Signer,
                &self.config.instance_id,
                "payload hash recomputed from stored fields differs from the stored or approved hash",
            )
            .await?;
        tracing::error!(%op, "refused to sign: recomputed payload hash does not match");
        Err(SignerError::HashMismatch)
    }

    /// Verifies every stored decision of the operation against the tenant's trust statement,
    /// itself verified against the administrator keys pinned in this signer's configuration, and
    /// evaluates the signed policy. Anything short is a security event and a refusal.
    pub(super) async fn verify_approvals(
        &self,
        tenant: TenantId,
        op: OperationId,
        input: &SigningInput,
    ) -> Result<(), SignerError> {
        match self.trust.verify(tenant, op, &Evidence::from(input)) {
            Ok(approval) => {
                if let Some(version) = approval.newly_accepted {
                    self.store.record_trust_seen(tenant, version).await?;
                }
                Ok(())
            }
            Err(unverified) => {
                self.store
                    .record_security_event(
                        tenant,
                        op,
                        unverified_kind(unverified),
                        Actor::Signer,
                        &self.config.instance_id,
                        unverified.detail(),
                    )
                    .await?;
                tracing::error!(%op, reason = %unverified, "refused to sign: approvals not verified");
                Err(unverified.into())
            }
        }
    }

    /// Records that `caller` was refused `refusal` on the operation (a security event naming the
    /// caller) and returns the error to answer with.
    pub async fn refuse(
        &self,
        tenant: TenantId,
        op: OperationId,
        caller: &str,
        refusal: Refusal,
    ) -> SignerError {
        let recorded = self
            .store
            .record_security_event(
                tenant,
                op,
                "SIGNER_CALLER_NOT_ALLOWED",
                Actor::Signer,
                caller,
                refusal.detail(),
            )
            .await;
        tracing::warn!(%op, caller, missing = refusal.missing(), reason = %refusal, "caller not allowed");
        match recorded {
            Ok(()) => SignerError::NotAllowed(refusal),
            Err(e) => e.into(),
        }
    }
}
