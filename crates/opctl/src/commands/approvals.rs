//! `approve`, `reject` (ApprovalsService; approve reads the withdrawal from OperationsService).

use super::refused;
use super::withdrawals::fetch;
use crate::cli::ApproveArgs;
use crate::client::{Service, Session};
use crate::error::{Done, Failure};
use crate::output::{Output, Report, rfc3339, risk_flags};
use crate::states::state_name;
use opledger_proto::v1 as pb;
use serde_json::json;

/// What to approve: the withdrawal's own hash and, only when acknowledged, its risk flags.
fn approval_request(
    w: &pb::Withdrawal,
    args: &ApproveArgs,
) -> Result<pb::ApproveWithdrawalRequest, Failure> {
    if let Some(reviewed) = &args.payload_hash
        && !reviewed.trim().eq_ignore_ascii_case(&w.payload_hash)
    {
        return Err(Failure::refused_locally(
            "PAYLOAD_HASH_MISMATCH",
            "the withdrawal's payload hash is not the one given with --payload-hash; review it \
             again (opctl get) before approving",
            &[],
        ));
    }
    if !w.risk_flags.is_empty() && !args.ack_risk {
        let flags = risk_flags(w).join(",");
        return Err(Failure::refused_locally(
            "RISK_FLAGS_NOT_ACKNOWLEDGED",
            format!(
                "the withdrawal carries risk flags ({flags}); review it (opctl get) and approve \
                 with --ack-risk to acknowledge them explicitly"
            ),
            &[("flags", flags.clone())],
        ));
    }
    Ok(pb::ApproveWithdrawalRequest {
        withdrawal_id: w.withdrawal_id.clone(),
        payload_hash: w.payload_hash.clone(),
        acknowledged_risk_flags: if args.ack_risk {
            w.risk_flags.clone()
        } else {
            Vec::new()
        },
    })
}

fn approved_report(
    w: &pb::Withdrawal,
    sent: &pb::ApproveWithdrawalRequest,
    done: &pb::ApproveWithdrawalResponse,
) -> Report {
    let acknowledged: Vec<String> = sent
        .acknowledged_risk_flags
        .iter()
        .map(|f| crate::states::risk_flag_name(*f))
        .collect();
    let mut text = format!(
        "{}withdrawal     {}\nstate          {}\napprovals      {} of {}\npayload hash   {}\n",
        if done.already_approved {
            "already approved by this key (it counts once)\n"
        } else {
            ""
        },
        w.withdrawal_id,
        state_name(done.state),
        done.approvals,
        done.required_approvals,
        w.payload_hash,
    );
    if !acknowledged.is_empty() {
        text.push_str(&format!("acknowledged   {}\n", acknowledged.join(", ")));
    }
    Report {
        text,
        json: json!({
            "withdrawal_id": w.withdrawal_id,
            "state": state_name(done.state),
            "approvals": done.approvals,
            "required_approvals": done.required_approvals,
            "already_approved": done.already_approved,
            "payload_hash": w.payload_hash,
            "acknowledged_risk_flags": acknowledged,
            "approve_time": done.approve_time.as_ref().map(rfc3339),
        }),
    }
}

pub async fn approve(session: &Session, out: &Output, args: &ApproveArgs) -> Result<Done, Failure> {
    let w = fetch(session, &args.id).await?;
    let request = approval_request(&w, args)?;
    let mut client = session.approvals().await?;
    let done = client
        .approve_withdrawal(session.request(request.clone()))
        .await
        .map_err(refused(Service::Approvals))?
        .into_inner();
    out.report(&approved_report(&w, &request, &done));
    Ok(Done::Ok)
}

pub async fn reject(
    session: &Session,
    out: &Output,
    id: &str,
    reason: &str,
) -> Result<Done, Failure> {
    let mut client = session.approvals().await?;
    let done = client
        .reject_withdrawal(session.request(pb::RejectWithdrawalRequest {
            withdrawal_id: id.to_owned(),
            reason: reason.to_owned(),
        }))
        .await
        .map_err(refused(Service::Approvals))?
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

    fn flagged() -> pb::Withdrawal {
        pb::Withdrawal {
            withdrawal_id: "0190c4c8-4b5d-7c6e-8f90-123456789abc".into(),
            payload_hash: "ab".repeat(32),
            state: pb::WithdrawalState::Requested as i32,
            risk_flags: vec![pb::RiskFlag::SameDestinationAndAmount as i32],
            ..Default::default()
        }
    }

    fn args(ack_risk: bool, payload_hash: Option<&str>) -> ApproveArgs {
        ApproveArgs {
            id: "0190c4c8-4b5d-7c6e-8f90-123456789abc".into(),
            ack_risk,
            payload_hash: payload_hash.map(str::to_owned),
        }
    }

    #[test]
    fn risk_flags_need_an_explicit_acknowledgement() {
        let f = approval_request(&flagged(), &args(false, None)).expect_err("unacknowledged");
        assert_eq!(f.exit_code(), 1);
        assert_eq!(f.reason, "RISK_FLAGS_NOT_ACKNOWLEDGED");
        assert!(f.message.contains("--ack-risk"));
        let request = approval_request(&flagged(), &args(true, None)).expect("acknowledged");
        assert_eq!(
            request.acknowledged_risk_flags,
            vec![pb::RiskFlag::SameDestinationAndAmount as i32]
        );
        assert_eq!(request.payload_hash, "ab".repeat(32));
        let mut plain = flagged();
        plain.risk_flags.clear();
        let request = approval_request(&plain, &args(false, None)).expect("no flags");
        assert!(request.acknowledged_risk_flags.is_empty());
    }

    #[test]
    fn a_reviewed_hash_must_be_the_withdrawals() {
        let hash = "AB".repeat(32);
        assert!(approval_request(&flagged(), &args(true, Some(&hash))).is_ok());
        let f = approval_request(&flagged(), &args(true, Some("00"))).expect_err("differs");
        assert_eq!(
            (f.reason.as_str(), f.exit_code()),
            ("PAYLOAD_HASH_MISMATCH", 1)
        );
    }

    #[test]
    fn approvals_report_progress_towards_the_policy() {
        let done = pb::ApproveWithdrawalResponse {
            state: pb::WithdrawalState::Requested as i32,
            approvals: 1,
            required_approvals: 2,
            already_approved: false,
            approve_time: None,
        };
        let sent = approval_request(&flagged(), &args(true, None)).expect("acknowledged");
        let r = approved_report(&flagged(), &sent, &done);
        assert!(r.text.contains("approvals      1 of 2"));
        assert_eq!(r.json["state"], "REQUESTED");
        assert_eq!(
            r.json["acknowledged_risk_flags"],
            json!(["SAME_DESTINATION_AND_AMOUNT"])
        );
    }
}
