//! The `OperationsService` gRPC handlers: authenticate, convert at the edge, call the store.

use crate::checks::CreateChecks;
use crate::{convert, paging};
use opledger_domain::ids::OperationId;
use opledger_grpc::Authenticator;
use opledger_grpc::store_status;
use opledger_proto::v1 as pb;
use opledger_proto::v1::operations_service_server::OperationsService;
use opledger_store::Store;
use opledger_store::keys::Role;
use opledger_store::ledger::NewCredit;
use opledger_store::operations::{Created, ListQuery, NewWithdrawal};
use std::sync::Arc;
use tonic::{Request, Response, Status};

const ALL_ROLES: &[Role] = &[Role::Client, Role::Approver, Role::Operator, Role::Service];

/// The handlers' shared state.
#[derive(Debug, Clone)]
pub struct OperationsApi {
    store: Store,
    auth: Arc<Authenticator>,
    checks: Arc<CreateChecks>,
}

impl OperationsApi {
    /// Handlers over this store and authenticator, without create checks
    /// ([`CreateChecks::none`]).
    pub fn new(store: Store, auth: Arc<Authenticator>) -> OperationsApi {
        OperationsApi::with_checks(store, auth, Arc::new(CreateChecks::none()))
    }

    /// Handlers over this store and authenticator, refusing the creates `checks` refuses.
    pub fn with_checks(
        store: Store,
        auth: Arc<Authenticator>,
        checks: Arc<CreateChecks>,
    ) -> OperationsApi {
        OperationsApi {
            store,
            auth,
            checks,
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
        if let Err(refusal) = self
            .checks
            .check(&self.store, &payload)
            .await
            .map_err(store_status)?
        {
            // A retry of a create accepted before (say, before the registry changed) is still
            // its replay; otherwise nothing is stored and no hold is placed.
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
            .get_withdrawal(caller.tenant_id, op_id)
            .await
            .map_err(store_status)?
            .ok_or_else(|| {
                store_status(opledger_store::StoreError::NotFound { what: "withdrawal" })
            })?;
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
        let credited = self
            .store
            .credit_account(NewCredit {
                tenant_id: caller.tenant_id,
                key: &key,
                account: &account,
                asset: &asset,
                amount,
            })
            .await
            .map_err(store_status)?;
        tracing::info!(replayed = credited.replayed, "account credited");
        Ok(Response::new(pb::CreditAccountResponse {
            balance: Some(convert::balance(&account, &asset, &credited.balance)),
            replayed: credited.replayed,
        }))
    }
}
