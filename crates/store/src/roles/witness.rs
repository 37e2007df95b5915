//! The store as the witness (`opledger_witness` login): attests or refuses proposed releases
//! (chain evidence and custodian records) and credits.

use crate::credits::{CreditCursor, CreditToWitness};
use crate::custodian_witness::{CustodianCursor, CustodianRefusal, CustodianReleaseToWitness};
use crate::witness::PendingRelease;
use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};

super::role_handle! {
    /// The store as the witness (`opledger_witness` login): attests or refuses proposed releases
    /// and credits: exactly the calls that service makes.
    WitnessStore, witness
}

impl WitnessStore {
    /// See [`Store::credits_to_witness`].
    pub async fn credits_to_witness(
        &self,
        after: Option<&CreditCursor>,
        limit: u32,
    ) -> Result<Vec<CreditToWitness>> {
        self.store.credits_to_witness(after, limit).await
    }

    /// See [`Store::attest_credit`].
    pub async fn attest_credit(
        &self,
        tenant_id: TenantId,
        credit_id: &[u8; 32],
        witness_id: &str,
        block: Option<(u64, [u8; 32])>,
    ) -> Result<bool> {
        self.store
            .attest_credit(tenant_id, credit_id, witness_id, block)
            .await
    }

    /// See [`Store::refuse_credit`].
    pub async fn refuse_credit(
        &self,
        tenant_id: TenantId,
        credit_id: &[u8; 32],
        reason: &str,
        witness_id: &str,
    ) -> Result<()> {
        self.store
            .refuse_credit(tenant_id, credit_id, reason, witness_id)
            .await
    }

    /// See [`Store::oldest_unwitnessed_credit_secs`].
    pub async fn oldest_unwitnessed_credit_secs(&self) -> Result<f64> {
        self.store.oldest_unwitnessed_credit_secs().await
    }

    /// See [`Store::releases_to_witness`].
    pub async fn releases_to_witness(
        &self,
        after: Option<&PendingRelease>,
        limit: u32,
    ) -> Result<Vec<PendingRelease>> {
        self.store.releases_to_witness(after, limit).await
    }

    /// See [`Store::attest_release`].
    pub async fn attest_release(&self, pending: &PendingRelease, witness_id: &str) -> Result<()> {
        self.store.attest_release(pending, witness_id).await
    }

    /// See [`Store::refuse_release`].
    pub async fn refuse_release(
        &self,
        pending: &PendingRelease,
        reason: &str,
        witness_id: &str,
    ) -> Result<()> {
        self.store.refuse_release(pending, reason, witness_id).await
    }

    /// See [`Store::oldest_unwitnessed_secs`].
    pub async fn oldest_unwitnessed_secs(&self) -> Result<Option<f64>> {
        self.store.oldest_unwitnessed_secs().await
    }
}

impl WitnessStore {
    /// See [`Store::custodian_releases_to_witness`].
    pub async fn custodian_releases_to_witness(
        &self,
        after: Option<&CustodianCursor>,
        limit: u32,
    ) -> Result<Vec<CustodianReleaseToWitness>> {
        self.store.custodian_releases_to_witness(after, limit).await
    }

    /// See [`Store::attest_custodian_release`].
    pub async fn attest_custodian_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record_id: i64,
        status: &str,
        answer_sha256: &[u8; 32],
        witness_id: &str,
    ) -> Result<()> {
        self.store
            .attest_custodian_release(
                tenant_id,
                op_id,
                record_id,
                status,
                answer_sha256,
                witness_id,
            )
            .await
    }

    /// See [`Store::refuse_custodian_release`].
    pub async fn refuse_custodian_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record_id: i64,
        refusal: &CustodianRefusal<'_>,
        witness_id: &str,
    ) -> Result<()> {
        self.store
            .refuse_custodian_release(tenant_id, op_id, record_id, refusal, witness_id)
            .await
    }
}

super::shared_calls!(WitnessStore: attempts, bound_elsewhere, credit, trust_statement, withdrawal);
