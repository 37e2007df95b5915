//! `CustodianOperatorService`: an operator lists the provider transactions that may be a
//! `no_lookup` withdrawal's and binds one, with a reason. Operator role only; the tenant is the
//! caller's. The binding is checked again against the provider's list at the moment it is made,
//! and the database keeps it once, for one withdrawal (migration 37). What the executor then does
//! with the bound transaction is `Executor::follow_bound`. Identifiers go back to the operator
//! who asked and never to the logs.

use crate::accounts::{Accounts, transfer};
use opledger_custodian::{
    Candidate, CandidatesError, LookupFailure, TransferRequest, read_bound, window_since,
};
use opledger_domain::state::OperationState as S;
use opledger_grpc::status::{ErrorReason, error_status, invalid_field};
use opledger_grpc::{Authenticator, convert, store_status};
use opledger_proto::v1 as pb;
use opledger_proto::v1::custodian_operator_service_server::CustodianOperatorService;
use opledger_store::custodian::{CustodianDue, NewRecord};
use opledger_store::custodian_bindings::{Bound, NewBinding};
use opledger_store::keys::Role;
use opledger_store::roles::CustodianStore;
use std::sync::Arc;
use std::time::Duration;
use tonic::{Code, Request, Response, Status};

/// The handlers.
#[derive(Debug, Clone)]
pub struct OperatorApi {
    store: CustodianStore,
    auth: Arc<Authenticator>,
    accounts: Arc<Accounts>,
    executor_id: String,
}

impl OperatorApi {
    /// Handlers over this store and these accounts, authenticating with `auth`, recording
    /// bindings as `executor_id`.
    pub fn new(
        store: CustodianStore,
        auth: Arc<Authenticator>,
        accounts: Arc<Accounts>,
        executor_id: String,
    ) -> OperatorApi {
        OperatorApi {
            store,
            auth,
            accounts,
            executor_id,
        }
    }

    /// The caller's custodian withdrawal `withdrawal_id`.
    async fn withdrawal(
        &self,
        tenant: opledger_domain::ids::TenantId,
        withdrawal_id: &str,
    ) -> Result<CustodianDue, Status> {
        let op_id = convert::operation_id("withdrawal_id", withdrawal_id)?;
        self.store
            .custodian_withdrawal(tenant, op_id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| {
                error_status(
                    Code::NotFound,
                    ErrorReason::NotFound,
                    "no custodian withdrawal with this id",
                    &[],
                )
            })
    }

    /// The provider's candidates for `due` now, with the transfer they were listed for, the ones
    /// another withdrawal of ours is bound to, and whether the provider's consistency window has
    /// passed since our last send (its list may lag before).
    async fn candidates(
        &self,
        due: &CustodianDue,
    ) -> Result<(TransferRequest, Vec<Candidate>, Vec<String>, bool), Status> {
        let account = self.accounts.get(&due.operation).ok_or_else(|| {
            not_bindable("this executor has no account for the withdrawal's network and asset")
        })?;
        if account.custodian.profile().has_lookup() {
            return Err(not_bindable(
                "its provider is looked up by our reference: the executor follows it alone",
            ));
        }
        let (Some(age), Ok(request)) = (due.since_request, transfer(&due.operation)) else {
            return Err(not_bindable("no request was stored for it"));
        };
        let window = window_since(Duration::from_secs_f64(age.max(0.0)));
        let listed = account
            .custodian
            .candidates(&request, window)
            .await
            .map_err(provider_unavailable)?;
        let ids: Vec<String> = listed.iter().map(|c| c.provider_id.clone()).collect();
        let op = &due.operation;
        let accounted = self
            .store
            .bound_elsewhere(op.payload.tenant_id, op.op_id, &ids)
            .await
            .map_err(store_status)?;
        let window = account.custodian.consistency_window().as_secs_f64();
        let settled = due.since_last_send.is_some_and(|secs| secs >= window);
        Ok((request, listed, accounted, settled))
    }
}

/// The transaction the provider's answer named, when the withdrawal follows it and a binding of
/// `provider_id` is asked: naming it again is its answer (`Some`); another one is refused while
/// it is listed with the withdrawal's destination and amount and not recreated; `None` (bind,
/// under every rule of a binding) once the provider lists it as recreated (the payment is then
/// the new one's), when it is not among the candidates (the provider does not show it, or shows
/// it with another destination or amount), or when no answer named one.
fn answered_live(
    due: &opledger_store::custodian::CustodianDue,
    listed: &[Candidate],
    provider_id: &str,
) -> Result<Option<String>, Status> {
    let Some(answered) = due.answered.as_ref().filter(|_| due.bound.is_none()) else {
        return Ok(None);
    };
    if answered == provider_id {
        return Ok(Some(answered.clone()));
    }
    match listed.iter().find(|c| c.provider_id == *answered) {
        Some(candidate) if !candidate.recreated => Err(not_bindable(
            "the provider's answer named the transaction the executor follows, and the provider \
             lists it: an operator binds another only once it is listed as recreated",
        )),
        _ => Ok(None),
    }
}

/// The listed transaction `provider_id`, when binding it would prove something: read as the
/// executor and the witness will read it (`read_bound`), neither ambiguous nor undocumented, and
/// not one the provider recreated.
fn provable<'a>(
    request: &TransferRequest,
    listed: &'a [Candidate],
    accounted: &[String],
    provider_id: &str,
    listing_settled: bool,
) -> Result<&'a Candidate, Status> {
    let Some(candidate) = listed.iter().find(|c| c.provider_id == provider_id) else {
        return Err(error_status(
            Code::FailedPrecondition,
            ErrorReason::CandidateNotListed,
            "the transaction is not among the withdrawal's candidates as the provider lists them \
             now",
            &[],
        ));
    };
    let read = read_bound(Ok(listed), request, provider_id, accounted, listing_settled);
    if candidate.recreated
        || matches!(
            read.failure,
            Some(LookupFailure::Ambiguous | LookupFailure::Unreadable | LookupFailure::ListingLag)
        )
    {
        return Err(error_status(
            Code::FailedPrecondition,
            ErrorReason::CandidateAmbiguous,
            "the transaction cannot be shown to be this withdrawal's: it says nothing was \
             broadcast while another listed one, bound to no withdrawal, could be the payment, \
             or while the provider's list may still lag (retry after its consistency window); \
             or its status is undocumented; or the provider recreated it (bind the recreated \
             one)",
            &[],
        ));
    }
    Ok(candidate)
}

/// The record the list showed, when it names a hash: stored with the binding, so that the
/// withdrawal is never released whatever the list shows later.
fn seen_record<'a>(candidate: &'a Candidate, tx_hashes: &'a [String]) -> Option<NewRecord<'a>> {
    match (candidate.status, tx_hashes.split_first()) {
        (Some(status), Some((first, replaced))) => Some(NewRecord {
            status: status.as_str(),
            sub_status: None,
            tx_hash: Some(first.as_str()),
            replaced_hashes: replaced,
            provider_id: Some(candidate.provider_id.as_str()),
            answer_sha256: candidate.answer_sha256,
        }),
        _ => None,
    }
}

fn not_bindable(message: &str) -> Status {
    error_status(
        Code::FailedPrecondition,
        ErrorReason::NotBindable,
        message,
        &[],
    )
}

fn provider_unavailable(error: CandidatesError) -> Status {
    tracing::warn!(error = %error, "the provider's list could not be read");
    error_status(
        Code::Unavailable,
        ErrorReason::ProviderUnavailable,
        "the provider's list could not be read now; retry",
        &[],
    )
}

fn taken() -> Status {
    error_status(
        Code::AlreadyExists,
        ErrorReason::CandidateTaken,
        "the withdrawal is bound to another transaction, or the transaction is another \
         withdrawal's",
        &[],
    )
}

fn hashes(candidate: &Candidate) -> Vec<String> {
    candidate
        .hashes
        .iter()
        .map(|h| format!("0x{}", hex::encode(h)))
        .collect()
}

fn rfc3339(at: Option<chrono::DateTime<chrono::Utc>>) -> String {
    at.map(|t| t.to_rfc3339()).unwrap_or_default()
}

#[tonic::async_trait]
impl CustodianOperatorService for OperatorApi {
    async fn list_custodian_candidates(
        &self,
        request: Request<pb::ListCustodianCandidatesRequest>,
    ) -> Result<Response<pb::ListCustodianCandidatesResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let body = request.into_inner();
        let due = self
            .withdrawal(caller.tenant_id, &body.withdrawal_id)
            .await?;
        let (_, listed, _, _) = self.candidates(&due).await?;
        Ok(Response::new(pb::ListCustodianCandidatesResponse {
            candidates: listed
                .iter()
                .map(|c| pb::CustodianCandidate {
                    provider_id: c.provider_id.clone(),
                    status: c.status_text.clone(),
                    tx_hashes: hashes(c),
                    created_at: rfc3339(c.created_at),
                    completed_at: rfc3339(c.completed_at),
                })
                .collect(),
            bound_provider_id: due
                .followed()
                .map(|(id, _)| id.to_owned())
                .unwrap_or_default(),
            state: convert::state_to_wire(due.operation.state) as i32,
        }))
    }

    async fn bind_custodian_candidate(
        &self,
        request: Request<pb::BindCustodianCandidateRequest>,
    ) -> Result<Response<pb::BindCustodianCandidateResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let body = request.into_inner();
        let reason = body.reason.trim();
        if reason.is_empty() || reason.chars().count() > 200 || reason.chars().any(char::is_control)
        {
            return Err(invalid_field(
                "reason",
                "must be 1 to 200 printable characters",
            ));
        }
        if body.provider_id.is_empty() || body.provider_id.len() > 128 {
            return Err(invalid_field("provider_id", "must be 1 to 128 characters"));
        }
        let due = self
            .withdrawal(caller.tenant_id, &body.withdrawal_id)
            .await?;
        match &due.bound {
            Some(bound) if *bound == body.provider_id => {
                return Ok(Response::new(pb::BindCustodianCandidateResponse {
                    bound_provider_id: bound.clone(),
                }));
            }
            Some(_) => return Err(taken()),
            None => {}
        }
        if !matches!(due.operation.state, S::Broadcast | S::Unknown) {
            return Err(not_bindable("the withdrawal is not BROADCAST or UNKNOWN"));
        }
        let (request, listed, accounted, settled) = self.candidates(&due).await?;
        if let Some(answered) = answered_live(&due, &listed, &body.provider_id)? {
            return Ok(Response::new(pb::BindCustodianCandidateResponse {
                bound_provider_id: answered,
            }));
        }
        let candidate = provable(&request, &listed, &accounted, &body.provider_id, settled)?;
        let tx_hashes = hashes(candidate);
        let record = seen_record(candidate, &tx_hashes);
        let binding = NewBinding {
            provider_id: &candidate.provider_id,
            status: &candidate.status_text,
            tx_hashes: &tx_hashes,
            answer_sha256: candidate.answer_sha256,
            operator_key_id: &caller.key_id,
            reason,
            executor_id: &self.executor_id,
            record,
        };
        let op = &due.operation;
        match self
            .store
            .bind_custodian_transaction(op.payload.tenant_id, op.op_id, &binding)
            .await
            .map_err(store_status)?
        {
            Bound::Recorded => {
                tracing::info!(
                    "provider transaction bound to a no_lookup withdrawal by an operator"
                );
                Ok(Response::new(pb::BindCustodianCandidateResponse {
                    bound_provider_id: candidate.provider_id.clone(),
                }))
            }
            Bound::Taken => Err(taken()),
            Bound::NotBindable => Err(not_bindable(
                "the database refused the binding: the withdrawal is no longer BROADCAST or \
                 UNKNOWN, or what the list showed is not storable",
            )),
        }
    }
}
