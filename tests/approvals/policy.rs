//! Approval policy validation and defaults.

use opledger_proto::v1::{ApprovalRule, GetApprovalPolicyRequest, SetApprovalPolicyRequest};
use opledger_tests::{Stack, authed, reason};

#[tokio::test]
async fn policies_default_to_one_approver_and_refuse_invalid_rules() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let mut approvals = stack.approvals().await?;
    let default = approvals
        .get_approval_policy(authed(
            &acme.approver,
            GetApprovalPolicyRequest {
                asset: "ETH".into(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(
        default.rules,
        vec![ApprovalRule {
            min_amount: "0".into(),
            required_approvals: 1
        }]
    );
    let rule = |min: &str, n| ApprovalRule {
        min_amount: min.into(),
        required_approvals: n,
    };
    for rules in [
        vec![rule("5", 1)],
        vec![rule("0", 0)],
        vec![rule("0", 11)],
        vec![rule("0", 1), rule("0", 2)],
        vec![rule("01", 1)],
        vec![],
    ] {
        let err = approvals
            .set_approval_policy(authed(
                &acme.operator,
                SetApprovalPolicyRequest {
                    asset: "ETH".into(),
                    rules,
                },
            ))
            .await
            .expect_err("invalid policy");
        assert_eq!(reason(&err), "INVALID_FIELD");
    }
    let err = approvals
        .set_approval_policy(authed(
            &acme.approver,
            SetApprovalPolicyRequest {
                asset: "ETH".into(),
                rules: vec![rule("0", 2)],
            },
        ))
        .await
        .expect_err("approvers cannot change their own policy");
    assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");
    let set = approvals
        .set_approval_policy(authed(
            &acme.operator,
            SetApprovalPolicyRequest {
                asset: "ETH".into(),
                rules: vec![rule("1000000", 3), rule("0", 1), rule("1000", 2)],
            },
        ))
        .await?
        .into_inner();
    assert_eq!(
        set.rules,
        vec![rule("0", 1), rule("1000", 2), rule("1000000", 3)],
        "sorted"
    );
    let got = approvals
        .get_approval_policy(authed(
            &acme.approver,
            GetApprovalPolicyRequest {
                asset: "ETH".into(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(got, set);
    Ok(())
}
