//! `InboxService`: dead letters, quarantines and UNHANDLED events for the operator role, and the
//! two things a person may do with them: replay a dead letter, or resolve an issue with a reason.

use opledger_grpc::status::invalid_field;
use opledger_grpc::{Authenticator, store_status};
use opledger_proto::v1 as pb;
use opledger_proto::v1::inbox_service_server::InboxService;
use opledger_store::inbox::IssueKind;
use opledger_store::keys::Role;
use opledger_store::roles::InboxStore;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The handlers.
#[derive(Debug, Clone)]
pub struct InboxApi {
    store: InboxStore,
    auth: Arc<Authenticator>,
}

impl InboxApi {
    /// Handlers over this store and authenticator.
    pub fn new(store: InboxStore, auth: Arc<Authenticator>) -> InboxApi {
        InboxApi { store, auth }
    }
}

fn reason_of(text: &str) -> Result<&str, Status> {
    let reason = text.trim();
    if reason.is_empty() || reason.chars().count() > 200 || reason.chars().any(char::is_control) {
        return Err(invalid_field(
            "reason",
            "must be 1 to 200 printable characters",
        ));
    }
    Ok(reason)
}

fn inbox_id_of(id: i64) -> Result<i64, Status> {
    if id <= 0 {
        return Err(invalid_field("inbox_id", "must be a positive inbox id"));
    }
    Ok(id)
}

fn kind_to_wire(kind: IssueKind) -> pb::InboxIssueKind {
    match kind {
        IssueKind::DeadLetter => pb::InboxIssueKind::DeadLetter,
        IssueKind::Quarantined => pb::InboxIssueKind::Quarantined,
        IssueKind::Unhandled => pb::InboxIssueKind::Unhandled,
    }
}

#[tonic::async_trait]
impl InboxService for InboxApi {
    async fn list_inbox_issues(
        &self,
        request: Request<pb::ListInboxIssuesRequest>,
    ) -> Result<Response<pb::ListInboxIssuesResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let limit = match request.get_ref().page_size {
            0 => 50,
            n if n < 0 => return Err(invalid_field("page_size", "must not be negative")),
            n => u32::try_from(n).unwrap_or(500).min(500),
        };
        let issues = self
            .store
            .inbox_issues(caller.tenant_id, limit)
            .await
            .map_err(store_status)?;
        let now = chrono::Utc::now();
        Ok(Response::new(pb::ListInboxIssuesResponse {
            issues: issues
                .into_iter()
                .map(|i| pb::InboxIssue {
                    inbox_id: i.inbox_id,
                    kind: kind_to_wire(i.kind) as i32,
                    source: i.source,
                    event_type: i.event_type.unwrap_or_default(),
                    age_seconds: (now - i.received_at).num_seconds().max(0),
                    owner: i.owner.unwrap_or_default(),
                    reason_code: i.reason,
                    attempts: i.attempts,
                })
                .collect(),
        }))
    }

    async fn replay_inbox_item(
        &self,
        request: Request<pb::ReplayInboxItemRequest>,
    ) -> Result<Response<pb::ReplayInboxItemResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let body = request.get_ref();
        let inbox_id = inbox_id_of(body.inbox_id)?;
        let reason = reason_of(&body.reason)?;
        self.store
            .replay_dead_letter(caller.tenant_id, inbox_id, &caller.key_id, reason)
            .await
            .map_err(store_status)?;
        tracing::info!(inbox_id, "dead letter replayed by an operator");
        Ok(Response::new(pb::ReplayInboxItemResponse {}))
    }

    async fn resolve_inbox_item(
        &self,
        request: Request<pb::ResolveInboxItemRequest>,
    ) -> Result<Response<pb::ResolveInboxItemResponse>, Status> {
        let caller = self.auth.authorize(&request, &[Role::Operator]).await?;
        let body = request.get_ref();
        let inbox_id = inbox_id_of(body.inbox_id)?;
        let reason = reason_of(&body.reason)?;
        self.store
            .resolve_inbox_issue(caller.tenant_id, inbox_id, &caller.key_id, reason)
            .await
            .map_err(store_status)?;
        tracing::info!(inbox_id, "inbox issue resolved by an operator");
        Ok(Response::new(pb::ResolveInboxItemResponse {}))
    }
}
