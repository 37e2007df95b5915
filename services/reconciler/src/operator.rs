//! `OperatorService`: listing what automation could not resolve, and resolving it to what the
//! evidence shows. Operator role only.

use crate::reconcile::{ReconcileError, Reconciler};
use opledger_domain::state::OperationState;
use opledger_grpc::status::{ErrorReason, error_status, invalid_field};
use opledger_grpc::{Authenticator, convert, store_status};
use opledger_proto::v1 as pb;
use opledger_proto::v1::operator_service_server::OperatorService;
use opledger_store::broadcast::Unresolved;
use opledger_store::keys::Role;
use opledger_store::roles::ReconcilerStore;
use std::sync::Arc;
use tonic::{Code, Request, Response, Status};

/// The handlers.
#[derive(Debug, Clone)]
pub struct OperatorApi {
    store: ReconcilerStore,
    auth: Arc<Authenticator>,
    reconciler: Reconciler,
}

impl OperatorApi {
    /// Handlers over this store, authenticator and reconciler.
    pub fn new(
        store: ReconcilerStore,
        auth: Arc<Authenticator>,
        reconciler: Reconciler,
    ) -> OperatorApi {
        OperatorApi {
            store,
            auth,
            reconciler,
        }
    }
}

fn reconcile_status(error: ReconcileError) -> Status {
    match error {
        ReconcileError::EvidenceMismatch { shows } => error_status(
            Code::FailedPrecondition,
            ErrorReason::EvidenceMismatch,
            format!("the chain evidence shows {shows}; resolve to what it shows"),
            &[("evidence", shows)],
        ),
        ReconcileError::NotUnresolved => error_status(
            Code::FailedPrecondition,
            ErrorReason::IllegalTransition,
            "withdrawal is not UNKNOWN or FAILED_TERMINAL",
            &[],
        ),
        ReconcileError::NoRpc(_) | ReconcileError::Signer(_) => error_status(
            Code::Unavailable,
            ErrorReason::StoreUnavailable,
            "evidence unavailable; retry",
            &[],
        ),
        ReconcileError::AwaitingWitness => error_status(
            Code::FailedPrecondition,
            ErrorReason::ReleaseAwaitingWitness,
            "the release is proposed with its evidence and awaits the witness; the hold is kept: \
             retry once the witness has attested",
            &[],
        ),
        ReconcileError::Store(e) => store_status(e),
    }
}

#[tonic::async_trait]
impl OperatorService for OperatorApi {
    async fn list_unresolved(
        &self,
        request: Request<pb::ListUnresolvedRequest>,
    ) -> Result<Response<pb::ListUnresolvedResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let limit = match request.get_ref().page_size {
            0 => 50,
            n if n < 0 => return Err(invalid_field("page_size", "must not be negative")),
            n => u32::try_from(n).unwrap_or(500).min(500),
        };
        let listed = self
            .store
            .unresolved_for_tenant(caller.tenant_id, limit)
            .await
            .map_err(store_status)?;
        Ok(Response::new(pb::ListUnresolvedResponse {
            withdrawals: listed
                .into_iter()
                .map(|l| {
                    let (owner, reason_code) = l.escalation.unwrap_or_default();
                    pb::UnresolvedWithdrawal {
                        withdrawal_id: l.op_id.to_string(),
                        state: convert::state_to_wire(l.state) as i32,
                        age_seconds: l.age_secs,
                        owner,
                        reason_code,
                    }
                })
                .collect(),
        }))
    }

    async fn resolve_withdrawal(
        &self,
        request: Request<pb::ResolveWithdrawalRequest>,
    ) -> Result<Response<pb::ResolveWithdrawalResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let body = request.into_inner();
        let op_id = convert::operation_id("withdrawal_id", &body.withdrawal_id)?;
        let outcome = convert::state_from_wire("outcome", body.outcome)?;
        if !matches!(
            outcome,
            OperationState::Confirmed | OperationState::VerifiedNotSent | OperationState::Broadcast
        ) {
            return Err(invalid_field(
                "outcome",
                "must be CONFIRMED, VERIFIED_NOT_SENT or BROADCAST",
            ));
        }
        let reason = body.reason.trim();
        if reason.is_empty() || reason.chars().count() > 200 || reason.chars().any(char::is_control)
        {
            return Err(invalid_field(
                "reason",
                "must be 1 to 200 printable characters",
            ));
        }
        let op = self
            .store
            .withdrawal(caller.tenant_id, op_id)
            .await
            .map_err(store_status)?;
        let unresolved = Unresolved {
            tenant_id: caller.tenant_id,
            op_id,
            state: op.state,
            network: op.payload.network.as_str().to_owned(),
        };
        let state = self
            .reconciler
            .resolve(&unresolved, outcome, &caller.key_id, reason)
            .await
            .map_err(reconcile_status)?;
        Ok(Response::new(pb::ResolveWithdrawalResponse {
            state: convert::state_to_wire(state) as i32,
        }))
    }
}
