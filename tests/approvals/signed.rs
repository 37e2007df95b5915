//! Signed approvals refused through the real gRPC service: each refusal records nothing that
//! counts and leaves the withdrawal REQUESTED.

use opledger_domain::payload::AssetCode;
use opledger_proto::v1::{ApproveWithdrawalRequest, GetApprovalPolicyRequest, WithdrawalState};
use opledger_testkit::trust::{approver_key, default_parts, key_id, publish};
use opledger_tests::{ALICE, BOB, Stack, Tenant, approval, approval_under, authed, kyt, reason};

/// Asserts `request` is refused with `expected`, nothing is recorded and `w` stays REQUESTED.
async fn refused(
    stack: &Stack,
    tenant: &Tenant,
    request: ApproveWithdrawalRequest,
    expected: &str,
) -> anyhow::Result<()> {
    let id = request.withdrawal_id.clone();
    let err = stack
        .approvals()
        .await?
        .approve_withdrawal(authed(&tenant.approver, request))
        .await
        .expect_err(expected);
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{expected}");
    assert_eq!(reason(&err), expected);
    assert_eq!(stack.count("approvals", tenant.id).await?, 0, "{expected}");
    let (state,): (String,) =
        sqlx::query_as("SELECT state FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2")
            .bind(tenant.id.as_uuid())
            .bind(id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(state, "REQUESTED", "{expected}");
    Ok(())
}

async fn security_events(stack: &Stack, tenant: &Tenant, kind: &str) -> anyhow::Result<i64> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM security_events WHERE tenant_id = $1 AND kind = $2")
            .bind(tenant.id.as_uuid())
            .bind(kind)
            .fetch_one(stack.admin.pool())
            .await?;
    Ok(n)
}

#[tokio::test]
async fn a_signature_that_does_not_verify_is_refused_and_recorded() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let mut flipped = approval(acme.id, &w, 0);
    flipped.signature[10] ^= 0x80;
    refused(&stack, &acme, flipped, "APPROVAL_SIGNATURE_INVALID").await?;
    assert_eq!(
        security_events(&stack, &acme, "APPROVAL_SIGNATURE_INVALID").await?,
        1
    );
    // Key 1's signature over a statement naming key 0.
    let by_other_key = ApproveWithdrawalRequest {
        signature: approval(acme.id, &w, 1).signature,
        ..approval(acme.id, &w, 0)
    };
    refused(&stack, &acme, by_other_key, "APPROVAL_SIGNATURE_INVALID").await?;
    assert_eq!(
        security_events(&stack, &acme, "APPROVAL_SIGNATURE_INVALID").await?,
        2
    );
    // Bytes that are no approval statement at all.
    let garbage = ApproveWithdrawalRequest {
        approval_statement: b"approve everything".to_vec(),
        ..approval(acme.id, &w, 0)
    };
    refused(&stack, &acme, garbage, "APPROVAL_SIGNATURE_INVALID").await?;
    // The genuine approval still counts.
    let done = stack
        .approvals()
        .await?
        .approve_withdrawal(authed(&acme.approver, approval(acme.id, &w, 0)))
        .await?
        .into_inner();
    assert_eq!(done.state, WithdrawalState::Approved as i32);
    Ok(())
}

#[tokio::test]
async fn an_unregistered_approver_key_is_refused() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let globex = stack.tenant("globex").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    refused(
        &stack,
        &acme,
        approval_under(acme.id, &w, &approver_key(acme.id, 9), 1),
        "APPROVER_KEY_UNKNOWN",
    )
    .await?;
    // Another tenant's registered key is not acme's.
    refused(
        &stack,
        &acme,
        approval_under(acme.id, &w, &approver_key(globex.id, 0), 1),
        "APPROVER_KEY_UNKNOWN",
    )
    .await
}

#[tokio::test]
async fn a_revoked_approver_key_is_refused_under_every_version() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let revoked = approver_key(acme.id, 1);
    let mut parts = default_parts(acme.id);
    parts.keys.retain(|k| k.key_id != key_id(&revoked));
    parts.revoked = vec![key_id(&revoked)];
    publish(&stack.admin, acme.id, 2, parts).await?;
    refused(
        &stack,
        &acme,
        approval_under(acme.id, &w, &revoked, 2),
        "APPROVER_KEY_REVOKED",
    )
    .await?;
    // A statement made under version 1, when the key was still registered, no longer counts.
    refused(
        &stack,
        &acme,
        approval_under(acme.id, &w, &revoked, 1),
        "APPROVER_KEY_REVOKED",
    )
    .await?;
    // The keys left in the registry still approve.
    let done = stack
        .approvals()
        .await?
        .approve_withdrawal(authed(
            &acme.approver,
            approval_under(acme.id, &w, &approver_key(acme.id, 2), 2),
        ))
        .await?
        .into_inner();
    assert_eq!(done.state, WithdrawalState::Approved as i32);
    Ok(())
}

#[tokio::test]
async fn a_statement_for_another_withdrawal_or_decision_is_refused() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let other = stack.withdraw(&acme, "200", BOB).await?;
    // A genuine statement about `other`, replayed against `w`.
    let replayed = ApproveWithdrawalRequest {
        withdrawal_id: w.withdrawal_id.clone(),
        ..approval(acme.id, &other, 0)
    };
    refused(&stack, &acme, replayed, "APPROVAL_FOR_OTHER_OPERATION").await?;
    // A signed rejection submitted as an approval.
    let rejection = opledger_tests::rejection(acme.id, &w, 0, "no");
    let as_approval = ApproveWithdrawalRequest {
        approval_statement: rejection.approval_statement,
        signature: rejection.signature,
        ..approval(acme.id, &w, 0)
    };
    refused(&stack, &acme, as_approval, "APPROVAL_FOR_OTHER_OPERATION").await?;
    let (other_state,): (String,) =
        sqlx::query_as("SELECT state FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2")
            .bind(acme.id.as_uuid())
            .bind(other.withdrawal_id.parse::<uuid::Uuid>()?)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(
        other_state, "REQUESTED",
        "nothing approved the other either"
    );
    Ok(())
}

#[tokio::test]
async fn a_policy_version_newer_than_the_published_one_is_refused() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    refused(
        &stack,
        &acme,
        approval_under(acme.id, &w, &approver_key(acme.id, 0), 5),
        "POLICY_VERSION_UNKNOWN",
    )
    .await
}

#[tokio::test]
async fn a_tenant_without_a_trust_statement_cannot_approve() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let initech = stack.tenant_without_trust("initech").await?;
    stack.fund(&initech, "treasury", "ETH", "1000").await?;
    let w = stack.withdraw(&initech, "100", ALICE).await?;
    refused(
        &stack,
        &initech,
        approval(initech.id, &w, 0),
        "TRUST_STATEMENT_MISSING",
    )
    .await?;
    let err = stack
        .approvals()
        .await?
        .get_approval_policy(authed(
            &initech.approver,
            GetApprovalPolicyRequest {
                asset: "ETH".into(),
            },
        ))
        .await
        .expect_err("no policy without a trust statement");
    assert_eq!(reason(&err), "TRUST_STATEMENT_MISSING");
    Ok(())
}

#[tokio::test]
async fn a_kyt_required_asset_needs_a_pass_signed_by_a_kyt_key_of_the_trust_statement()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000").await?;
    let mut parts = default_parts(acme.id);
    parts.keys.push(kyt::registered(acme.id, 0)?);
    parts.kyt_required = vec![AssetCode::parse("ETH")?];
    publish(&stack.admin, acme.id, 2, parts).await?;
    let policy = stack
        .approvals()
        .await?
        .get_approval_policy(authed(
            &acme.approver,
            GetApprovalPolicyRequest {
                asset: "ETH".into(),
            },
        ))
        .await?
        .into_inner();
    assert!(policy.kyt_pass_required);
    assert_eq!(policy.policy_version, 2);
    let w = stack.withdraw(&acme, "100", ALICE).await?;
    let key = approver_key(acme.id, 0);
    let pool = stack.admin.pool();
    let id = w.withdrawal_id.as_str();
    refused(
        &stack,
        &acme,
        approval_under(acme.id, &w, &key, 2),
        "KYT_PASS_REQUIRED",
    )
    .await?;
    // A pass without the provider's signature (a `v1` delivery, or a row written by a login),
    // a pass signed by a key the trust statement does not name, and a signed failure: no pass.
    kyt::record(pool, pool, acme.id, id, "PASS", "ref-1", None).await?;
    let stranger = kyt::provider_key(acme.id, 9);
    let unknown = kyt::signed(&stranger, "evt-2", kyt::body(id, "pass", "ref-2"))?;
    kyt::record(pool, pool, acme.id, id, "PASS", "ref-2", Some(&unknown)).await?;
    refused(
        &stack,
        &acme,
        approval_under(acme.id, &w, &key, 2),
        "KYT_PASS_REQUIRED",
    )
    .await?;
    let provider = kyt::provider_key(acme.id, 0);
    let pass = kyt::signed(&provider, "evt-3", kyt::body(id, "pass", "ref-3"))?;
    kyt::record(pool, pool, acme.id, id, "PASS", "ref-3", Some(&pass)).await?;
    let done = stack
        .approvals()
        .await?
        .approve_withdrawal(authed(&acme.approver, approval_under(acme.id, &w, &key, 2)))
        .await?
        .into_inner();
    assert_eq!(done.state, WithdrawalState::Approved as i32);

    // A second withdrawal: a signed failure outweighs a signed pass.
    let w2 = stack.withdraw(&acme, "101", BOB).await?;
    let id2 = w2.withdrawal_id.as_str();
    let fail = kyt::signed(&provider, "evt-4", kyt::body(id2, "fail", "ref-4"))?;
    kyt::record(pool, pool, acme.id, id2, "FAIL", "ref-4", Some(&fail)).await?;
    let pass = kyt::signed(&provider, "evt-5", kyt::body(id2, "pass", "ref-5"))?;
    kyt::record(pool, pool, acme.id, id2, "PASS", "ref-5", Some(&pass)).await?;
    let err = stack
        .approvals()
        .await?
        .approve_withdrawal(authed(
            &acme.approver,
            approval_under(acme.id, &w2, &key, 2),
        ))
        .await
        .expect_err("a signed failure");
    assert_eq!(reason(&err), "KYT_PASS_REQUIRED");
    Ok(())
}
