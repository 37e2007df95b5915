//! Rejecting: REQUESTED -> REJECTED with the hold released exactly once.

use futures::future::join_all;
use opledger_domain::ids::TenantId;
use opledger_proto::v1::{
    ListPendingApprovalsRequest, RejectWithdrawalRequest, Withdrawal, WithdrawalState,
};
use opledger_tests::{ALICE, Stack, approval, authed, reason, rejection};

/// A rejection of `w` signed by approver key `key` of the tenant.
fn reject(tenant: TenantId, w: &Withdrawal, key: u8) -> RejectWithdrawalRequest {
    rejection(tenant, w, key, "destination failed screening")
}

#[tokio::test]
async fn concurrent_rejections_release_the_hold_exactly_once() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "300", ALICE).await?;
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 300));
    let approvals = stack.approvals().await?;
    let calls = (0_u8..8).map(|i| {
        let mut client = approvals.clone();
        let token = if i % 2 == 0 {
            acme.approver.clone()
        } else {
            acme.operator.clone()
        };
        let request = authed(&token, reject(acme.id, &w, i % 4));
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
    // A rejected withdrawal cannot be approved afterwards, whichever key or API key rejected it
    // (a rejection is never answered as an approval already on record).
    let mut client = approvals.clone();
    for key in 0..4 {
        let err = client
            .approve_withdrawal(authed(&acme.approver, approval(acme.id, &w, key)))
            .await
            .expect_err("rejected");
        assert_eq!(reason(&err), "NOT_PENDING_APPROVAL");
    }
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
        .approve_withdrawal(authed(&acme.approver, approval(acme.id, &w, 0)))
        .await?
        .into_inner();
    assert_eq!(done.state, WithdrawalState::Approved as i32);
    let err = approvals
        .reject_withdrawal(authed(&acme.operator, reject(acme.id, &w, 1)))
        .await
        .expect_err("approved");
    assert_eq!(reason(&err), "NOT_PENDING_APPROVAL");
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 300));
    for bad in ["", &"x".repeat(201)] {
        let err = approvals
            .reject_withdrawal(authed(&acme.operator, rejection(acme.id, &w, 1, bad)))
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
    let mut withdrawals = Vec::new();
    for amount in ["1", "2", "3"] {
        withdrawals.push(stack.withdraw(&acme, amount, ALICE).await?);
    }
    let ids: Vec<String> = withdrawals
        .iter()
        .map(|w| w.withdrawal_id.clone())
        .collect();
    let mut approvals = stack.approvals().await?;
    approvals
        .reject_withdrawal(authed(&acme.operator, reject(acme.id, &withdrawals[1], 0)))
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

#[tokio::test]
async fn a_rejection_needs_a_valid_signed_statement_and_is_recorded() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "300", ALICE).await?;
    let mut approvals = stack.approvals().await?;
    // A forged signature: refused, recorded as a security event, the hold kept.
    let mut forged = reject(acme.id, &w, 0);
    forged.signature[0] ^= 0x01;
    let err = approvals
        .reject_withdrawal(authed(&acme.operator, forged))
        .await
        .expect_err("forged");
    assert_eq!(reason(&err), "APPROVAL_SIGNATURE_INVALID");
    assert_eq!(stack.count("security_events", acme.id).await?, 1);
    // An approval statement is not a rejection.
    let approve_bytes = approval(acme.id, &w, 0);
    let err = approvals
        .reject_withdrawal(authed(
            &acme.operator,
            RejectWithdrawalRequest {
                approval_statement: approve_bytes.approval_statement,
                signature: approve_bytes.signature,
                ..reject(acme.id, &w, 0)
            },
        ))
        .await
        .expect_err("approval used as rejection");
    assert_eq!(reason(&err), "APPROVAL_FOR_OTHER_OPERATION");
    // No statement at all.
    let err = approvals
        .reject_withdrawal(authed(
            &acme.operator,
            RejectWithdrawalRequest {
                approval_statement: vec![],
                ..reject(acme.id, &w, 0)
            },
        ))
        .await
        .expect_err("unsigned");
    assert_eq!(reason(&err), "INVALID_FIELD");
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (700, 300));
    assert_eq!(stack.count("approvals", acme.id).await?, 0);

    approvals
        .reject_withdrawal(authed(&acme.operator, reject(acme.id, &w, 2)))
        .await?;
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (1000, 0));
    let (decision, key_id): (String, Option<String>) =
        sqlx::query_as("SELECT decision, approver_key_id FROM approvals WHERE tenant_id = $1")
            .bind(acme.id.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(
        (decision.as_str(), key_id),
        (
            "REJECT",
            Some(
                opledger_testkit::trust::key_id(&opledger_testkit::trust::approver_key(acme.id, 2))
                    .to_hex()
            )
        ),
        "the signed rejection is on record"
    );
    stack.assert_invariants().await
}
