//! What the executor stores and concludes from a provider's record: the record itself, a
//! record that differs from the request (a security event), and the settlement of a record's
//! transaction from the chain.

use super::{Executor, OWNER};
use crate::chain::{Approved, ChainSays};
use opledger_custodian::{LookupOutcome, TransferRequest};
use opledger_domain::custodian::{Lookup, ProviderStatus};
use opledger_domain::state::{Actor, OperationState as S};
use opledger_store::StoreError;
use opledger_store::custodian::{CustodianDue, NewRecord};
use opledger_store::custodian_bindings::Settled;
use opledger_store::transition::Inclusion;

impl Executor {
    /// Settles a withdrawal whose provider named transaction `hash`, once the chain shows it paid
    /// the approved transfer at final depth (or, on an unwatched network, once the provider's
    /// record is COMPLETED). A record final for the provider (`status`) whose transaction the
    /// chain still does not show final [`Cadence::stuck_after`] after the request is escalated to
    /// an operator (dropped, or reorganized away); the funds stay held.
    pub(super) async fn settle(
        &self,
        due: &CustodianDue,
        request: &TransferRequest,
        hash: opledger_domain::evidence::Hash32,
        status: ProviderStatus,
    ) -> Result<(), StoreError> {
        use opledger_domain::custodian::StatusClass;
        let completed = status == ProviderStatus::Completed;
        let op = &due.operation;
        let (t, o) = (op.payload.tenant_id, op.op_id);
        let approved = Approved {
            network: op.payload.network.as_str(),
            asset: op.payload.asset.as_str(),
            destination: request.destination,
            amount: request.amount,
            bound: due.request.as_ref().and_then(|r| r.bound),
        };
        let says = self.chains.judge(approved, hash).await;
        let settle = self.moved(due, S::Broadcast, S::Confirmed, "custodian transfer final");
        match says {
            ChainSays::Paid(block) => {
                let inclusion = Inclusion {
                    tenant_id: t,
                    op_id: o,
                    tx_hash: format!("0x{}", hex::encode(hash)),
                    block_number: block.number,
                    block_hash: format!("0x{}", hex::encode(block.hash)),
                };
                let settled = self.store.confirm_custodian(&settle, &inclusion).await;
                self.settled(due, settled).await
            }
            ChainSays::Unwatched if completed => {
                // On the provider's word alone, but never on a transaction another
                // withdrawal's record names.
                let tx_hash = format!("0x{}", hex::encode(hash));
                let settled = self.store.settle_custodian_unwatched(&settle, &tx_hash);
                self.settled(due, settled.await).await
            }
            ChainSays::NotYet
                if matches!(status.class(), StatusClass::Completed | StatusClass::Failed)
                    && due
                        .since_bound
                        .or(due.since_request)
                        .is_some_and(|secs| secs > self.stuck_after.as_secs_f64()) =>
            {
                tracing::warn!(op = %o, "the custodian's final transaction is not final on chain");
                self.store
                    .record_custodian_escalation(t, o, OWNER, "CUSTODIAN_TRANSACTION_NOT_FINAL")
                    .await
            }
            ChainSays::Unwatched | ChainSays::NotYet => Ok(()),
            ChainSays::Unbound => {
                tracing::warn!(op = %o, "a custodian request stored without a bound on a watched network: not settled, escalated");
                self.store
                    .record_custodian_escalation(t, o, OWNER, "CUSTODIAN_PAYOUT_UNBOUND")
                    .await
            }
            ChainSays::Contradicted(reason) => {
                tracing::error!(op = %o, reason, "the custodian's transaction is not the approved transfer");
                self.security(due, "CUSTODIAN_TRANSACTION_CONTRADICTED", reason)
                    .await
            }
        }
    }

    /// What a settlement did: a lost race is no failure; a transaction another withdrawal's
    /// record names is a security event.
    async fn settled(
        &self,
        due: &CustodianDue,
        settled: Result<Settled, StoreError>,
    ) -> Result<(), StoreError> {
        match settled {
            Ok(Settled::Confirmed) | Err(StoreError::Conflict { .. }) => Ok(()),
            Ok(Settled::SettlesAnother) => self.settles_another(due).await,
            Err(e) => Err(e),
        }
    }

    /// Stores the record a lookup found; its id.
    pub(super) async fn store_record(
        &self,
        due: &CustodianDue,
        outcome: &LookupOutcome,
    ) -> Result<Option<i64>, StoreError> {
        let (Lookup::Found(_), Some(record), Some(sha)) =
            (outcome.lookup, &outcome.record, outcome.body_sha256)
        else {
            return Ok(None);
        };
        let tx_hash = record.tx_hash.map(|h| format!("0x{}", hex::encode(h)));
        let replaced: Vec<String> = record
            .replaced_hashes
            .iter()
            .map(|h| format!("0x{}", hex::encode(h)))
            .collect();
        let new = NewRecord {
            status: record.status.as_str(),
            sub_status: record.sub_status.as_deref().filter(|s| !s.is_empty()),
            tx_hash: tx_hash.as_deref(),
            replaced_hashes: &replaced,
            provider_id: Some(record.provider_id.as_str()).filter(|s| !s.is_empty()),
            answer_sha256: sha,
        };
        let op = &due.operation;
        let id = self
            .store
            .record_custodian_record(op.payload.tenant_id, op.op_id, &new, &self.executor_id)
            .await?;
        Ok(Some(id))
    }

    /// A stored request body that is not the one the approved payload gives: a security event
    /// for an operator, and nothing is sent.
    pub(super) async fn body_differs(&self, due: &CustodianDue) -> Result<(), StoreError> {
        let o = due.operation.op_id;
        tracing::error!(op = %o, "the stored custodian request is not the approved payload's: not sent");
        let detail = "the stored request body is not the one the approved payload gives";
        self.security(due, "CUSTODIAN_REQUEST_BODY_DIFFERS", detail)
            .await
    }

    /// The transaction a record names is another withdrawal's record's too (a provider, or an
    /// operator's binding, naming one transfer for two withdrawals): a security event, never a
    /// second settlement on it.
    async fn settles_another(&self, due: &CustodianDue) -> Result<(), StoreError> {
        let o = due.operation.op_id;
        tracing::error!(op = %o, "the custodian's transaction is another withdrawal's too: not settled");
        let detail =
            "another withdrawal's provider record or settlement names the same transaction";
        self.security(due, "CUSTODIAN_TRANSACTION_SETTLES_ANOTHER", detail)
            .await
    }

    /// A record that differs from the request: a security event for an operator, never a
    /// verdict.
    pub(super) async fn mismatch(&self, due: &CustodianDue) -> Result<(), StoreError> {
        let detail = "the custodian's record of our reference differs from the request";
        self.security(due, "CUSTODIAN_RECORD_MISMATCH", detail)
            .await
    }

    /// A security event `kind` (with `detail`) about the withdrawal, escalated to security under
    /// the same reason code.
    async fn security(
        &self,
        due: &CustodianDue,
        kind: &'static str,
        detail: &str,
    ) -> Result<(), StoreError> {
        let op = &due.operation;
        let (t, o) = (op.payload.tenant_id, op.op_id);
        self.store
            .record_security_event(t, o, kind, Actor::Custodian, &self.executor_id, detail)
            .await?;
        self.store
            .record_custodian_escalation(t, o, "security", kind)
            .await
    }
}
