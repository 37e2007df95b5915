//! Claiming an operation for signing (a conditional update with a lease), and answering with the
//! attempt an earlier claim persisted.

use super::error::SignerError;
use super::signer::{Signed, Signer};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;
use opledger_store::StoreError;
use opledger_store::signing::SigningInput;
use std::time::Duration;

impl Signer {
    pub(super) async fn claim(
        &self,
        tenant: TenantId,
        op: OperationId,
        owner: &str,
        input: &SigningInput,
    ) -> Result<(), SignerError> {
        let lease = Duration::from_secs(self.config.lease_secs);
        let hash = input.operation.payload_hash;
        match input.operation.state {
            OperationState::Approved => {}
            OperationState::Signing if input.lease_expired => {
                // The previous claimant died before persisting anything: take the claim back.
                self.store
                    .release_claim(tenant, op, None, owner, "expired lease reclaimed")
                    .await?;
            }
            OperationState::Signing => {
                return Err(SignerError::NotSignable {
                    state: OperationState::Signing,
                    retry: true,
                });
            }
            state => {
                return Err(SignerError::NotSignable {
                    state,
                    retry: false,
                });
            }
        }
        match self
            .store
            .claim_for_signing(tenant, op, owner, hash, lease)
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::Conflict {
                current: Some(state),
            }) => Err(SignerError::NotSignable {
                state,
                retry: state == OperationState::Signing,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// The latest persisted attempt, if the operation was signed. One still held back (its
    /// signing commit's answer was lost, or its release failed) is released first when a probe
    /// commit is acknowledged now ([`opledger_store::roles::SignerStore::release_held_of`]); otherwise it is
    /// answered held back, without its bytes.
    pub(super) async fn stored(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Option<Signed>, SignerError> {
        let Some(mut attempt) = self.store.signed_attempts(tenant, op).await?.pop() else {
            return Ok(None);
        };
        if !attempt.released {
            match self.store.release_held_of(tenant, op).await {
                Ok(released) => attempt.released = released.contains(&attempt.attempt),
                Err(e) => {
                    tracing::warn!(%op, error = %e.log_safe(), "cannot release a held-back attempt");
                }
            }
            if !attempt.released {
                tracing::info!(%op, attempt = attempt.attempt, "held back by the signed-bytes gate: answered without its bytes");
            }
        }
        Ok(Some(Signed {
            attempt,
            already_signed: true,
        }))
    }
}
