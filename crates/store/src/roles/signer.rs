//! The store as the signer (`opledger_signer` login): claims, reads what it verifies, persists
//! signed bytes, registers its wallets.

use crate::signing::{
    Attempt, NewAttempt, ReplacementError, ReplacementGuard, Sender, SignClaim, SigningInput,
};
use crate::wallets::{Registration, RetireAfter};
use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use std::time::Duration;

super::role_handle! {
    /// The store as the signer (`opledger_signer` login): claims, reads what it verifies, persists
    /// signed bytes, registers its wallets: exactly the calls that service makes.
    SignerStore, signer
}

impl SignerStore {
    /// See [`Store::signed_attempts`].
    pub async fn signed_attempts(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<Attempt>> {
        self.store.signed_attempts(tenant_id, op_id).await
    }

    /// See [`Store::claim_for_signing`].
    pub async fn claim_for_signing(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        hash: PayloadHash,
        lease: Duration,
    ) -> Result<()> {
        self.store
            .claim_for_signing(tenant_id, op_id, owner, hash, lease)
            .await
    }

    /// See [`Store::release_claim`].
    pub async fn release_claim(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: Option<&str>,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        self.store
            .release_claim(tenant_id, op_id, owner, actor_id, reason)
            .await
    }

    /// See [`Store::signing_input`].
    pub async fn signing_input(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<SigningInput>> {
        self.store.signing_input(tenant_id, op_id).await
    }

    /// See [`Store::record_trust_seen`].
    pub async fn record_trust_seen(&self, tenant_id: TenantId, version: u64) -> Result<()> {
        self.store.record_trust_seen(tenant_id, version).await
    }

    /// See [`Store::persist_signed`].
    pub async fn persist_signed<E>(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        sender: &Sender<'_>,
        sign: impl FnOnce(u64) -> std::result::Result<NewAttempt, E>,
    ) -> Result<std::result::Result<Attempt, E>> {
        self.store
            .persist_signed(tenant_id, op_id, owner, sender, sign)
            .await
    }

    /// See [`Store::persist_signed_batch`].
    pub async fn persist_signed_batch<E>(
        &self,
        sender: &Sender<'_>,
        claims: &[SignClaim<'_>],
        sign: impl FnMut(usize, u64) -> std::result::Result<NewAttempt, E>,
    ) -> Result<Option<Vec<Attempt>>> {
        self.store.persist_signed_batch(sender, claims, sign).await
    }

    /// See [`Store::persist_replacement`].
    pub async fn persist_replacement<E>(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        guard: &ReplacementGuard<'_>,
        sign: impl FnOnce(&[Attempt]) -> std::result::Result<NewAttempt, E>,
    ) -> Result<std::result::Result<Attempt, ReplacementError<E>>> {
        self.store
            .persist_replacement(tenant_id, op_id, guard, sign)
            .await
    }

    /// See [`Store::release_held`].
    pub async fn release_held(&self, min_age: Duration, limit: u32) -> Result<usize> {
        self.store.release_held(min_age, limit).await
    }

    /// See [`Store::release_held_of`].
    pub async fn release_held_of(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<u32>> {
        self.store.release_held_of(tenant_id, op_id).await
    }

    /// See [`Store::register_wallets`].
    pub async fn register_wallets(&self, wallets: &[Registration]) -> Result<()> {
        self.store.register_wallets(wallets).await
    }

    /// See [`Store::in_flight_of_sender`].
    pub async fn in_flight_of_sender(
        &self,
        tenant_id: TenantId,
        network: &str,
        sender: &str,
        grace: Duration,
    ) -> Result<u64> {
        self.store
            .in_flight_of_sender(tenant_id, network, sender, grace)
            .await
    }

    /// See [`Store::retire_wallet`].
    pub async fn retire_wallet(
        &self,
        tenant_id: TenantId,
        network: &str,
        sender: &str,
        after: impl Into<RetireAfter>,
    ) -> Result<bool> {
        self.store
            .retire_wallet(tenant_id, network, sender, after)
            .await
    }
}

super::shared_calls!(SignerStore: escalate, record_security_event);
