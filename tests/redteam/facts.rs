//! KYT results and risk acknowledgements as signed facts (issue 25, item 6): the approvals
//! service's login (or a compromised approvals host) writes a genuine approver's signed approval
//! and moves the withdrawal to APPROVED itself, skipping the checks that service makes; the inbox's
//! login records screening results. The signer must find, in what it verifies itself, a KYT pass
//! signed by a KYT key of the tenant's trust statement, and the acknowledgement of every risk flag
//! inside the approver's signed statement.

use crate::forge::{Outcome, Scenario, attempt_signing};
use opledger_domain::approval::Decision;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{AssetCode, PayloadHash};
use opledger_domain::{RiskFlag, RiskFlags};
use opledger_proto::v1::WithdrawalState;
use opledger_testkit::{ServiceRole, trust};
use opledger_tests::signer::{InProcessSigner, attempts, client, sign_request};
use opledger_tests::{ALICE, BOB, Stack, Tenant, approval_under, authed, kyt};
use sqlx::PgPool;

/// Every scenario, named after its adversary.
pub fn scenarios() -> Vec<(&'static str, Scenario)> {
    vec![
        (
            "kyt_required_withdrawal_approved_by_the_approvals_login_without_a_pass_is_never_signed",
            Box::pin(screened(Screening::None, "SIGNER_KYT_MISSING")),
        ),
        (
            "kyt_pass_row_without_a_provider_signature_from_the_inbox_login_is_never_signed",
            Box::pin(screened(Screening::Unsigned, "SIGNER_KYT_MISSING")),
        ),
        (
            "kyt_pass_signed_by_a_key_the_trust_statement_does_not_name_is_never_signed",
            Box::pin(screened(Screening::AttackerKey, "SIGNER_KYT_MISSING")),
        ),
        (
            "kyt_pass_with_its_body_rewritten_by_the_inbox_login_is_never_signed",
            Box::pin(screened(Screening::BodyRewritten, "SIGNER_KYT_MISSING")),
        ),
        (
            "genuine_kyt_pass_of_another_withdrawal_copied_by_the_inbox_login_is_never_signed",
            Box::pin(screened(
                Screening::CopiedFromAnotherWithdrawal,
                "SIGNER_KYT_INVALID",
            )),
        ),
        (
            "kyt_failure_signed_by_the_provider_then_approved_by_the_approvals_login_is_never_signed",
            Box::pin(screened(Screening::SignedFailure, "SIGNER_KYT_FAILED")),
        ),
        (
            "flagged_withdrawal_approved_without_the_acknowledgement_in_the_signed_bytes_is_never_signed",
            Box::pin(flagged(
                Acknowledgement::NotSigned,
                "SIGNER_RISK_NOT_ACKNOWLEDGED",
            )),
        ),
        (
            "acknowledgement_added_to_the_row_by_the_approvals_login_is_never_signed",
            Box::pin(flagged(
                Acknowledgement::AddedToTheRow,
                "SIGNER_APPROVAL_INVALID",
            )),
        ),
        (
            "acknowledgement_removed_from_the_row_by_the_approvals_login_is_never_signed",
            Box::pin(flagged(
                Acknowledgement::RemovedFromTheRow,
                "SIGNER_APPROVAL_INVALID",
            )),
        ),
        (
            "risk_flags_cleared_with_the_operations_login_are_refused_by_the_database",
            Box::pin(flags_cleared(ServiceRole::Operations)),
        ),
        (
            "risk_flags_cleared_with_the_approvals_login_are_refused_by_the_database",
            Box::pin(flags_cleared(ServiceRole::Approvals)),
        ),
    ]
}

enum Screening {
    None,
    Unsigned,
    AttackerKey,
    BodyRewritten,
    CopiedFromAnotherWithdrawal,
    SignedFailure,
}

enum Acknowledgement {
    NotSigned,
    AddedToTheRow,
    RemovedFromTheRow,
}

const VERSION: u64 = 2;

/// A funded tenant whose trust statement (version 2) names KYT provider key 0 and requires a KYT
/// pass for ETH when `kyt_required`.
async fn world(kyt_required: bool) -> anyhow::Result<(Stack, Tenant)> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000000").await?;
    let mut parts = trust::default_parts(acme.id);
    parts.keys.push(kyt::registered(acme.id, 0)?);
    if kyt_required {
        parts.kyt_required = vec![AssetCode::parse("ETH")?];
    }
    trust::publish(&stack.admin, acme.id, VERSION, parts).await?;
    Ok((stack, acme))
}

/// Approver 0's genuine signature of the statement acknowledging `signed`, stored as the
/// approvals login would store it with `stored` in the acknowledged column, then REQUESTED ->
/// APPROVED written by that login directly.
async fn approve_as_the_approvals_login(
    pool: &PgPool,
    tenant: TenantId,
    op: OperationId,
    hash: PayloadHash,
    signed: RiskFlags,
    stored: RiskFlags,
) -> anyhow::Result<()> {
    let key = trust::approver_key(tenant, 0);
    let (_, signature) =
        trust::signed_acknowledging(tenant, op, hash, Decision::Approve, &key, VERSION, signed);
    let stored: Vec<&str> = stored.iter().map(RiskFlag::as_str).collect();
    sqlx::query(
        "INSERT INTO approvals (tenant_id, op_id, approver_id, payload_hash, acknowledged_flags, \
           approver_key_id, decision, policy_version, signature) \
         VALUES ($1, $2, 'compromised-approvals-host', $3, $4, $5, 'APPROVE', $6, $7)",
    )
    .bind(tenant.as_uuid())
    .bind(op.as_uuid())
    .bind(hash.as_bytes().as_slice())
    .bind(&stored)
    .bind(trust::key_id(&key).to_hex())
    .bind(i64::try_from(VERSION)?)
    .bind(signature)
    .execute(pool)
    .await?;
    sqlx::query(
        "UPDATE withdrawal_ops SET state = 'APPROVED', last_actor = 'approvals', \
         version = version + 1 WHERE tenant_id = $1 AND op_id = $2",
    )
    .bind(tenant.as_uuid())
    .bind(op.as_uuid())
    .execute(pool)
    .await?;
    Ok(())
}

/// Adversary: the approvals login approves a withdrawal of a KYT-required asset with a genuine
/// approver signature, while the inbox login records screening rows of its choosing.
async fn screened(screening: Screening, want_event: &'static str) -> anyhow::Result<Outcome> {
    let (stack, acme) = world(true).await?;
    let owner = stack.admin.pool().clone();
    let inbox = stack.db.pool_as(ServiceRole::Inbox).await?;
    let approvals = stack.db.pool_as(ServiceRole::Approvals).await?;
    let w = stack.withdraw(&acme, "5000000", BOB).await?;
    let id = w.withdrawal_id.as_str();
    let provider = kyt::provider_key(acme.id, 0);
    let record = |result, reference, delivery| {
        let (owner, inbox) = (owner.clone(), inbox.clone());
        async move { kyt::record(&owner, &inbox, acme.id, id, result, reference, delivery).await }
    };
    match screening {
        Screening::None => {}
        Screening::Unsigned => record("PASS", "ref-1", None).await?,
        Screening::AttackerKey => {
            let attacker = kyt::provider_key(acme.id, 66);
            let pass = kyt::signed(&attacker, "evt-1", kyt::body(id, "pass", "ref-1"))?;
            record("PASS", "ref-1", Some(&pass)).await?;
        }
        Screening::BodyRewritten => {
            // The provider failed it; the inbox login keeps the signature and writes a pass.
            let mut fail = kyt::signed(&provider, "evt-1", kyt::body(id, "fail", "ref-1"))?;
            fail.body = kyt::body(id, "pass", "ref-1");
            record("PASS", "ref-1", Some(&fail)).await?;
        }
        Screening::CopiedFromAnotherWithdrawal => {
            let other = stack.withdraw(&acme, "1000", ALICE).await?;
            let pass = kyt::signed(
                &provider,
                "evt-1",
                kyt::body(&other.withdrawal_id, "pass", "ref-1"),
            )?;
            record("PASS", "ref-1", Some(&pass)).await?;
        }
        Screening::SignedFailure => {
            let fail = kyt::signed(&provider, "evt-1", kyt::body(id, "fail", "ref-1"))?;
            record("FAIL", "ref-1", Some(&fail)).await?;
            // And a forged pass next to it changes nothing.
            record("PASS", "ref-2", None).await?;
        }
    }
    let op: OperationId = w.withdrawal_id.parse()?;
    let hash = PayloadHash::from_hex(&w.payload_hash)?;
    approve_as_the_approvals_login(
        &approvals,
        acme.id,
        op,
        hash,
        RiskFlags::EMPTY,
        RiskFlags::EMPTY,
    )
    .await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    attempt_signing(&stack, &signer, acme.id, op, want_event).await
}

/// Adversary: a compromised operations host shows the approver no risk flag (so the approver signs
/// without acknowledging it), and the approvals login records that approval, adjusting the
/// acknowledged column as it likes, and approves.
async fn flagged(ack: Acknowledgement, want_event: &'static str) -> anyhow::Result<Outcome> {
    let (stack, acme) = world(false).await?;
    let approvals = stack.db.pool_as(ServiceRole::Approvals).await?;
    let _first = stack.withdraw(&acme, "5000000", BOB).await?;
    let w = stack.withdraw(&acme, "5000000", BOB).await?;
    anyhow::ensure!(!w.risk_flags.is_empty(), "the second withdrawal is flagged");
    let flags: RiskFlags = [RiskFlag::SameDestinationAndAmount].into_iter().collect();
    let (signed, stored) = match ack {
        Acknowledgement::NotSigned => (RiskFlags::EMPTY, RiskFlags::EMPTY),
        Acknowledgement::AddedToTheRow => (RiskFlags::EMPTY, flags),
        Acknowledgement::RemovedFromTheRow => (flags, RiskFlags::EMPTY),
    };
    let op: OperationId = w.withdrawal_id.parse()?;
    let hash = PayloadHash::from_hex(&w.payload_hash)?;
    approve_as_the_approvals_login(&approvals, acme.id, op, hash, signed, stored).await?;
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    attempt_signing(&stack, &signer, acme.id, op, want_event).await
}

/// Adversary: a service login clears a withdrawal's risk flags so that an approval without the
/// acknowledgement would count.
async fn flags_cleared(role: ServiceRole) -> anyhow::Result<Outcome> {
    let (stack, acme) = world(false).await?;
    let pool = stack.db.pool_as(role).await?;
    let _first = stack.withdraw(&acme, "5000000", BOB).await?;
    let w = stack.withdraw(&acme, "5000000", BOB).await?;
    let op: OperationId = w.withdrawal_id.parse()?;
    let cleared = sqlx::query(
        "UPDATE withdrawal_ops SET risk_flags = '{}' WHERE tenant_id = $1 AND op_id = $2",
    )
    .bind(acme.id.as_uuid())
    .bind(op.as_uuid())
    .execute(&pool)
    .await;
    if cleared.is_ok() {
        return Ok(Outcome::Signed);
    }
    let (flags,): (Vec<String>,) =
        sqlx::query_as("SELECT risk_flags FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2")
            .bind(acme.id.as_uuid())
            .bind(op.as_uuid())
            .fetch_one(stack.admin.pool())
            .await?;
    anyhow::ensure!(
        flags == [RiskFlag::SameDestinationAndAmount.as_str()],
        "the flags are unchanged"
    );
    Ok(Outcome::Refused)
}

/// The same set-up without a forgery is signed: a provider-signed pass recorded by the inbox
/// login, and approvals through the real approvals service whose signed statements acknowledge
/// the flags shown. The refusals above are not a signer that refuses everything.
pub async fn honest_screened_and_acknowledged_withdrawals_are_signed() -> anyhow::Result<()> {
    let (stack, acme) = world(true).await?;
    let owner = stack.admin.pool().clone();
    let inbox = stack.db.pool_as(ServiceRole::Inbox).await?;
    let provider = kyt::provider_key(acme.id, 0);
    let first = stack.withdraw(&acme, "5000000", BOB).await?;
    let flagged = stack.withdraw(&acme, "5000000", BOB).await?;
    anyhow::ensure!(
        !flagged.risk_flags.is_empty(),
        "the second withdrawal is flagged"
    );
    let signer = InProcessSigner::start(&stack.db, acme.id).await?;
    let mut c = client(signer.addr).await?;
    for (i, w) in [first, flagged].iter().enumerate() {
        let id = w.withdrawal_id.as_str();
        let reference = format!("ref-{i}");
        let pass = kyt::signed(
            &provider,
            &format!("evt-{i}"),
            kyt::body(id, "pass", &reference),
        )?;
        kyt::record(&owner, &inbox, acme.id, id, "PASS", &reference, Some(&pass)).await?;
        let key = trust::approver_key(acme.id, 0);
        let done = stack
            .approvals()
            .await?
            .approve_withdrawal(authed(
                &acme.approver,
                approval_under(acme.id, w, &key, VERSION),
            ))
            .await?
            .into_inner();
        anyhow::ensure!(done.state == WithdrawalState::Approved as i32, "approved");
        let signed = c
            .sign_withdrawal(sign_request(acme.id, id))
            .await?
            .into_inner();
        anyhow::ensure!(signed.attempt.is_some(), "signed");
        anyhow::ensure!(attempts(&stack, id).await? == 1, "one attempt");
    }
    Ok(())
}
