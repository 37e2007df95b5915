//! Approving: the exact hash, distinct approvers, acknowledged risk flags.

use futures::future::join_all;
use opledger_domain::amount::Amount;
use opledger_domain::approval::{Decision, KeyKind, RegisteredKey, TrustParts};
use opledger_domain::payload::AssetCode;
use opledger_domain::policy::ApprovalRule;
use opledger_domain::risk::RiskFlags;
use opledger_proto::v1::{
    ApproveWithdrawalRequest, GetWithdrawalRequest, RiskFlag, Withdrawal, WithdrawalState,
};
use opledger_store::keys::Role;
use opledger_testkit::trust::{approver_key, default_parts, publish, signed_decision_for};
use opledger_tests::{ALICE, BOB, Stack, approval, approval_under, authed, reason};

/// An approval by approver key `key` under policy version 2, acknowledging nothing.
fn approve_v2(
    stack_tenant: opledger_domain::ids::TenantId,
    w: &Withdrawal,
    key: u8,
) -> ApproveWithdrawalRequest {
    ApproveWithdrawalRequest {
        acknowledged_risk_flags: vec![],
        ..approval_under(stack_tenant, w, &approver_key(stack_tenant, key), 2)
    }
}

fn rule(asset: &str, min: &str, required: u32) -> anyhow::Result<(AssetCode, ApprovalRule)> {
    Ok((
        AssetCode::parse(asset)?,
        ApprovalRule {
            min_amount: Amount::parse(min)?,
            required_approvals: required,
        },
    ))
}

#[tokio::test]
async fn an_approval_of_a_stale_hash_is_refused_recorded_and_changes_nothing() -> anyhow::Result<()>
{
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let mut approvals = stack.approvals().await?;
    // The hash of a payload the approver may have seen before a change: any other hash, in a
    // statement the approver really signed.
    let stale_hash = format!(
        "{}{}",
        &w.payload_hash[..63],
        if w.payload_hash.ends_with('0') {
            '1'
        } else {
            '0'
        }
    );
    let (approval_statement, signature) = signed_decision_for(
        acme.id,
        &w.withdrawal_id,
        &stale_hash,
        Decision::Approve,
        &approver_key(acme.id, 0),
        1,
        RiskFlags::EMPTY,
    )?;
    let stale = ApproveWithdrawalRequest {
        withdrawal_id: w.withdrawal_id.clone(),
        acknowledged_risk_flags: vec![],
        approval_statement,
        signature,
    };
    let err = approvals
        .approve_withdrawal(authed(&acme.approver, stale))
        .await
        .expect_err("stale hash");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&err), "PAYLOAD_HASH_MISMATCH");
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
    assert_eq!(stack.count("security_events", acme.id).await?, 1);
    // Malformed evidence: no statement, or a signature that is not 64 bytes.
    for malformed in [
        ApproveWithdrawalRequest {
            approval_statement: vec![],
            ..approval(acme.id, &w, 0)
        },
        ApproveWithdrawalRequest {
            signature: vec![7; 63],
            ..approval(acme.id, &w, 0)
        },
    ] {
        let err = approvals
            .approve_withdrawal(authed(&acme.approver, malformed))
            .await
            .expect_err("malformed statement or signature");
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert_eq!(reason(&err), "INVALID_FIELD");
    }
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
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
    // Version 2 of the trust statement: two approvers from 1000 ETH.
    publish(
        &stack.admin,
        acme.id,
        2,
        TrustParts {
            rules: vec![rule("ETH", "0", 1)?, rule("ETH", "1000", 2)?],
            ..default_parts(acme.id)
        },
    )
    .await?;
    let big = stack.withdraw(&acme, "1000", ALICE).await?;
    let first = approvals
        .approve_withdrawal(authed(&acme.approver, approve_v2(acme.id, &big, 0)))
        .await?
        .into_inner();
    assert_eq!(
        (first.state, first.approvals, first.required_approvals),
        (WithdrawalState::Requested as i32, 1, 2)
    );
    let again = approvals
        .approve_withdrawal(authed(&acme.approver, approve_v2(acme.id, &big, 0)))
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
    // One API key presenting another approver key is still one approver.
    let other_key = approvals
        .approve_withdrawal(authed(&acme.approver, approve_v2(acme.id, &big, 1)))
        .await?
        .into_inner();
    assert!(
        other_key.already_approved,
        "one API key does not count twice by signing with a second approver key"
    );
    assert_eq!(
        (other_key.state, other_key.approvals),
        (WithdrawalState::Requested as i32, 1)
    );
    // One approver key through a second API key is still one approver.
    let second_approver = stack.key(&acme, Role::Approver).await?;
    let same_key = approvals
        .approve_withdrawal(authed(&second_approver, approve_v2(acme.id, &big, 0)))
        .await?
        .into_inner();
    assert!(
        same_key.already_approved,
        "one approver key does not count twice through two API keys"
    );
    assert_eq!(
        (same_key.state, same_key.approvals),
        (WithdrawalState::Requested as i32, 1)
    );
    assert_eq!(stack.count("approvals", acme.id).await?, 1);
    let second = approvals
        .approve_withdrawal(authed(&second_approver, approve_v2(acme.id, &big, 1)))
        .await?
        .into_inner();
    assert_eq!(
        (second.state, second.approvals, second.required_approvals),
        (WithdrawalState::Approved as i32, 2, 2)
    );
    // A late approver finds it no longer pending; a repeat of a counted approval is answered.
    let third_approver = stack.key(&acme, Role::Approver).await?;
    let err = approvals
        .approve_withdrawal(authed(&third_approver, approve_v2(acme.id, &big, 2)))
        .await
        .expect_err("late");
    assert_eq!(reason(&err), "NOT_PENDING_APPROVAL");
    let repeat = approvals
        .approve_withdrawal(authed(&second_approver, approve_v2(acme.id, &big, 1)))
        .await?
        .into_inner();
    assert!(repeat.already_approved);
    assert_eq!(repeat.state, WithdrawalState::Approved as i32);

    // Below the threshold one approver is enough.
    let small = stack.withdraw(&acme, "999", BOB).await?;
    let done = approvals
        .approve_withdrawal(authed(&acme.approver, approve_v2(acme.id, &small, 0)))
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
    let approvals = stack.approvals().await?;
    // Version 2: eight registered approvers, three required for every amount.
    publish(
        &stack.admin,
        acme.id,
        2,
        TrustParts {
            keys: (0..8)
                .map(|i| {
                    RegisteredKey::new(approver_key(acme.id, i).verifying_key(), KeyKind::Approver)
                })
                .collect(),
            rules: vec![rule("ETH", "0", 3)?],
            ..TrustParts::default()
        },
    )
    .await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let mut keys = Vec::new();
    for _ in 0..8 {
        keys.push(stack.key(&acme, Role::Approver).await?);
    }
    let calls = keys.iter().zip(0_u8..).map(|(k, i)| {
        let mut client = approvals.clone();
        let request = authed(k, approve_v2(acme.id, &w, i));
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
    // The approvals that counted are a policy's worth, by distinct keys.
    assert_eq!(stack.count("approvals", acme.id).await?, 3);
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
    // Signed without the acknowledgement (field 7 of the statement).
    let (approval_statement, signature) = signed_decision_for(
        acme.id,
        &flagged.withdrawal_id,
        &flagged.payload_hash,
        Decision::Approve,
        &approver_key(acme.id, 0),
        1,
        RiskFlags::EMPTY,
    )?;
    let unacknowledged = ApproveWithdrawalRequest {
        withdrawal_id: flagged.withdrawal_id.clone(),
        acknowledged_risk_flags: vec![],
        approval_statement,
        signature,
    };
    let err = approvals
        .approve_withdrawal(authed(&acme.approver, unacknowledged.clone()))
        .await
        .expect_err("unacknowledged");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert_eq!(reason(&err), "RISK_FLAGS_NOT_ACKNOWLEDGED");
    // Acknowledged only in the request, outside the signed bytes: refused, not half believed.
    let outside = ApproveWithdrawalRequest {
        acknowledged_risk_flags: vec![RiskFlag::SameDestinationAndAmount as i32],
        ..unacknowledged
    };
    let err = approvals
        .approve_withdrawal(authed(&acme.approver, outside))
        .await
        .expect_err("acknowledged outside the signature");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("acknowledged_risk_flags"),
        "{}",
        err.message()
    );
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
    let acknowledged = ApproveWithdrawalRequest {
        acknowledged_risk_flags: vec![RiskFlag::SameDestinationAndAmount as i32],
        ..approval(acme.id, &flagged, 0)
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
            .approve_withdrawal(authed(token, approval(acme.id, &w, 0)))
            .await
            .expect_err("role");
        assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");
    }
    // A globex approver signing for its own tenant does not find acme's withdrawal.
    let err = approvals
        .approve_withdrawal(authed(&globex.approver, approval(globex.id, &w, 0)))
        .await
        .expect_err("tenant");
    assert_eq!(err.code(), tonic::Code::NotFound);
    // Nor can it submit a statement signed for acme.
    let err = approvals
        .approve_withdrawal(authed(&globex.approver, approval(acme.id, &w, 0)))
        .await
        .expect_err("acme's statement through globex");
    assert_eq!(reason(&err), "APPROVAL_FOR_OTHER_OPERATION");
    assert_eq!(stack.count("approvals", acme.id).await?, 0);
    assert_eq!(stack.count("approvals", globex.id).await?, 0);
    Ok(())
}
