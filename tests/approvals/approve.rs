//! Approving: the exact hash, distinct approvers, acknowledged risk flags.

use futures::future::join_all;
use opledger_proto::v1::{
    ApprovalRule, ApproveWithdrawalRequest, GetWithdrawalRequest, RiskFlag,
    SetApprovalPolicyRequest, WithdrawalState,
};
use opledger_store::keys::Role;
use opledger_tests::{ALICE, BOB, Stack, authed, reason};

fn approve(w: &opledger_proto::v1::Withdrawal) -> ApproveWithdrawalRequest {
    ApproveWithdrawalRequest {
        withdrawal_id: w.withdrawal_id.clone(),
        payload_hash: w.payload_hash.clone(),
        acknowledged_risk_flags: vec![],
    }
}

#[tokio::test]
async fn an_approval_of_a_stale_hash_is_refused_recorded_and_changes_nothing() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let mut approvals = stack.approvals().await?;
    // The hash of a payload the approver may have seen before a change: any other hash.
    let mut stale = approve(&w);
    stale.payload_hash = format!(
        "{}{}",
        &w.payload_hash[..63],
        if w.payload_hash.ends_with('0') {
            '1'
        } else {
            '0'
        }
    );
    let err = approvals
        .approve_withdrawal(authed(&acme.approver, stale))
        .await
        .expect_err("stale hash");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&err), "PAYLOAD_HASH_MISMATCH");
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
    assert_eq!(stack.count("security_events", acme.id).await?, 1);
    let err = approvals
        .approve_withdrawal(authed(
            &acme.approver,
            ApproveWithdrawalRequest {
                payload_hash: "xyz".into(),
                ..approve(&w)
            },
        ))
        .await
        .expect_err("malformed hash");
    assert_eq!(reason(&err), "INVALID_FIELD");
    let mut ops = stack.client().await?;
    let now = ops
        .get_withdrawal(authed(
            &acme.client,
            GetWithdrawalRequest {
                withdrawal_id: w.withdrawal_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(now.state, WithdrawalState::Requested as i32);
    assert_eq!(now.version, w.version);
    Ok(())
}

#[tokio::test]
async fn two_approvers_are_required_above_the_threshold_and_one_cannot_count_twice()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "100000").await?;
    let mut approvals = stack.approvals().await?;
    approvals
        .set_approval_policy(authed(
            &acme.operator,
            SetApprovalPolicyRequest {
                asset: "ETH".into(),
                rules: vec![
                    ApprovalRule {
                        min_amount: "0".into(),
                        required_approvals: 1,
                    },
                    ApprovalRule {
                        min_amount: "1000".into(),
                        required_approvals: 2,
                    },
                ],
            },
        ))
        .await?;
    let big = stack.withdraw(&acme, "1000", ALICE).await?;
    let first = approvals
        .approve_withdrawal(authed(&acme.approver, approve(&big)))
        .await?
        .into_inner();
    assert_eq!(
        (first.state, first.approvals, first.required_approvals),
        (WithdrawalState::Requested as i32, 1, 2)
    );
    let again = approvals
        .approve_withdrawal(authed(&acme.approver, approve(&big)))
        .await?
        .into_inner();
    assert!(
        again.already_approved,
        "the same approver does not count twice"
    );
    assert_eq!(
        (again.state, again.approvals),
        (WithdrawalState::Requested as i32, 1)
    );
    let second_approver = stack.key(&acme, Role::Approver).await?;
    let second = approvals
        .approve_withdrawal(authed(&second_approver, approve(&big)))
        .await?
        .into_inner();
    assert_eq!(
        (second.state, second.approvals, second.required_approvals),
        (WithdrawalState::Approved as i32, 2, 2)
    );
    // A late approver finds it no longer pending; a repeat of a counted approval is answered.
    let third_approver = stack.key(&acme, Role::Approver).await?;
    let err = approvals
        .approve_withdrawal(authed(&third_approver, approve(&big)))
        .await
        .expect_err("late");
    assert_eq!(reason(&err), "NOT_PENDING_APPROVAL");
    let repeat = approvals
        .approve_withdrawal(authed(&second_approver, approve(&big)))
        .await?
        .into_inner();
    assert!(repeat.already_approved);
    assert_eq!(repeat.state, WithdrawalState::Approved as i32);

    // Below the threshold one approver is enough.
    let small = stack.withdraw(&acme, "999", BOB).await?;
    let done = approvals
        .approve_withdrawal(authed(&acme.approver, approve(&small)))
        .await?
        .into_inner();
    assert_eq!(
        (done.state, done.required_approvals),
        (WithdrawalState::Approved as i32, 1)
    );
    assert_eq!(stack.count("approvals", acme.id).await?, 3);
    // Approval keeps the hold: nothing is released or settled by it.
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (100000 - 1999, 1999)
    );
    stack.assert_invariants().await
}

#[tokio::test]
async fn concurrent_approvals_reach_approved_exactly_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut approvals = stack.approvals().await?;
    approvals
        .set_approval_policy(authed(
            &acme.operator,
            SetApprovalPolicyRequest {
                asset: "ETH".into(),
                rules: vec![ApprovalRule {
                    min_amount: "0".into(),
                    required_approvals: 3,
                }],
            },
        ))
        .await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let mut keys = Vec::new();
    for _ in 0..8 {
        keys.push(stack.key(&acme, Role::Approver).await?);
    }
    let calls = keys.iter().map(|k| {
        let mut client = approvals.clone();
        let request = authed(k, approve(&w));
        async move { client.approve_withdrawal(request).await }
    });
    let results = join_all(calls).await;
    let counted = results.iter().filter(|r| r.is_ok()).count();
    let late = results
        .iter()
        .filter(|r| {
            r.as_ref()
                .err()
                .is_some_and(|e| reason(e) == "NOT_PENDING_APPROVAL")
        })
        .count();
    assert_eq!(
        (counted, late),
        (3, 5),
        "exactly the required approvals count; the rest find it approved"
    );
    let (moves,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM operation_transitions WHERE tenant_id = $1 AND to_state = 'APPROVED'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(moves, 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_risk_flagged_withdrawal_needs_the_flag_acknowledged() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let _first = stack.withdraw(&acme, "100", ALICE).await?;
    let flagged = stack.withdraw(&acme, "100", ALICE).await?;
    assert_eq!(
        flagged.risk_flags,
        vec![RiskFlag::SameDestinationAndAmount as i32]
    );
    let mut approvals = stack.approvals().await?;
    let err = approvals
        .approve_withdrawal(authed(&acme.approver, approve(&flagged)))
        .await
        .expect_err("unacknowledged");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&err), "RISK_FLAGS_NOT_ACKNOWLEDGED");
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
    let acknowledged = ApproveWithdrawalRequest {
        acknowledged_risk_flags: vec![RiskFlag::SameDestinationAndAmount as i32],
        ..approve(&flagged)
    };
    let done = approvals
        .approve_withdrawal(authed(&acme.approver, acknowledged))
        .await?
        .into_inner();
    assert_eq!(done.state, WithdrawalState::Approved as i32);
    let (flags,): (Vec<String>,) =
        sqlx::query_as("SELECT acknowledged_flags FROM approvals WHERE tenant_id = $1")
            .bind(acme.id.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(
        flags,
        vec!["SAME_DESTINATION_AND_AMOUNT".to_owned()],
        "the acknowledgement is on record"
    );
    Ok(())
}

#[tokio::test]
async fn only_approvers_of_the_same_tenant_can_approve() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let globex = stack.tenant("globex").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let mut approvals = stack.approvals().await?;
    for token in [&acme.client, &acme.operator] {
        let err = approvals
            .approve_withdrawal(authed(token, approve(&w)))
            .await
            .expect_err("role");
        assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");
    }
    let err = approvals
        .approve_withdrawal(authed(&globex.approver, approve(&w)))
        .await
        .expect_err("tenant");
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
    Ok(())
}
