//! The store as the custodian executor (`opledger_custodian` login): claims the withdrawals a
//! custodian executes, stores their requests, sends and the provider's records, moves them and
//! proposes the releases the witness must attest; reads its gauges for `/metrics`.

use crate::custodian::{CustodianDue, NewRecord, StoredRequest};
use crate::transition::{TransitionRequest, Transitioned};
use crate::{Result, Store};
use opledger_domain::ids::{OperationId, TenantId};
use std::time::Duration;

super::role_handle! {
    /// The store as the custodian executor (`opledger_custodian` login): exactly the calls that
    /// service makes.
    CustodianStore, custodian
}

super::shared_calls!(CustodianStore: bound_elsewhere, confirm, escalate, record_security_event);

impl CustodianStore {
    /// See [`Store::signing_input`]: what the approvals are verified from.
    pub async fn signing_input(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<crate::signing::SigningInput>> {
        self.store.signing_input(tenant_id, op_id).await
    }

    /// See [`Store::custodian_due`].
    pub async fn custodian_due(
        &self,
        follow_every: Duration,
        limit: u32,
        held_back: &[String],
    ) -> Result<Vec<CustodianDue>> {
        self.store
            .custodian_due(follow_every, limit, held_back)
            .await
    }

    /// See [`Store::take_custodian_lease`].
    pub async fn take_custodian_lease(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        lease: Duration,
    ) -> Result<bool> {
        self.store
            .take_custodian_lease(tenant_id, op_id, owner, lease)
            .await
    }

    /// See [`Store::release_custodian_lease`].
    pub async fn release_custodian_lease(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
    ) -> Result<()> {
        self.store
            .release_custodian_lease(tenant_id, op_id, owner)
            .await
    }

    /// See [`Store::record_custodian_escalation`].
    pub async fn record_custodian_escalation(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        reason_code: &str,
    ) -> Result<()> {
        self.store
            .record_custodian_escalation(tenant_id, op_id, owner, reason_code)
            .await
    }

    /// See [`Store::transition`].
    pub async fn transition(&self, request: &TransitionRequest<'_>) -> Result<Transitioned> {
        self.store.transition(request).await
    }

    /// See [`Store::persist_custodian_request`].
    pub async fn persist_custodian_request(
        &self,
        request: &TransitionRequest<'_>,
        stored: &StoredRequest,
    ) -> Result<Transitioned> {
        self.store.persist_custodian_request(request, stored).await
    }

    /// See [`Store::begin_custodian_send`].
    pub async fn begin_custodian_send(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        executor_id: &str,
        first: bool,
    ) -> Result<Option<i32>> {
        self.store
            .begin_custodian_send(tenant_id, op_id, executor_id, first)
            .await
    }

    /// See [`Store::record_custodian_answer`].
    pub async fn record_custodian_answer(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        send_no: i32,
        answer: &str,
        provider_id: Option<&str>,
    ) -> Result<()> {
        self.store
            .record_custodian_answer(tenant_id, op_id, send_no, answer, provider_id)
            .await
    }

    /// See [`Store::record_custodian_record`].
    pub async fn record_custodian_record(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record: &NewRecord<'_>,
        executor_id: &str,
    ) -> Result<i64> {
        self.store
            .record_custodian_record(tenant_id, op_id, record, executor_id)
            .await
    }

    /// See [`Store::propose_custodian_release`].
    pub async fn propose_custodian_release(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        record_id: i64,
        executor_id: &str,
    ) -> Result<()> {
        self.store
            .propose_custodian_release(tenant_id, op_id, record_id, executor_id)
            .await
    }

    /// See [`Store::custodian_withdrawal`].
    pub async fn custodian_withdrawal(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<CustodianDue>> {
        self.store.custodian_withdrawal(tenant_id, op_id).await
    }

    /// See [`Store::bind_custodian_transaction`].
    pub async fn bind_custodian_transaction(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        binding: &crate::custodian_bindings::NewBinding<'_>,
    ) -> Result<crate::custodian_bindings::Bound> {
        self.store
            .bind_custodian_transaction(tenant_id, op_id, binding)
            .await
    }

    /// See [`Store::release_witnessed`].
    pub async fn release_witnessed(&self, tenant_id: TenantId, op_id: OperationId) -> Result<bool> {
        self.store.release_witnessed(tenant_id, op_id).await
    }

    /// See [`Store::custodian_gauges`]: what `/metrics` serves, read at scrape time.
    pub async fn custodian_gauges(&self) -> Result<crate::custodian_metrics::CustodianGauges> {
        self.store.custodian_gauges().await
    }

    /// See [`Store::confirm_custodian`].
    pub async fn confirm_custodian(
        &self,
        request: &crate::transition::TransitionRequest<'_>,
        inclusion: &crate::transition::Inclusion,
    ) -> Result<crate::custodian_bindings::Settled> {
        self.store.confirm_custodian(request, inclusion).await
    }

    /// See [`Store::settle_custodian_unwatched`].
    pub async fn settle_custodian_unwatched(
        &self,
        request: &crate::transition::TransitionRequest<'_>,
        tx_hash: &str,
    ) -> Result<crate::custodian_bindings::Settled> {
        self.store
            .settle_custodian_unwatched(request, tx_hash)
            .await
    }
}
