//! Claims for signing: the sending account and a claimed operation as the signer names them,
//! APPROVED -> SIGNING under a lease, and giving a claim back while no attempt exists.

use crate::transition::{LeaseGuard, TransitionRequest, transition_in};
use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_domain::state::{Actor, OperationState};
use std::time::Duration;

/// A sending account: the tenant's hot wallet on one network.
#[derive(Debug, Clone, Copy)]
pub struct Sender<'a> {
    /// The network id.
    pub network: &'a str,
    /// 0x-prefixed lowercase address.
    pub address: &'a str,
    /// The nonce of its first transaction (the account's on-chain nonce when the wallet was put
    /// in service); later nonces come from the store.
    pub initial_nonce: u64,
}

/// An operation claimed for signing (SIGNING under `owner`'s lease), one item of a batch.
#[derive(Debug, Clone, Copy)]
pub struct SignClaim<'a> {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The lease owner that claimed it.
    pub owner: &'a str,
}

impl Store {
    /// APPROVED -> SIGNING with a lease for `owner`, only while the stored hash is `hash`.
    pub async fn claim_for_signing(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        hash: PayloadHash,
        lease: Duration,
    ) -> Result<()> {
        let mut claim = TransitionRequest::new(
            tenant_id,
            op_id,
            OperationState::Approved,
            OperationState::Signing,
            Actor::Signer,
            owner,
            "claimed for signing",
        );
        claim.expected_hash = Some(hash);
        claim.lease_for = Some(lease);
        self.transition(&claim).await.map(|_| ())
    }

    /// SIGNING -> APPROVED: gives a claim back. With `owner` the lease must be that owner's and
    /// live; without, it must have expired. Refused once any attempt exists.
    pub async fn release_claim(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: Option<&str>,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let (signed,): (bool,) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM tx_attempts WHERE tenant_id = $1 AND op_id = $2)",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_one(&mut *tx)
        .await?;
        if signed {
            return Err(StoreError::Conflict {
                current: Some(OperationState::Signing),
            });
        }
        let mut release = TransitionRequest::new(
            tenant_id,
            op_id,
            OperationState::Signing,
            OperationState::Approved,
            Actor::Signer,
            actor_id,
            reason,
        );
        release.lease_guard = match owner {
            Some(owner) => LeaseGuard::HeldBy(owner),
            None => LeaseGuard::Expired,
        };
        transition_in(&mut tx, &release).await?;
        tx.commit().await?;
        Ok(())
    }
}
