//! `inbox issues`, `inbox replay`, `inbox resolve` (InboxService).

use super::refusal::refused;
use crate::cli::InboxCommand;
use crate::client::{Service, Session};
use crate::error::{Done, Failure};
use crate::output::{Output, Report, age, table};
use crate::states::inbox_kind_name;
use opledger_proto::v1 as pb;
use serde_json::json;

pub async fn run(session: &Session, out: &Output, command: &InboxCommand) -> Result<Done, Failure> {
    let mut client = session.inbox().await?;
    let report = match command {
        InboxCommand::Issues { page_size } => {
            let listed = client
                .list_inbox_issues(session.request(pb::ListInboxIssuesRequest {
                    page_size: page_size.unwrap_or(0),
                }))
                .await
                .map_err(refused(Service::Inbox))?
                .into_inner();
            issues_report(&listed.issues)
        }
        InboxCommand::Replay { inbox_id, reason } => {
            client
                .replay_inbox_item(session.request(pb::ReplayInboxItemRequest {
                    inbox_id: *inbox_id,
                    reason: reason.clone(),
                }))
                .await
                .map_err(refused(Service::Inbox))?;
            action_report(*inbox_id, "replayed")
        }
        InboxCommand::Resolve { inbox_id, reason } => {
            client
                .resolve_inbox_item(session.request(pb::ResolveInboxItemRequest {
                    inbox_id: *inbox_id,
                    reason: reason.clone(),
                }))
                .await
                .map_err(refused(Service::Inbox))?;
            action_report(*inbox_id, "resolved")
        }
    };
    out.report(&report);
    Ok(Done::Ok)
}

fn action_report(inbox_id: i64, action: &str) -> Report {
    Report {
        text: format!("inbox item {inbox_id} {action}\n"),
        json: json!({"inbox_id": inbox_id, "action": action}),
    }
}

fn issues_report(issues: &[pb::InboxIssue]) -> Report {
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    let rows: Vec<Vec<String>> = issues
        .iter()
        .map(|i| {
            vec![
                i.inbox_id.to_string(),
                inbox_kind_name(i.kind),
                dash(&i.source),
                dash(&i.event_type),
                age(i.age_seconds),
                dash(&i.owner),
                dash(&i.reason_code),
                i.attempts.to_string(),
            ]
        })
        .collect();
    Report {
        text: table(
            &[
                "INBOX_ID", "KIND", "SOURCE", "TYPE", "AGE", "OWNER", "REASON", "ATTEMPTS",
            ],
            &rows,
            "no inbox issues",
        ),
        json: json!({
            "issues": issues
                .iter()
                .map(|i| json!({
                    "inbox_id": i.inbox_id,
                    "kind": inbox_kind_name(i.kind),
                    "source": i.source,
                    "event_type": i.event_type,
                    "age_seconds": i.age_seconds,
                    "owner": i.owner,
                    "reason_code": i.reason_code,
                    "attempts": i.attempts,
                }))
                .collect::<Vec<_>>(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_render_with_kind_names() {
        let r = issues_report(&[pb::InboxIssue {
            inbox_id: 7,
            kind: pb::InboxIssueKind::Quarantined as i32,
            source: "chainwatch".into(),
            event_type: "deposit.credited".into(),
            age_seconds: 61,
            owner: String::new(),
            reason_code: "DIFFERENT_BODY".into(),
            attempts: 0,
        }]);
        assert_eq!(r.json["issues"][0]["kind"], "QUARANTINED");
        let row = r.text.lines().nth(1).unwrap_or_default();
        assert!(row.starts_with("7  "), "{row}");
        assert!(row.contains("QUARANTINED") && row.contains("1m01s") && row.contains(" - "));
        assert_eq!(issues_report(&[]).text, "no inbox issues\n");
        assert_eq!(action_report(3, "replayed").json["action"], "replayed");
    }
}
