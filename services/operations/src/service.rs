//! The `OperationsService` gRPC handlers: authenticate, convert at the edge, call the store.

use crate::checks::CreateChecks;
use crate::{convert, paging};
use opledger_domain::approval::{CreditFacts, CreditSignatureFacts, evaluate_credit};
use opledger_domain::ids::OperationId;
use opledger_grpc::Authenticator;
use opledger_grpc::store_status;
use opledger_proto::v1 as pb;
use opledger_proto::v1::operations_service_server::OperationsService;
use opledger_store::credits::{CreditState, NewProposal, OperatorSignature};
use opledger_store::keys::Role;
use opledger_store::operations::{Created, ListQuery, NewWithdrawal};
use opledger_store::roles::OperationsStore;
use std::sync::Arc;
use tonic::{Request, Response, Status};

const ALL_ROLES: &[Role] = &[Role::Client, Role::Approver, Role::Operator, Role::Service];

/// The handlers' shared state.
#[derive(Debug, Clone)]
pub struct OperationsApi {
    store: OperationsStore,
    auth: Arc<Authenticator>,
    checks: Arc<CreateChecks>,
}

impl OperationsApi {
    /// Handlers over this store and authenticator, without create checks
    /// ([`CreateChecks::none`]).
    pub fn new(store: OperationsStore, auth: Arc<Authenticator>) -> OperationsApi {
        OperationsApi::with_checks(store, auth, Arc::new(CreateChecks::none()))
    }

    /// Handlers over this store and authenticator, refusing the creates `checks` refuses.
    pub fn with_checks(
        store: OperationsStore,
        auth: Arc<Authenticator>,
        checks: Arc<CreateChecks>,
    ) -> OperationsApi {
        OperationsApi {
            store,
            auth,
            checks,
        }
    }

    /// One credit of the tenant, or NOT_FOUND.
    async fn credit_of(
        &self,
        tenant: opledger_domain::ids::TenantId,
        credit_id: &[u8; 32],
    ) -> Result<opledger_store::credits::CreditRecord, Status> {
        self.store
            .credit(tenant, credit_id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| store_status(opledger_store::StoreError::NotFound { what: "credit" }))
    }

    /// Refuses (CREDIT_STATEMENT_INVALID, nothing recorded) an operator's signature that does not
    /// verify against the tenant's newest trust statement over the statement of exactly the
    /// credit's fields. The service has no pinned administrator key: this spares an honest
    /// operator a refused credit; the witness verifies again against the pinned trust roots.
    async fn check_statement(
        &self,
        proposal: &NewProposal<'_>,
        signature: &OperatorSignature,
    ) -> Result<(), Status> {
        let trust = self
            .store
            .trust_statement(proposal.tenant_id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| store_status(opledger_store::StoreError::TrustMissing))?
            .decode()
            .map_err(store_status)?;
        let credit = CreditFacts {
            tenant_id: proposal.tenant_id,
            credit_id: proposal.credit_id,
            account: proposal.account,
            asset: proposal.asset,
            amount: proposal.amount,
        };
        let signed = [CreditSignatureFacts {
            operator_key_id: &signature.operator_key_id,
            policy_version: signature.policy_version,
            signature: &signature.signature,
        }];
        match evaluate_credit(&trust, &credit, &signed) {
            Ok(_) => Ok(()),
            Err(refusal) => Err(opledger_grpc::status::error_status(
                tonic::Code::PermissionDenied,
                opledger_grpc::status::ErrorReason::CreditStatementInvalid,
                format!(
                    "the operator's credit statement does not verify against the tenant's trust \
                     statement ({}): nothing recorded",
                    refusal.reason_code()
                ),
                &[("refusal", refusal.reason_code())],
            )),
        }
    }
}

fn created_response(created: &Created) -> Response<pb::CreateWithdrawalResponse> {
    let span = tracing::Span::current();
    span.record("op_id", tracing::field::display(created.operation.op_id));
    span.record("replayed", created.replayed);
    tracing::info!(
        state = created.operation.state.as_str(),
        risk_flags = created.operation.risk_flags.len(),
        "withdrawal accepted"
    );
    Response::new(pb::CreateWithdrawalResponse {
        withdrawal: Some(convert::withdrawal(&created.operation)),
        replayed: created.replayed,
    })
}

#[tonic::async_trait]
impl OperationsService for OperationsApi {
    #[tracing::instrument(skip_all, fields(op_id, replayed))]
    async fn create_withdrawal(
        &self,
        request: Request<pb::CreateWithdrawalRequest>,
    ) -> Result<Response<pb::CreateWithdrawalResponse>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Client, Role::Service])
            .await?;
        let body = request.into_inner();
        let key = convert::idempotency_key(&body.idempotency_key)?;
        let payload = convert::payload(caller.tenant_id, body.payload)?;
        let executor = match self
            .checks
            .check(&self.store, &payload)
            .await
            .map_err(store_status)?
        {
            Ok(executor) => executor,
            Err(refusal) => {
                // A retry of a create accepted before (say, before the registry changed) is
                // still its replay; otherwise nothing is stored and no hold is placed.
                return match self
                    .store
                    .created_with_key(&key, &payload)
                    .await
                    .map_err(store_status)?
                {
                    Some(created) => Ok(created_response(&created)),
                    None => {
                        tracing::info!(refusal = ?refusal, "withdrawal refused at create");
                        Err(convert::refusal(refusal, &payload.network))
                    }
                };
            }
        };
        // Stored with the operation: the workers' later steps on it join this trace.
        let trace_context = opledger_grpc::telemetry::traceparent(&tracing::Span::current());
        let created = self
            .store
            .create_withdrawal_traced(
                NewWithdrawal {
                    op_id: OperationId::new(),
                    key: &key,
                    payload: &payload,
                    actor_id: &caller.key_id,
                    executor,
                },
                trace_context.as_deref(),
            )
            .await
            .map_err(store_status)?;
        Ok(created_response(&created))
    }

    async fn get_withdrawal(
        &self,
        request: Request<pb::GetWithdrawalRequest>,
    ) -> Result<Response<pb::Withdrawal>, Status> {
        let caller = self.auth.authorize(&request, ALL_ROLES).await?;
        let op_id = convert::operation_id("withdrawal_id", &request.get_ref().withdrawal_id)?;
        let found = self
            .store
            .withdrawal(caller.tenant_id, op_id)
            .await
            .map_err(store_status)?;
        Ok(Response::new(convert::withdrawal(&found)))
    }

    async fn list_withdrawals(
        &self,
        request: Request<pb::ListWithdrawalsRequest>,
    ) -> Result<Response<pb::ListWithdrawalsResponse>, Status> {
        let caller = self.auth.authorize(&request, ALL_ROLES).await?;
        let body = request.into_inner();
        let states = body
            .states
            .iter()
            .map(|s| convert::state_from_wire("states", *s))
            .collect::<Result<Vec<_>, _>>()?;
        let limit = paging::page_size(body.page_size)?;
        let before = paging::decode(&body.page_token, &states)?;
        // One extra row tells whether another page exists.
        let query = ListQuery {
            states: states.clone(),
            before,
            limit: limit + 1,
        };
        let mut found = self
            .store
            .list_withdrawals(caller.tenant_id, &query)
            .await
            .map_err(store_status)?;
        let more = found.len() > limit as usize;
        found.truncate(limit as usize);
        let next_page_token = match (more, found.last()) {
            (true, Some(last)) => paging::encode(last.op_id, &states),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListWithdrawalsResponse {
            withdrawals: found.iter().map(convert::withdrawal).collect(),
            next_page_token,
        }))
    }

    async fn get_balance(
        &self,
        request: Request<pb::GetBalanceRequest>,
    ) -> Result<Response<pb::Balance>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Client, Role::Operator, Role::Service])
            .await?;
        let body = request.get_ref();
        let account = convert::account("account", &body.account)?;
        let asset = convert::asset("asset", &body.asset)?;
        let balance = self
            .store
            .balance(caller.tenant_id, &account, &asset)
            .await
            .map_err(store_status)?
            .ok_or_else(|| {
                store_status(opledger_store::StoreError::NotFound { what: "account" })
            })?;
        Ok(Response::new(convert::balance(&account, &asset, &balance)))
    }

    async fn credit_account(
        &self,
        request: Request<pb::CreditAccountRequest>,
    ) -> Result<Response<pb::CreditAccountResponse>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Operator, Role::Service])
            .await?;
        let body = request.into_inner();
        let key = convert::idempotency_key(&body.idempotency_key)?;
        let account = convert::account("account", &body.account)?;
        let asset = convert::asset("asset", &body.asset)?;
        let amount = convert::amount("amount", &body.amount)?;
        if amount.is_zero() {
            return Err(opledger_grpc::status::invalid_field(
                "amount",
                "must be greater than zero",
            ));
        }
        let signature = convert::operator_signature("statement", body.statement)?;
        let credit_id = key.digest();
        let proposal = NewProposal {
            tenant_id: caller.tenant_id,
            credit_id: &credit_id,
            account: &account,
            asset: &asset,
            amount,
        };
        self.check_statement(&proposal, &signature).await?;
        let (record, replayed) = self
            .store
            .propose_operator_credit(&proposal, &signature)
            .await
            .map_err(store_status)?;
        tracing::info!(replayed, "operator credit proposed");
        let balance = self
            .store
            .balance(caller.tenant_id, &account, &asset)
            .await
            .map_err(store_status)?
            .ok_or_else(|| {
                store_status(opledger_store::StoreError::NotFound { what: "account" })
            })?;
        Ok(Response::new(pb::CreditAccountResponse {
            balance: Some(convert::balance(&account, &asset, &balance)),
            replayed,
            credit: Some(convert::credit(&record)),
        }))
    }

    async fn sign_credit(
        &self,
        request: Request<pb::SignCreditRequest>,
    ) -> Result<Response<pb::Credit>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let body = request.into_inner();
        let credit_id = convert::credit_id("credit_id", &body.credit_id)?;
        let signature = convert::operator_signature("statement", body.statement)?;
        let record = self.credit_of(caller.tenant_id, &credit_id).await?;
        if record.state != CreditState::Pending {
            return Err(not_pending());
        }
        let proposal = NewProposal {
            tenant_id: caller.tenant_id,
            credit_id: &credit_id,
            account: &record.account,
            asset: &record.asset,
            amount: record.amount,
        };
        self.check_statement(&proposal, &signature).await?;
        let record = self
            .store
            .add_credit_statement(caller.tenant_id, &credit_id, &signature)
            .await
            .map_err(|e| match e {
                opledger_store::StoreError::Conflict { .. } => not_pending(),
                other => store_status(other),
            })?;
        tracing::info!("operator statement added to a pending credit");
        Ok(Response::new(convert::credit(&record)))
    }

    async fn get_credit(
        &self,
        request: Request<pb::GetCreditRequest>,
    ) -> Result<Response<pb::Credit>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Operator, Role::Service])
            .await?;
        let credit_id = convert::credit_id("credit_id", &request.get_ref().credit_id)?;
        let record = self.credit_of(caller.tenant_id, &credit_id).await?;
        Ok(Response::new(convert::credit(&record)))
    }

    async fn list_pending_credits(
        &self,
        request: Request<pb::ListPendingCreditsRequest>,
    ) -> Result<Response<pb::ListPendingCreditsResponse>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Operator, Role::Service])
            .await?;
        let limit = match request.get_ref().page_size {
            0 => 50,
            n @ 1..=500 => n.unsigned_abs(),
            _ => {
                return Err(opledger_grpc::status::invalid_field(
                    "page_size",
                    "must be between 0 (the default, 50) and 500",
                ));
            }
        };
        let credits = self
            .store
            .pending_credits(caller.tenant_id, limit)
            .await
            .map_err(store_status)?;
        Ok(Response::new(pb::ListPendingCreditsResponse {
            credits: credits.iter().map(convert::credit).collect(),
        }))
    }
}

fn not_pending() -> Status {
    opledger_grpc::status::error_status(
        tonic::Code::FailedPrecondition,
        opledger_grpc::status::ErrorReason::CreditNotPending,
        "the credit is no longer pending (credited, or refused by the witness): nothing recorded",
        &[],
    )
}
