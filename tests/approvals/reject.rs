//! Rejecting: REQUESTED -> REJECTED with the hold released exactly once.

use futures::future::join_all;
use opledger_proto::v1::{
    ApproveWithdrawalRequest, ListPendingApprovalsRequest, RejectWithdrawalRequest, WithdrawalState,
};
use opledger_tests::{ALICE, Stack, authed, reason};

fn reject(id: &str) -> RejectWithdrawalRequest {
    RejectWithdrawalRequest {
        withdrawal_id: id.to_owned(),
        reason: "destination failed screening".into(),
    }
}

#[tokio::test]
async fn concurrent_rejections_release_the_hold_exactly_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "300", ALICE).await?;
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 300));
    let approvals = stack.approvals().await?;
    let calls = (0..8).map(|i| {
        let mut client = approvals.clone();
        let token = if i % 2 == 0 {
            acme.approver.clone()
        } else {
            acme.operator.clone()
        };
        let request = authed(&token, reject(&w.withdrawal_id));
        async move { client.reject_withdrawal(request).await }
    });
    let results = join_all(calls).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| reason(e) == "NOT_PENDING_APPROVAL")
    );
    assert_eq!(
        stack.balance(acme.id, "treasury", "ETH").await?,
        (1000, 0),
        "released once, not eight times"
    );
    let (releases,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM ledger_entries WHERE tenant_id = $1 AND kind = 'RELEASE'",
    )
    .bind(acme.id.as_uuid())
    .fetch_one(stack.admin.pool())
    .await?;
    assert_eq!(releases, 1);
    // A rejected withdrawal cannot be approved afterwards.
    let mut client = approvals.clone();
    let err = client
        .approve_withdrawal(authed(
            &acme.approver,
            ApproveWithdrawalRequest {
                withdrawal_id: w.withdrawal_id.clone(),
                payload_hash: w.payload_hash.clone(),
                acknowledged_risk_flags: vec![],
            },
        ))
        .await
        .expect_err("rejected");
    assert_eq!(reason(&err), "NOT_PENDING_APPROVAL");
    stack.assert_invariants().await
}

#[tokio::test]
async fn an_approved_withdrawal_cannot_be_rejected_and_keeps_its_hold() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "300", ALICE).await?;
    let mut approvals = stack.approvals().await?;
    let done = approvals
        .approve_withdrawal(authed(
            &acme.approver,
            ApproveWithdrawalRequest {
                withdrawal_id: w.withdrawal_id.clone(),
                payload_hash: w.payload_hash.clone(),
                acknowledged_risk_flags: vec![],
            },
        ))
        .await?
        .into_inner();
    assert_eq!(done.state, WithdrawalState::Approved as i32);
    let err = approvals
        .reject_withdrawal(authed(&acme.operator, reject(&w.withdrawal_id)))
        .await
        .expect_err("approved");
    assert_eq!(reason(&err), "NOT_PENDING_APPROVAL");
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 300));
    for bad in ["", &"x".repeat(201)] {
        let err = approvals
            .reject_withdrawal(authed(
                &acme.operator,
                RejectWithdrawalRequest {
                    withdrawal_id: w.withdrawal_id.clone(),
                    reason: bad.to_owned(),
                },
            ))
            .await
            .expect_err("bad reason");
        assert_eq!(reason(&err), "INVALID_FIELD");
    }
    stack.assert_invariants().await
}

#[tokio::test]
async fn pending_lists_only_requested_withdrawals_with_their_counts() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut ids = Vec::new();
    for amount in ["1", "2", "3"] {
        ids.push(stack.withdraw(&acme, amount, ALICE).await?.withdrawal_id);
    }
    let mut approvals = stack.approvals().await?;
    approvals
        .reject_withdrawal(authed(&acme.operator, reject(&ids[1])))
        .await?;
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = approvals
            .list_pending_approvals(authed(
                &acme.approver,
                ListPendingApprovalsRequest {
                    page_size: 1,
                    page_token: token.clone(),
                },
            ))
            .await?
            .into_inner();
        for p in &page.pending {
            assert_eq!((p.approvals, p.required_approvals), (0, 1));
            seen.push(
                p.withdrawal
                    .as_ref()
                    .map(|w| w.withdrawal_id.clone())
                    .unwrap_or_default(),
            );
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(
        seen,
        vec![ids[0].clone(), ids[2].clone()],
        "oldest first, rejected one gone"
    );
    let err = approvals
        .list_pending_approvals(authed(&acme.client, ListPendingApprovalsRequest::default()))
        .await
        .expect_err("client role");
    assert_eq!(reason(&err), "ROLE_NOT_ALLOWED");
    Ok(())
}
