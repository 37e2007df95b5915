//! `unresolved`, `resolve` (the reconciler's OperatorService).

use super::refusal::refused;
use crate::cli::Outcome;
use crate::client::{Service, Session};
use crate::error::{Done, Failure};
use crate::output::{Output, Report, age, table};
use crate::states::state_name;
use opledger_proto::v1 as pb;
use serde_json::json;

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.to_owned()
    }
}

fn unresolved_report(listed: &[pb::UnresolvedWithdrawal]) -> Report {
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|u| {
            vec![
                u.withdrawal_id.clone(),
                state_name(u.state),
                age(u.age_seconds),
                or_dash(&u.owner),
                or_dash(&u.reason_code),
            ]
        })
        .collect();
    Report {
        text: table(
            &["ID", "STATE", "AGE", "OWNER", "REASON"],
            &rows,
            "nothing unresolved",
        ),
        json: json!({
            "withdrawals": listed
                .iter()
                .map(|u| json!({
                    "withdrawal_id": u.withdrawal_id,
                    "state": state_name(u.state),
                    "age_seconds": u.age_seconds,
                    "owner": u.owner,
                    "reason_code": u.reason_code,
                }))
                .collect::<Vec<_>>(),
        }),
    }
}

pub async fn unresolved(session: &Session, out: &Output, page_size: i32) -> Result<Done, Failure> {
    let mut client = session.reconciler().await?;
    let listed = client
        .list_unresolved(session.request(pb::ListUnresolvedRequest { page_size }))
        .await
        .map_err(refused(Service::Reconciler))?
        .into_inner();
    out.report(&unresolved_report(&listed.withdrawals));
    Ok(Done::Ok)
}

pub async fn resolve(
    session: &Session,
    out: &Output,
    id: &str,
    outcome: Outcome,
    reason: &str,
) -> Result<Done, Failure> {
    let mut client = session.reconciler().await?;
    let done = client
        .resolve_withdrawal(session.request(pb::ResolveWithdrawalRequest {
            withdrawal_id: id.to_owned(),
            outcome: outcome.state() as i32,
            reason: reason.to_owned(),
        }))
        .await
        .map_err(refused(Service::Reconciler))?
        .into_inner();
    out.report(&Report {
        text: format!(
            "withdrawal     {id}\nstate          {}\n",
            state_name(done.state)
        ),
        json: json!({"withdrawal_id": id, "state": state_name(done.state)}),
    });
    Ok(Done::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unresolved_withdrawals_show_age_owner_and_reason() {
        let r = unresolved_report(&[
            pb::UnresolvedWithdrawal {
                withdrawal_id: "a".into(),
                state: pb::WithdrawalState::FailedTerminal as i32,
                age_seconds: 4_000,
                owner: "treasury-ops".into(),
                reason_code: "NO_VERDICT_WITHIN_WINDOW".into(),
            },
            pb::UnresolvedWithdrawal {
                withdrawal_id: "b".into(),
                state: pb::WithdrawalState::Unknown as i32,
                age_seconds: 12,
                owner: String::new(),
                reason_code: String::new(),
            },
        ]);
        let lines: Vec<&str> = r.text.lines().collect();
        assert_eq!(lines[0], "ID  STATE            AGE    OWNER         REASON");
        assert_eq!(
            lines[1],
            "a   FAILED_TERMINAL  1h06m  treasury-ops  NO_VERDICT_WITHIN_WINDOW"
        );
        assert_eq!(lines[2], "b   UNKNOWN          12s    -             -");
        assert_eq!(r.json["withdrawals"][1]["state"], "UNKNOWN");
        assert_eq!(r.json["withdrawals"][0]["age_seconds"], 4_000);
        assert_eq!(unresolved_report(&[]).text, "nothing unresolved\n");
    }
}
