//! The `ApprovalsService` gRPC handlers: authenticate, convert at the edge, call the store.

use opledger_domain::approval::{ApprovalStatement, Decision, Refusal};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::AssetCode;
use opledger_domain::policy::ApprovalPolicy;
use opledger_grpc::status::invalid_field;
use opledger_grpc::{
    Authenticator, ErrorReason, approval_refusal_status, convert, error_status, store_status,
    telemetry,
};
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_server::ApprovalsService;
use opledger_store::approvals::{Approve, AssetPolicy};
use opledger_store::keys::Role;
use opledger_store::roles::ApprovalsStore;
use std::collections::HashMap;
use std::sync::Arc;
use tonic::{Code, Request, Response, Status};

const DEFAULT_PAGE_SIZE: u32 = 50;
const MAX_PAGE_SIZE: u32 = 500;
const MAX_REASON_LEN: usize = 200;

/// The handlers' shared state.
#[derive(Debug, Clone)]
pub struct ApprovalsApi {
    store: ApprovalsStore,
    auth: Arc<Authenticator>,
}

impl ApprovalsApi {
    /// Handlers over this store and authenticator.
    pub fn new(store: ApprovalsStore, auth: Arc<Authenticator>) -> ApprovalsApi {
        ApprovalsApi { store, auth }
    }
}

/// Decodes the signed statement of a request and checks it is about this tenant, withdrawal and
/// decision (the signature itself is verified by the store against the trust statement, under
/// the operation's row lock).
fn signed_statement(
    tenant: TenantId,
    op_id: OperationId,
    decision: Decision,
    bytes: &[u8],
    signature: &[u8],
) -> Result<ApprovalStatement, Status> {
    if bytes.is_empty() {
        return Err(invalid_field(
            "approval_statement",
            "is required: the canonical approval statement the approver signed",
        ));
    }
    if signature.len() != 64 {
        return Err(invalid_field(
            "signature",
            "must be a 64-byte Ed25519 signature",
        ));
    }
    let statement = ApprovalStatement::decode(bytes).map_err(|e| {
        error_status(
            Code::FailedPrecondition,
            ErrorReason::ApprovalSignatureInvalid,
            format!("approval_statement is not a canonical approval statement: {e}"),
            &[],
        )
    })?;
    if statement.tenant_id != tenant
        || statement.operation_id != op_id
        || statement.decision != decision
    {
        return Err(approval_refusal_status(Refusal::OtherOperation {
            key_id: statement.approver_key_id,
        }));
    }
    Ok(statement)
}

fn asset(raw: &str) -> Result<AssetCode, Status> {
    AssetCode::parse(raw).map_err(|e| invalid_field("asset", &e.to_string()))
}

fn policy_to_wire(asset: &AssetCode, p: &AssetPolicy) -> pb::ApprovalPolicy {
    pb::ApprovalPolicy {
        asset: asset.as_str().to_owned(),
        policy_version: p.version,
        kyt_pass_required: p.kyt_pass_required,
        rules: p
            .policy
            .rules()
            .iter()
            .map(|r| pb::ApprovalRule {
                min_amount: r.min_amount.to_string(),
                required_approvals: r.required_approvals,
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl ApprovalsService for ApprovalsApi {
    async fn list_pending_approvals(
        &self,
        request: Request<pb::ListPendingApprovalsRequest>,
    ) -> Result<Response<pb::ListPendingApprovalsResponse>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Approver, Role::Operator])
            .await?;
        let body = request.into_inner();
        let limit = match body.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n if n < 0 => return Err(invalid_field("page_size", "must not be negative")),
            n => u32::try_from(n).unwrap_or(MAX_PAGE_SIZE).min(MAX_PAGE_SIZE),
        };
        let after = if body.page_token.is_empty() {
            None
        } else {
            Some(convert::operation_id("page_token", &body.page_token)?)
        };
        let mut pending = self
            .store
            .pending_approvals(caller.tenant_id, after, limit + 1)
            .await
            .map_err(store_status)?;
        let more = pending.len() > limit as usize;
        pending.truncate(limit as usize);
        let mut policies: HashMap<String, ApprovalPolicy> = HashMap::new();
        let trust = match self.store.trust_statement(caller.tenant_id).await {
            Ok(Some(stored)) => Some(stored.decode().map_err(store_status)?),
            Ok(None) => None,
            Err(e) => return Err(store_status(e)),
        };
        let mut out = Vec::with_capacity(pending.len());
        for p in &pending {
            let asset = &p.operation.payload.asset;
            if !policies.contains_key(asset.as_str()) {
                let policy = trust.as_ref().map(|t| t.policy(asset)).unwrap_or_default();
                policies.insert(asset.as_str().to_owned(), policy);
            }
            let required = policies
                .get(asset.as_str())
                .map_or(1, |policy| policy.required_for(p.operation.payload.amount));
            out.push(pb::PendingApproval {
                withdrawal: Some(convert::withdrawal(&p.operation)),
                approvals: p.approvals,
                required_approvals: required,
            });
        }
        let next_page_token = match (more, pending.last()) {
            (true, Some(last)) => last.operation.op_id.to_string(),
            _ => String::new(),
        };
        Ok(Response::new(pb::ListPendingApprovalsResponse {
            pending: out,
            next_page_token,
        }))
    }

    async fn approve_withdrawal(
        &self,
        request: Request<pb::ApproveWithdrawalRequest>,
    ) -> Result<Response<pb::ApproveWithdrawalResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Approver]).await?;
        let remote = telemetry::grpc::has_remote_parent(request.extensions());
        let body = request.into_inner();
        let op_id: OperationId = convert::operation_id("withdrawal_id", &body.withdrawal_id)?;
        if telemetry::enabled() {
            // The approval joins the trace of the withdrawal's creation (linked when the caller
            // sent its own trace context).
            let stored = self.store.trace_context(caller.tenant_id, op_id).await;
            let stored = stored.ok().flatten();
            telemetry::propagation::join_operation_trace(
                &tracing::Span::current(),
                remote,
                stored.as_deref(),
            );
        }
        let statement = signed_statement(
            caller.tenant_id,
            op_id,
            Decision::Approve,
            &body.approval_statement,
            &body.signature,
        )?;
        // The acknowledgement that counts is the one inside the signed statement; the request's
        // list, when sent, must say the same (a client that signs one thing and sends another is
        // refused rather than half believed).
        let acknowledged = convert::risk_flags_from_wire(
            "acknowledged_risk_flags",
            &body.acknowledged_risk_flags,
        )?;
        if !body.acknowledged_risk_flags.is_empty() && acknowledged != statement.acknowledged {
            return Err(invalid_field(
                "acknowledged_risk_flags",
                "differs from the risk flags the signed approval_statement acknowledges (field 7)",
            ));
        }
        let approved = self
            .store
            .approve(&Approve {
                approver_id: &caller.key_id,
                statement,
                signature: &body.signature,
            })
            .await
            .map_err(store_status)?;
        tracing::info!(
            %op_id,
            approvals = approved.approvals,
            required = approved.required,
            state = approved.state.as_str(),
            "approval recorded"
        );
        Ok(Response::new(pb::ApproveWithdrawalResponse {
            state: convert::state_to_wire(approved.state) as i32,
            approvals: approved.approvals,
            required_approvals: approved.required,
            already_approved: approved.already_approved,
            approve_time: Some(convert::timestamp(approved.approved_at)),
        }))
    }

    async fn reject_withdrawal(
        &self,
        request: Request<pb::RejectWithdrawalRequest>,
    ) -> Result<Response<pb::RejectWithdrawalResponse>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Approver, Role::Operator])
            .await?;
        let body = request.into_inner();
        let op_id = convert::operation_id("withdrawal_id", &body.withdrawal_id)?;
        let reason = body.reason.trim();
        if reason.is_empty()
            || reason.chars().count() > MAX_REASON_LEN
            || reason.chars().any(char::is_control)
        {
            return Err(invalid_field(
                "reason",
                "must be 1 to 200 printable characters",
            ));
        }
        let statement = signed_statement(
            caller.tenant_id,
            op_id,
            Decision::Reject,
            &body.approval_statement,
            &body.signature,
        )?;
        self.store
            .reject(
                &Approve {
                    approver_id: &caller.key_id,
                    statement,
                    signature: &body.signature,
                },
                reason,
            )
            .await
            .map_err(store_status)?;
        tracing::info!(%op_id, "withdrawal rejected, hold released");
        Ok(Response::new(pb::RejectWithdrawalResponse {
            state: pb::WithdrawalState::Rejected as i32,
        }))
    }

    async fn get_approval_policy(
        &self,
        request: Request<pb::GetApprovalPolicyRequest>,
    ) -> Result<Response<pb::ApprovalPolicy>, Status> {
        let caller = self
            .auth
            .authorize(&request, &[Role::Approver, Role::Operator])
            .await?;
        let asset = asset(&request.get_ref().asset)?;
        let policy = self
            .store
            .approval_policy(caller.tenant_id, &asset)
            .await
            .map_err(store_status)?;
        Ok(Response::new(policy_to_wire(&asset, &policy)))
    }
}
