//! `custodian candidates`, `custodian bind` (the custodian executor's CustodianOperatorService).
//! A withdrawal executed by a custodian that cannot be asked for our reference (`no_lookup`)
//! stays UNKNOWN after an ambiguous answer; the operator lists the provider's transactions that
//! may be its own and binds the one that is, with a reason. What the provider wrote (ids,
//! statuses, hashes, times) is printed with its control characters escaped, to the operator who
//! asked only.

use super::refusal::refused;
use crate::cli::CustodianCommand;
use crate::client::{Service, Session};
use crate::error::{Done, Failure};
use crate::output::{Output, Report, printable, table};
use crate::states::state_name;
use opledger_proto::v1 as pb;
use serde_json::{Value, json};

pub async fn run(
    session: &Session,
    out: &Output,
    command: &CustodianCommand,
) -> Result<Done, Failure> {
    let mut client = session.custodian().await?;
    let report = match command {
        CustodianCommand::Candidates { id } => {
            let listed = client
                .list_custodian_candidates(session.request(pb::ListCustodianCandidatesRequest {
                    withdrawal_id: id.clone(),
                }))
                .await
                .map_err(refused(Service::Custodian))?
                .into_inner();
            candidates_report(id, &listed)
        }
        CustodianCommand::Bind {
            id,
            provider_id,
            reason,
        } => {
            let bound = client
                .bind_custodian_candidate(session.request(pb::BindCustodianCandidateRequest {
                    withdrawal_id: id.clone(),
                    provider_id: provider_id.clone(),
                    reason: reason.clone(),
                }))
                .await
                .map_err(refused(Service::Custodian))?
                .into_inner();
            bound_report(id, &bound)
        }
    };
    out.report(&report);
    Ok(Done::Ok)
}

/// A field of the provider's answer for scripts: `null` when empty.
fn given(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        Value::from(text)
    }
}

fn candidates_report(id: &str, listed: &pb::ListCustodianCandidatesResponse) -> Report {
    let state = state_name(listed.state);
    let rows: Vec<Vec<String>> = listed
        .candidates
        .iter()
        .map(|c| {
            vec![
                printable(&c.provider_id),
                printable(&c.status),
                printable(&c.tx_hashes.join(",")),
                printable(&c.created_at),
                printable(&c.completed_at),
            ]
        })
        .collect();
    let mut text = format!(
        "{:<15}{id}\n{:<15}{state}\n{:<15}{}\n\n",
        "withdrawal",
        "state",
        "bound to",
        printable(&listed.bound_provider_id)
    );
    text.push_str(&table(
        &["PROVIDER ID", "STATUS", "TX HASHES", "CREATED", "COMPLETED"],
        &rows,
        "no candidates: the provider lists no transaction with this withdrawal's destination and \
         amount in its window now (a provider's list can lag: list again later)",
    ));
    if !listed.bound_provider_id.is_empty() {
        text.push_str(
            "\nbound: the executor follows that transaction; a binding is never changed\n",
        );
    } else if !rows.is_empty() && matches!(state.as_str(), "UNKNOWN" | "BROADCAST") {
        text.push_str(&format!(
            "\nbind the one that is this withdrawal's: opctl custodian bind {id} <PROVIDER ID> \
             --reason \"...\"\n"
        ));
    }
    Report {
        text,
        json: json!({
            "withdrawal_id": id,
            "state": state,
            "bound_provider_id": given(&listed.bound_provider_id),
            "candidates": listed
                .candidates
                .iter()
                .map(|c| json!({
                    "provider_id": c.provider_id,
                    "status": c.status,
                    "tx_hashes": c.tx_hashes,
                    "created_at": given(&c.created_at),
                    "completed_at": given(&c.completed_at),
                }))
                .collect::<Vec<_>>(),
        }),
    }
}

fn bound_report(id: &str, bound: &pb::BindCustodianCandidateResponse) -> Report {
    Report {
        text: format!(
            "{:<15}{id}\n{:<15}{}\n",
            "withdrawal",
            "bound to",
            printable(&bound.bound_provider_id)
        ),
        json: json!({"withdrawal_id": id, "bound_provider_id": bound.bound_provider_id}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::failure_text;
    use tonic_types::StatusExt;

    const ID: &str = "0190c4c8-4b5d-7c6e-8f90-123456789abc";
    const HASH: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";

    fn candidate(provider_id: &str, status: &str, hashes: &[&str]) -> pb::CustodianCandidate {
        pb::CustodianCandidate {
            provider_id: provider_id.into(),
            status: status.into(),
            tx_hashes: hashes.iter().map(|h| (*h).to_owned()).collect(),
            created_at: "2026-12-11T10:00:00+00:00".into(),
            completed_at: String::new(),
        }
    }

    fn listed(
        state: pb::WithdrawalState,
        bound: &str,
        candidates: Vec<pb::CustodianCandidate>,
    ) -> pb::ListCustodianCandidatesResponse {
        pb::ListCustodianCandidatesResponse {
            candidates,
            bound_provider_id: bound.into(),
            state: state as i32,
        }
    }

    #[test]
    fn candidates_show_state_binding_and_one_row_each() {
        let r = candidates_report(
            ID,
            &listed(
                pb::WithdrawalState::Unknown,
                "",
                vec![
                    candidate("tx-paid", "TRANSACTION_DONE", &[HASH]),
                    candidate("tx-retried", "TRANSACTION_RETRIED", &[]),
                ],
            ),
        );
        let lines: Vec<&str> = r.text.lines().collect();
        assert_eq!(lines[0], format!("withdrawal     {ID}"));
        assert_eq!(lines[1], "state          UNKNOWN");
        assert_eq!(lines[2], "bound to       -");
        assert_eq!(lines[3], "");
        assert!(
            lines[4].starts_with("PROVIDER ID  STATUS               TX HASHES"),
            "{}",
            lines[4]
        );
        assert!(lines[4].ends_with("CREATED                    COMPLETED"));
        assert_eq!(
            lines[5],
            format!("tx-paid      TRANSACTION_DONE     {HASH}  2026-12-11T10:00:00+00:00  -")
        );
        assert!(lines[6].starts_with("tx-retried   TRANSACTION_RETRIED  -  "));
        assert_eq!(
            lines[8],
            format!(
                "bind the one that is this withdrawal's: opctl custodian bind {ID} \
                 <PROVIDER ID> --reason \"...\""
            )
        );
        assert_eq!(r.json["withdrawal_id"], ID);
        assert_eq!(r.json["state"], "UNKNOWN");
        assert_eq!(r.json["bound_provider_id"], Value::Null);
        assert_eq!(r.json["candidates"][0]["tx_hashes"], json!([HASH]));
        assert_eq!(r.json["candidates"][1]["tx_hashes"], json!([]));
        assert_eq!(
            r.json["candidates"][0]["created_at"],
            "2026-12-11T10:00:00+00:00"
        );
        assert_eq!(r.json["candidates"][0]["completed_at"], Value::Null);
    }

    #[test]
    fn a_bound_withdrawal_says_so_and_invites_no_binding() {
        let r = candidates_report(
            ID,
            &listed(
                pb::WithdrawalState::Unknown,
                "tx-paid",
                vec![candidate("tx-paid", "TRANSACTION_DONE", &[HASH, HASH])],
            ),
        );
        assert!(r.text.contains("\nbound to       tx-paid\n"), "{}", r.text);
        assert!(r.text.contains(&format!("{HASH},{HASH}")), "{}", r.text);
        assert!(
            r.text.ends_with("a binding is never changed\n"),
            "{}",
            r.text
        );
        assert!(!r.text.contains("opctl custodian bind"));
        assert_eq!(r.json["bound_provider_id"], "tx-paid");
    }

    #[test]
    fn no_candidates_or_a_settled_withdrawal_invite_no_binding() {
        let empty = candidates_report(ID, &listed(pb::WithdrawalState::Unknown, "", vec![]));
        assert!(
            empty
                .text
                .contains("\nno candidates: the provider lists no transaction"),
            "{}",
            empty.text
        );
        assert!(!empty.text.contains("opctl custodian bind"));
        assert_eq!(empty.json["candidates"], json!([]));
        let done = candidates_report(
            ID,
            &listed(
                pb::WithdrawalState::Confirmed,
                "",
                vec![candidate("tx", "TRANSACTION_DONE", &[HASH])],
            ),
        );
        assert!(done.text.contains("state          CONFIRMED\n"));
        assert!(!done.text.contains("opctl custodian bind"));
    }

    /// A provider's answer carrying terminal control sequences cannot rewrite the operator's
    /// screen; scripts get it as the provider wrote it.
    #[test]
    fn what_the_provider_wrote_is_escaped_for_people() {
        let mut forged = candidate("tx\u{1b}[2K", "DONE\r\u{202e}", &[]);
        forged.completed_at = "\n".into();
        let r = candidates_report(ID, &listed(pb::WithdrawalState::Unknown, "", vec![forged]));
        assert!(
            !r.text.contains(['\u{1b}', '\r', '\u{202e}']),
            "{:?}",
            r.text
        );
        assert!(r.text.contains("tx\\u{1b}[2K"), "{}", r.text);
        assert_eq!(r.json["candidates"][0]["provider_id"], "tx\u{1b}[2K");
        let bound = bound_report(
            ID,
            &pb::BindCustodianCandidateResponse {
                bound_provider_id: "b\u{7}".into(),
            },
        );
        assert_eq!(
            bound.text,
            format!("withdrawal     {ID}\nbound to       b\\u{{7}}\n")
        );
        assert_eq!(bound.json["bound_provider_id"], "b\u{7}");
    }

    /// A refusal as the executor sends it: the code, the message, and `ErrorInfo` with the
    /// reason (and the field, for an invalid one).
    fn refusal(code: tonic::Code, reason: &str, field: Option<&str>) -> String {
        let mut details = tonic_types::ErrorDetails::new();
        details.set_error_info(
            reason,
            opledger_proto::ERROR_DOMAIN,
            field
                .map(|f| std::collections::HashMap::from([("field".to_owned(), f.to_owned())]))
                .unwrap_or_default(),
        );
        let status = tonic::Status::with_error_details(code, "refused", details);
        failure_text(&refused(Service::Custodian)(status))
    }

    #[test]
    fn refusals_say_what_happened_and_what_to_do() {
        use tonic::Code;
        for (code, reason, field, says) in [
            (Code::FailedPrecondition, "NOT_BINDABLE", None, "no_lookup"),
            (
                Code::FailedPrecondition,
                "CANDIDATE_NOT_LISTED",
                None,
                "list again with opctl custodian candidates",
            ),
            (
                Code::AlreadyExists,
                "CANDIDATE_TAKEN",
                None,
                "a binding is never changed",
            ),
            (
                Code::FailedPrecondition,
                "CANDIDATE_AMBIGUOUS",
                None,
                "bind that one to the withdrawal it paid first",
            ),
            (
                Code::Unavailable,
                "PROVIDER_UNAVAILABLE",
                None,
                "run the same command again",
            ),
            (
                Code::PermissionDenied,
                "ROLE_NOT_ALLOWED",
                None,
                "opledger-admin key create --role",
            ),
            (
                Code::InvalidArgument,
                "INVALID_FIELD",
                Some("reason"),
                "give --reason",
            ),
            (
                Code::InvalidArgument,
                "INVALID_FIELD",
                Some("provider_id"),
                "PROVIDER ID exactly",
            ),
        ] {
            let text = refusal(code, reason, field);
            assert!(
                text.starts_with(&format!("error: {reason}: refused\n")),
                "{text}"
            );
            assert!(text.contains(says), "{reason}: {text}");
        }
        // UNAVAILABLE is also transient (exit 3); a field opctl has no advice for shows the
        // service's words alone.
        assert!(refusal(Code::Unavailable, "PROVIDER_UNAVAILABLE", None).contains("transient"));
        assert_eq!(
            refusal(
                Code::InvalidArgument,
                "INVALID_FIELD",
                Some("withdrawal_id")
            ),
            "error: INVALID_FIELD: refused\n  field: withdrawal_id\n"
        );
    }
}
