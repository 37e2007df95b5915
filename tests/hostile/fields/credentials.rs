//! Hostile `authorization` values on every API.

use super::run;
use crate::harness::{Suite, Tally};
use opledger_proto::v1 as pb;
use opledger_proto::v1::approvals_service_client::ApprovalsServiceClient;
use opledger_proto::v1::operator_service_client::OperatorServiceClient;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_tests::new_key;
use opledger_tests::signer::CALLER_TOKEN;
use tonic::transport::Channel;

/// `message` with exactly this `authorization` value (none when it cannot be a header value).
fn with<T>(value: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(v) = value.parse() {
        request.metadata_mut().insert("authorization", v);
    }
    request
}

/// Hostile `authorization` values on every API: all refused with a typed error.
pub async fn batch(suite: &Suite, tally: &mut Tally) -> anyhow::Result<()> {
    let acme = suite.acme();
    let bad: Vec<(String, String)> = vec![
        ("empty".into(), String::new()),
        ("scheme_only".into(), "Bearer".into()),
        ("scheme_and_space".into(), "Bearer ".into()),
        ("basic".into(), "Basic Zm9vOmJhcg==".into()),
        ("huge_token".into(), format!("Bearer {}", "A".repeat(8000))),
        ("double_space".into(), format!("Bearer  x{}", acme.client)),
        (
            "truncated_token".into(),
            format!("Bearer {}", &acme.client[..acme.client.len() / 2]),
        ),
        (
            "token_with_tab".into(),
            format!("Bearer \t{}x", acme.client),
        ),
        (
            "signer_token_elsewhere".into(),
            format!("Bearer {CALLER_TOKEN}"),
        ),
    ];
    let ops = suite.world.stack.client().await?;
    let approvals: ApprovalsServiceClient<Channel> = suite.world.stack.approvals().await?;
    let signer = SignerServiceClient::connect(format!("http://{}", suite.signer.addr)).await?;
    let inbox = suite.world.inbox.operator().await?;
    let reconciler = OperatorServiceClient::connect(format!("http://{}", suite.operator)).await?;
    for (label, value) in &bad {
        let case = |m: &str| vec![(format!("{m} authorization={label}"), (), false)];
        run(tally, "operations", case("GetBalance"), |()| {
            let mut c = ops.clone();
            let r = with(
                value,
                pb::GetBalanceRequest {
                    account: "treasury".into(),
                    asset: "ETH".into(),
                },
            );
            async move { c.get_balance(r).await }
        })
        .await;
        run(tally, "approvals", case("ListPendingApprovals"), |()| {
            let mut c = approvals.clone();
            let r = with(value, pb::ListPendingApprovalsRequest::default());
            async move { c.list_pending_approvals(r).await }
        })
        .await;
        if label != "signer_token_elsewhere" {
            run(tally, "signer", case("SignWithdrawal"), |()| {
                let mut c = signer.clone();
                let r = with(
                    value,
                    pb::SignWithdrawalRequest {
                        tenant_id: acme.id.to_string(),
                        withdrawal_id: new_key(),
                    },
                );
                async move { c.sign_withdrawal(r).await }
            })
            .await;
        }
        run(tally, "inbox", case("ListInboxIssues"), |()| {
            let mut c = inbox.clone();
            let r = with(value, pb::ListInboxIssuesRequest::default());
            async move { c.list_inbox_issues(r).await }
        })
        .await;
        run(tally, "reconciler", case("ListUnresolved"), |()| {
            let mut c = reconciler.clone();
            let r = with(value, pb::ListUnresolvedRequest::default());
            async move { c.list_unresolved(r).await }
        })
        .await;
    }
    Ok(())
}
