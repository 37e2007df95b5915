//! The store as the operations service (`opledger_operations` login): creates withdrawals with
//! their hold, reads them, proposes credits.

use crate::credits::{CreditRecord, NewProposal, OperatorSignature};
use crate::ledger::Balance;
use crate::operations::{Created, ListQuery, NewWithdrawal};
use crate::{Result, Store};
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::TenantId;
use opledger_domain::operation::Operation;
use opledger_domain::payload::{AccountName, AssetCode, NetworkId, WithdrawalPayload};

super::role_handle! {
    /// The store as the operations service (`opledger_operations` login): creates withdrawals with
    /// their hold, reads them, proposes credits: exactly the calls that service makes.
    OperationsStore, operations
}

impl OperationsStore {
    /// See [`Store::propose_operator_credit`].
    pub async fn propose_operator_credit(
        &self,
        proposal: &NewProposal<'_>,
        signature: &OperatorSignature,
    ) -> Result<(CreditRecord, bool)> {
        self.store
            .propose_operator_credit(proposal, signature)
            .await
    }

    /// See [`Store::add_credit_statement`].
    pub async fn add_credit_statement(
        &self,
        tenant_id: TenantId,
        credit_id: &[u8; 32],
        signature: &OperatorSignature,
    ) -> Result<CreditRecord> {
        self.store
            .add_credit_statement(tenant_id, credit_id, signature)
            .await
    }

    /// See [`Store::pending_credits`].
    pub async fn pending_credits(
        &self,
        tenant_id: TenantId,
        limit: u32,
    ) -> Result<Vec<CreditRecord>> {
        self.store.pending_credits(tenant_id, limit).await
    }

    /// See [`Store::has_executor`].
    pub async fn has_executor(&self, tenant_id: TenantId, network: &NetworkId) -> Result<bool> {
        self.store.has_executor(tenant_id, network).await
    }

    /// See [`Store::created_with_key`].
    pub async fn created_with_key(
        &self,
        key: &IdempotencyKey,
        payload: &WithdrawalPayload,
    ) -> Result<Option<Created>> {
        self.store.created_with_key(key, payload).await
    }

    /// See [`Store::balance`].
    pub async fn balance(
        &self,
        tenant_id: TenantId,
        account: &AccountName,
        asset: &AssetCode,
    ) -> Result<Option<Balance>> {
        self.store.balance(tenant_id, account, asset).await
    }

    /// See [`Store::create_withdrawal_traced`].
    pub async fn create_withdrawal_traced(
        &self,
        new: NewWithdrawal<'_>,
        trace_context: Option<&str>,
    ) -> Result<Created> {
        self.store
            .create_withdrawal_traced(new, trace_context)
            .await
    }

    /// See [`Store::list_withdrawals`].
    pub async fn list_withdrawals(
        &self,
        tenant_id: TenantId,
        query: &ListQuery,
    ) -> Result<Vec<Operation>> {
        self.store.list_withdrawals(tenant_id, query).await
    }
}

super::shared_calls!(OperationsStore: credit, trust_statement, withdrawal);
