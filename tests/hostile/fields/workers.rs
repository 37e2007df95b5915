//! Hostile values for the signer, the reconciler's operator API and the inbox's operator API.

use super::run;
use crate::harness::{Suite, Tally};
use crate::values::{I32S, I64S};
use opledger_proto::v1 as pb;
use opledger_proto::v1::inbox_service_client::InboxServiceClient;
use opledger_proto::v1::operator_service_client::OperatorServiceClient;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_tests::authed;
use opledger_tests::signer::CALLER_TOKEN;
use tonic::transport::Channel;

/// Every signer, reconciler and inbox method with hostile values.
pub async fn batch(
    suite: &Suite,
    tally: &mut Tally,
    texts: &[(String, String)],
    pending: &pb::Withdrawal,
) -> anyhow::Result<()> {
    let acme = suite.acme();
    let tenant = acme.id.to_string();
    let signer = SignerServiceClient::connect(format!("http://{}", suite.signer.addr)).await?;
    let mut signs = Vec::new();
    let mut replacements = Vec::new();
    for (l, t) in texts {
        signs.push((
            format!("tenant_id={l}"),
            pb::SignWithdrawalRequest {
                tenant_id: t.clone(),
                withdrawal_id: pending.withdrawal_id.clone(),
            },
            false,
        ));
        signs.push((
            format!("withdrawal_id={l}"),
            pb::SignWithdrawalRequest {
                tenant_id: tenant.clone(),
                withdrawal_id: t.clone(),
            },
            false,
        ));
        replacements.push((
            format!("withdrawal_id={l}"),
            pb::SignReplacementRequest {
                tenant_id: tenant.clone(),
                withdrawal_id: t.clone(),
                kind: pb::AttemptKind::Cancel as i32,
            },
            false,
        ));
    }
    // Not approved: never signed.
    signs.push((
        "pending_withdrawal".into(),
        pb::SignWithdrawalRequest {
            tenant_id: tenant.clone(),
            withdrawal_id: pending.withdrawal_id.clone(),
        },
        false,
    ));
    for kind in I32S {
        replacements.push((
            format!("kind={kind}"),
            pb::SignReplacementRequest {
                tenant_id: tenant.clone(),
                withdrawal_id: pending.withdrawal_id.clone(),
                kind,
            },
            false,
        ));
    }
    run(tally, "SignWithdrawal", signs, |r| {
        let mut c = signer.clone();
        let r = authed(CALLER_TOKEN, r);
        async move { c.sign_withdrawal(r).await }
    })
    .await;
    run(tally, "SignReplacement", replacements, |r| {
        let mut c = signer.clone();
        let r = authed(CALLER_TOKEN, r);
        async move { c.sign_replacement(r).await }
    })
    .await;

    let operator = acme.operator.clone();
    let reconciler: OperatorServiceClient<Channel> =
        OperatorServiceClient::connect(format!("http://{}", suite.operator)).await?;
    let mut resolves = Vec::new();
    for (l, t) in texts {
        resolves.push((
            format!("withdrawal_id={l}"),
            pb::ResolveWithdrawalRequest {
                withdrawal_id: t.clone(),
                outcome: pb::WithdrawalState::VerifiedNotSent as i32,
                reason: "hostile suite".into(),
            },
            false,
        ));
        resolves.push((
            format!("reason={l}"),
            pb::ResolveWithdrawalRequest {
                withdrawal_id: pending.withdrawal_id.clone(),
                outcome: pb::WithdrawalState::VerifiedNotSent as i32,
                reason: t.clone(),
            },
            false,
        ));
    }
    for outcome in I32S {
        resolves.push((
            format!("outcome={outcome}"),
            pb::ResolveWithdrawalRequest {
                withdrawal_id: pending.withdrawal_id.clone(),
                outcome,
                reason: "hostile suite".into(),
            },
            false,
        ));
    }
    run(tally, "ResolveWithdrawal", resolves, |r| {
        let mut c = reconciler.clone();
        let r = authed(&operator, r);
        async move { c.resolve_withdrawal(r).await }
    })
    .await;
    let unresolved = I32S
        .iter()
        .map(|n| {
            (
                format!("page_size={n}"),
                pb::ListUnresolvedRequest { page_size: *n },
                true,
            )
        })
        .collect();
    run(tally, "ListUnresolved", unresolved, |r| {
        let mut c = reconciler.clone();
        let r = authed(&operator, r);
        async move { c.list_unresolved(r).await }
    })
    .await;

    let inbox: InboxServiceClient<Channel> = suite.world.inbox.operator().await?;
    let issues = I32S
        .iter()
        .map(|n| {
            (
                format!("page_size={n}"),
                pb::ListInboxIssuesRequest { page_size: *n },
                true,
            )
        })
        .collect();
    run(tally, "ListInboxIssues", issues, |r| {
        let mut c = inbox.clone();
        let r = authed(&operator, r);
        async move { c.list_inbox_issues(r).await }
    })
    .await;
    let mut replays = Vec::new();
    let mut inbox_resolves = Vec::new();
    for id in I64S {
        // An id may name a real item of the tenant: accepting it is not a fault here.
        replays.push((
            format!("inbox_id={id}"),
            pb::ReplayInboxItemRequest {
                inbox_id: id,
                reason: "hostile suite".into(),
            },
            true,
        ));
        inbox_resolves.push((
            format!("inbox_id={id}"),
            pb::ResolveInboxItemRequest {
                inbox_id: id,
                reason: "hostile suite".into(),
            },
            true,
        ));
    }
    for (l, t) in texts {
        replays.push((
            format!("reason={l}"),
            pb::ReplayInboxItemRequest {
                inbox_id: i64::MAX,
                reason: t.clone(),
            },
            false,
        ));
        inbox_resolves.push((
            format!("reason={l}"),
            pb::ResolveInboxItemRequest {
                inbox_id: i64::MAX,
                reason: t.clone(),
            },
            false,
        ));
    }
    run(tally, "ReplayInboxItem", replays, |r| {
        let mut c = inbox.clone();
        let r = authed(&operator, r);
        async move { c.replay_inbox_item(r).await }
    })
    .await;
    run(tally, "ResolveInboxItem", inbox_resolves, |r| {
        let mut c = inbox.clone();
        let r = authed(&operator, r);
        async move { c.resolve_inbox_item(r).await }
    })
    .await;
    Ok(())
}
