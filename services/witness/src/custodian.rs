//! The witness's custodian pass: every release the custodian executor proposed (a provider record
//! terminal without a transaction hash) and the witness has not decided yet is judged from the
//! witness's own lookup of the provider's record by our reference, through its own account at
//! the provider (`[[custodian_accounts]]`: its own read-only credentials, never the executor's),
//! and attested only when [`opledger_domain::custodian::witness_release`] says so. The database
//! releases once the proposal and the attestation exist, when the executor next moves the
//! withdrawal.
//!
//! A lookup that fails or finds nothing is looked up again next pass (absence is never evidence);
//! a proposal the witness's own record contradicts (a hash, a record in flight, another status, a
//! record that differs from the request) is refused for good (`custodian_witness_refusals`, a
//! security signal); a proposal for a tenant, network and asset the witness has no account for
//! is left, counted. Identifiers (the reference, addresses, hashes) never reach the logs.

use crate::attest::WitnessError;
use crate::metrics::Counters;
use crate::outcome::CustodianOutcome;
use opledger_custodian::{Custodian, LookupOutcome, TransferRequest};
use opledger_domain::custodian::{
    Lookup, OwnLookup, ProposedRelease, ProviderStatus, Record, WitnessRefusal, WitnessVerdict,
    witness_release,
};
use opledger_domain::ids::TenantId;
use opledger_domain::operation::Operation;
use opledger_store::custodian_witness::{
    CustodianCursor, CustodianRefusal, CustodianReleaseToWitness,
};
use opledger_store::roles::WitnessStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use tracing::Instrument as _;

/// A (tenant, network id, asset code) a custodian account serves.
pub type Route = (TenantId, String, String);

/// Why a proposal whose stored payload the witness cannot look up with is refused.
const PAYLOAD_NOT_EXECUTABLE: &str = "CUSTODIAN_PAYLOAD_NOT_EXECUTABLE";

/// The witness's custodian pass over a store and its own provider accounts.
#[derive(Debug, Clone)]
pub struct CustodianWitness {
    store: WitnessStore,
    accounts: Arc<HashMap<Route, Arc<dyn Custodian>>>,
    witness_id: String,
    counters: Arc<Counters>,
    /// The last proposal of the previous pass's page, when the page was full.
    cursor: Arc<Mutex<Option<CustodianCursor>>>,
}

impl CustodianWitness {
    /// A pass looking records up through `accounts` (the witness's own) and recording as
    /// `witness_id`.
    pub fn new(
        store: WitnessStore,
        accounts: HashMap<Route, Arc<dyn Custodian>>,
        witness_id: String,
        counters: Arc<Counters>,
    ) -> CustodianWitness {
        CustodianWitness {
            store,
            accounts: Arc::new(accounts),
            witness_id,
            counters,
            cursor: Arc::new(Mutex::new(None)),
        }
    }

    /// One pass over up to `limit` proposals, oldest first, a page after the previous pass's
    /// (from the oldest again once the end was reached); each outcome is counted.
    pub async fn tick(&self, limit: u32) -> Vec<CustodianOutcome> {
        let after = self
            .cursor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut page = self
            .store
            .custodian_releases_to_witness(after.as_ref(), limit)
            .await;
        if after.is_some() && page.as_ref().is_ok_and(Vec::is_empty) {
            page = self.store.custodian_releases_to_witness(None, limit).await;
        }
        let pending = match page {
            Ok(pending) => pending,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read proposed custodian releases");
                return Vec::new();
            }
        };
        let next = match pending.last() {
            Some(last) if pending.len() == limit as usize => Some(last.cursor()),
            _ => None,
        };
        *self.cursor.lock().unwrap_or_else(PoisonError::into_inner) = next;
        let mut outcomes = Vec::with_capacity(pending.len());
        for release in &pending {
            let span = tracing::info_span!(
                "witness.examine_custodian",
                opledger.service = "witness",
                outcome = tracing::field::Empty,
            );
            let outcome = async {
                self.examine(release).await.unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "custodian examination deferred");
                    CustodianOutcome::Waiting("store")
                })
            }
            .instrument(span.clone())
            .await;
            span.record("outcome", tracing::field::debug(outcome));
            self.counters.count_custodian(outcome);
            outcomes.push(outcome);
        }
        outcomes
    }

    /// Judges one proposal from the witness's own lookup.
    pub async fn examine(
        &self,
        release: &CustodianReleaseToWitness,
    ) -> Result<CustodianOutcome, WitnessError> {
        let payload = &release.operation.payload;
        let route = (
            payload.tenant_id,
            payload.network.as_str().to_owned(),
            payload.asset.as_str().to_owned(),
        );
        let Some(custodian) = self.accounts.get(&route) else {
            tracing::warn!(
                network = %route.1,
                asset = %route.2,
                "no custodian account of the witness's for the proposal's tenant, network and asset: not attested"
            );
            return Ok(CustodianOutcome::NoAccount);
        };
        let Some(request) = own_request(&release.operation) else {
            return self.refuse(release, PAYLOAD_NOT_EXECUTABLE, None).await;
        };
        let Ok(status) = release.status.parse::<ProviderStatus>() else {
            let reason = WitnessRefusal::ProposalNotTerminal.reason_code();
            return self.refuse(release, reason, None).await;
        };
        let proposed = ProposedRelease {
            record: Record {
                status,
                tx_hash: release.tx_hash,
            },
            ever_broadcast: release.ever_broadcast,
        };
        // A `no_lookup` withdrawal is read through the transaction an operator bound to it, from
        // the witness's own listing.
        let seen = match &release.bound {
            Some(provider_id) => {
                self.listed(release, custodian.as_ref(), &request, provider_id)
                    .await?
            }
            None => custodian.lookup(&request).await,
        };
        match (
            witness_release(proposed, own_lookup(&seen)),
            seen.body_sha256,
        ) {
            (WitnessVerdict::Attest(status), Some(answer)) => {
                let op = &release.operation;
                self.store
                    .attest_custodian_release(
                        op.payload.tenant_id,
                        op.op_id,
                        release.record_id,
                        status.as_str(),
                        &answer,
                        &self.witness_id,
                    )
                    .await?;
                tracing::info!(
                    status = status.as_str(),
                    "custodian release attested from the witness's own lookup"
                );
                Ok(CustodianOutcome::Attested)
            }
            (WitnessVerdict::Refuse(refusal), _) => {
                self.refuse(release, refusal.reason_code(), Some(&seen))
                    .await
            }
            (WitnessVerdict::Wait(why), _) => {
                tracing::debug!(why = why.label(), failure = ?seen.failure, "custodian release left pending");
                Ok(CustodianOutcome::Waiting(why.label()))
            }
            // An attestation needs the answer's digest; own_lookup never attests without one.
            (WitnessVerdict::Attest(_), None) => Ok(CustodianOutcome::Waiting("no_digest")),
        }
    }

    /// The bound transaction `provider_id` of a `no_lookup` withdrawal from the witness's own
    /// listing, read with the rule of the executor's (`opledger_custodian::read_bound`): a
    /// transaction that says nothing was broadcast proves nothing while another listed one that
    /// no other withdrawal of ours is bound to could be the payment.
    async fn listed(
        &self,
        release: &CustodianReleaseToWitness,
        custodian: &dyn Custodian,
        request: &TransferRequest,
        provider_id: &str,
    ) -> Result<LookupOutcome, WitnessError> {
        let age = std::time::Duration::from_secs(release.since_request.max(0).unsigned_abs());
        let op = &release.operation;
        let (t, o, store) = (op.payload.tenant_id, op.op_id, &self.store);
        Ok(opledger_custodian::list_bound(
            custodian,
            request,
            age,
            release
                .since_last_send
                .map(|secs| std::time::Duration::from_secs(secs.max(0).unsigned_abs())),
            provider_id,
            |ids| async move { store.bound_elsewhere(t, o, &ids).await },
        )
        .await?)
    }

    /// Refuses `release` for good with `reason`, keeping what the witness's own lookup saw.
    async fn refuse(
        &self,
        release: &CustodianReleaseToWitness,
        reason: &'static str,
        seen: Option<&LookupOutcome>,
    ) -> Result<CustodianOutcome, WitnessError> {
        let refusal = CustodianRefusal {
            reason,
            status: seen
                .and_then(|s| s.record.as_ref())
                .map(|r| r.status.as_str()),
            answer_sha256: seen.and_then(|s| s.body_sha256),
        };
        let op = &release.operation;
        self.store
            .refuse_custodian_release(
                op.payload.tenant_id,
                op.op_id,
                release.record_id,
                &refusal,
                &self.witness_id,
            )
            .await?;
        tracing::error!(
            reason,
            "custodian release refused: the witness's own lookup does not support it; hold kept"
        );
        Ok(CustodianOutcome::Refused(reason))
    }
}

/// What the witness looks the provider's record up with: our reference (the operation id), and
/// the destination and amount of the stored payload. `None` when the stored fields do not hash
/// to the approved payload hash or the destination is no EVM address (the executor never sends
/// such a withdrawal).
fn own_request(op: &Operation) -> Option<TransferRequest> {
    let approved = op.payload.hash() == op.payload_hash;
    let destination = opledger_domain::evidence::parse_address(op.payload.destination.as_str())
        .filter(|_| approved)?;
    Some(TransferRequest {
        reference: op.op_id.as_uuid(),
        destination,
        amount: op.payload.amount.get(),
        note: None,
    })
}

/// The decision input of the witness's own lookup: a record found without the digest of the
/// answer it came in is no evidence (as a failed lookup).
fn own_lookup(seen: &LookupOutcome) -> OwnLookup {
    let lookup = match (seen.lookup, seen.body_sha256) {
        (Lookup::Found(_), None) => Lookup::Failed,
        (lookup, _) => lookup,
    };
    OwnLookup {
        lookup,
        replaced: seen
            .record
            .as_ref()
            .is_some_and(|r| !r.replaced_hashes.is_empty()),
        differs: seen.mismatch().is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opledger_custodian::{LookupFailure, Mismatch, ProviderRecord};

    fn record(status: ProviderStatus, replaced: usize) -> ProviderRecord {
        ProviderRecord {
            provider_id: "tx-1".to_owned(),
            reference: "ref".to_owned(),
            status_text: status.as_str().to_owned(),
            sub_status: None,
            status,
            tx_hash: None,
            replaced_hashes: vec![[3; 32]; replaced],
            destination: None,
            amount: Some(1),
            asset: "ETH".to_owned(),
            confirmations: None,
            created_at: None,
        }
    }

    fn found(status: ProviderStatus, digest: Option<[u8; 32]>, replaced: usize) -> LookupOutcome {
        LookupOutcome {
            lookup: Lookup::Found(Record {
                status,
                tx_hash: None,
            }),
            failure: None,
            record: Some(record(status, replaced)),
            http_status: Some(200),
            body_sha256: digest,
            retry_after: None,
        }
    }

    #[test]
    fn a_record_without_the_answers_digest_is_no_evidence() {
        let seen = own_lookup(&found(ProviderStatus::Rejected, None, 0));
        assert_eq!(seen.lookup, Lookup::Failed);
        let seen = own_lookup(&found(ProviderStatus::Rejected, Some([1; 32]), 0));
        assert!(matches!(seen.lookup, Lookup::Found(_)));
        assert!(!seen.replaced && !seen.differs);
    }

    #[test]
    fn replaced_hashes_and_a_record_that_differs_reach_the_decision() {
        assert!(own_lookup(&found(ProviderStatus::Rejected, Some([1; 32]), 1)).replaced);
        let mut differs = found(ProviderStatus::Rejected, Some([1; 32]), 0);
        differs.lookup = Lookup::Failed;
        differs.failure = Some(LookupFailure::Mismatch(Mismatch {
            destination: true,
            ..Mismatch::default()
        }));
        let seen = own_lookup(&differs);
        assert!(seen.differs);
        let proposed = ProposedRelease {
            record: Record {
                status: ProviderStatus::Rejected,
                tx_hash: None,
            },
            ever_broadcast: false,
        };
        assert_eq!(
            witness_release(proposed, seen),
            WitnessVerdict::Refuse(WitnessRefusal::RecordDiffers)
        );
        let failed = own_lookup(&LookupOutcome::failed(LookupFailure::Timeout));
        assert_eq!(failed.lookup, Lookup::Failed);
        assert!(!failed.differs && !failed.replaced);
    }
}
