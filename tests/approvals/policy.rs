//! Approval policies: part of the tenant's signed trust statement, read back through the API.

use opledger_domain::amount::Amount;
use opledger_domain::approval::TrustParts;
use opledger_domain::payload::AssetCode;
use opledger_domain::policy::ApprovalRule as Rule;
use opledger_proto::v1::{ApprovalRule, GetApprovalPolicyRequest};
use opledger_store::{Store, StoreConfig};
use opledger_testkit::trust::{default_parts, publish, signed_trust};
use opledger_tests::{Stack, authed, reason};

fn rule(min: &str, n: u32) -> anyhow::Result<(AssetCode, Rule)> {
    Ok((
        AssetCode::parse("ETH")?,
        Rule {
            min_amount: Amount::parse(min)?,
            required_approvals: n,
        },
    ))
}

fn wire(min: &str, n: u32) -> ApprovalRule {
    ApprovalRule {
        min_amount: min.into(),
        required_approvals: n,
    }
}

#[tokio::test]
async fn policies_default_to_one_approver_and_refuse_invalid_rules() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let mut approvals = stack.approvals().await?;
    let get = || GetApprovalPolicyRequest {
        asset: "ETH".into(),
    };
    let default = approvals
        .get_approval_policy(authed(&acme.approver, get()))
        .await?
        .into_inner();
    assert_eq!(default.rules, vec![wire("0", 1)]);
    assert_eq!(default.policy_version, 1);
    assert!(!default.kyt_pass_required);

    // Invalid rule sets cannot be made into a trust statement at all.
    for rules in [
        vec![rule("5", 1)?],
        vec![rule("0", 0)?],
        vec![rule("0", 11)?],
        vec![rule("0", 1)?, rule("0", 2)?],
    ] {
        let parts = TrustParts {
            rules,
            ..default_parts(acme.id)
        };
        assert!(
            signed_trust(acme.id, 2, parts).is_err(),
            "an invalid policy is refused"
        );
    }
    // A non-canonical amount is refused where it is parsed.
    assert!(Amount::parse("01").is_err());

    // The services' database role cannot publish (approvers cannot change their own policy):
    // only the owner role writes trust statements.
    let app = Store::connect(
        &stack.url(opledger_testkit::ServiceRole::Approvals),
        StoreConfig::default(),
    )
    .await
    .map_err(|e| anyhow::anyhow!("app role cannot connect: {}", e.log_safe()))?;
    let (statement, signature) = signed_trust(
        acme.id,
        2,
        TrustParts {
            rules: vec![rule("0", 2)?],
            ..default_parts(acme.id)
        },
    )?;
    assert!(
        app.publish_trust_statement(acme.id, &statement, &signature)
            .await
            .is_err(),
        "the app role publishes no trust statement"
    );
    // A published version is never replaced.
    let (statement, signature) = signed_trust(
        acme.id,
        1,
        TrustParts {
            rules: vec![rule("0", 2)?],
            ..default_parts(acme.id)
        },
    )?;
    assert!(
        stack
            .admin
            .publish_trust_statement(acme.id, &statement, &signature)
            .await
            .is_err(),
        "version 1 exists"
    );
    let unchanged = approvals
        .get_approval_policy(authed(&acme.approver, get()))
        .await?
        .into_inner();
    assert_eq!(unchanged, default);

    publish(
        &stack.admin,
        acme.id,
        2,
        TrustParts {
            rules: vec![rule("1000000", 3)?, rule("0", 1)?, rule("1000", 2)?],
            ..default_parts(acme.id)
        },
    )
    .await?;
    let got = approvals
        .get_approval_policy(authed(&acme.approver, get()))
        .await?
        .into_inner();
    assert_eq!(
        got.rules,
        vec![wire("0", 1), wire("1000", 2), wire("1000000", 3)],
        "sorted"
    );
    assert_eq!(got.policy_version, 2);
    assert_eq!(got.asset, "ETH");
    // Other assets keep the default under the new version.
    let usdc = approvals
        .get_approval_policy(authed(
            &acme.operator,
            GetApprovalPolicyRequest {
                asset: "USDC".into(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!((usdc.rules, usdc.policy_version), (vec![wire("0", 1)], 2));
    let err = approvals
        .get_approval_policy(authed(
            &acme.approver,
            GetApprovalPolicyRequest {
                asset: "not an asset".into(),
            },
        ))
        .await
        .expect_err("bad asset");
    assert_eq!(reason(&err), "INVALID_FIELD");
    Ok(())
}
