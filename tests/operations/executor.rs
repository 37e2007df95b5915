//! Who executes a withdrawal is chosen at create from the tenant's and network's configuration
//! (`custodian_routes`), stored with it and shown by `GetWithdrawal` and `ListWithdrawals`; a
//! routed tenant needs no signer wallet, every other one keeps the local signer and its wallet
//! check; a change of the routes applies to withdrawals created after it; a route naming an
//! invalid tenant or network is refused at load.

use opledger_operations::Config;
use opledger_operations::config::CustodianRoute;
use opledger_operations::config::routes;
use opledger_proto::v1 as pb;
use opledger_tests::signer::NETWORK;
use opledger_tests::{ALICE, Stack, authed, new_key, operations_config, payload};

fn routed(tenant: &str, network: &str) -> Config {
    Config {
        custodian_routes: vec![CustodianRoute {
            tenant: tenant.to_owned(),
            network: network.to_owned(),
        }],
        ..operations_config()
    }
}

#[tokio::test]
async fn a_routed_tenant_network_is_executed_by_its_custodian_and_shown_so() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    let beta = stack.tenant("beta").await?;
    for tenant in [&acme, &beta] {
        stack.fund(tenant, "treasury", "ETH", "100000").await?;
    }
    // acme's withdrawals on the test network go through its custodian; it holds no signer
    // wallet there, which a custodian route does not need.
    stack.remove_executors(acme.id, NETWORK).await?;
    let (mut client, server) = stack
        .operations_with(routed(&acme.id.to_string(), NETWORK))
        .await?;
    let mut create = async |tenant: &opledger_tests::Tenant| {
        client
            .create_withdrawal(authed(
                &tenant.client,
                pb::CreateWithdrawalRequest {
                    idempotency_key: new_key(),
                    payload: Some(payload("100", ALICE)),
                },
            ))
            .await
            .map(|r| r.into_inner().withdrawal.unwrap_or_default())
    };
    let by_custodian = create(&acme).await?;
    let by_signer = create(&beta).await?;
    assert_eq!(by_custodian.executor, pb::Executor::Custodian as i32);
    assert_eq!(by_signer.executor, pb::Executor::LocalSigner as i32);

    // Stored: the Stack's own service (no routes) shows what each was created under.
    let mut plain = stack.client().await?;
    let shown = plain
        .get_withdrawal(authed(
            &acme.client,
            pb::GetWithdrawalRequest {
                withdrawal_id: by_custodian.withdrawal_id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(shown.executor, pb::Executor::Custodian as i32);
    let listed = plain
        .list_withdrawals(authed(&beta.client, pb::ListWithdrawalsRequest::default()))
        .await?
        .into_inner();
    assert_eq!(listed.withdrawals.len(), 1);
    assert_eq!(
        listed.withdrawals[0].executor,
        pb::Executor::LocalSigner as i32
    );
    let (executor,): (String,) =
        sqlx::query_as("SELECT executor FROM withdrawal_ops WHERE op_id = $1::uuid")
            .bind(&by_custodian.withdrawal_id)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(executor, "custodian");

    // Without the route, acme's next withdrawal is the local signer's again, and refused: no
    // signer holds a wallet of acme's there (the custodian's earlier one is unchanged).
    let refused = plain
        .create_withdrawal(authed(
            &acme.client,
            pb::CreateWithdrawalRequest {
                idempotency_key: new_key(),
                payload: Some(payload("100", ALICE)),
            },
        ))
        .await
        .expect_err("no executor without the route");
    assert_eq!(opledger_tests::reason(&refused), "NO_EXECUTOR_FOR_NETWORK");
    server.abort();
    stack.assert_invariants().await
}

#[test]
fn a_route_naming_an_invalid_tenant_or_network_or_twice_the_same_is_refused_at_load() {
    let tenant = "0190c4c8-4b5d-7c6e-8f90-123456789abc";
    let mut twice = routed(tenant, NETWORK);
    twice
        .custodian_routes
        .push(twice.custodian_routes[0].clone());
    let cases = [
        (routed("acme", NETWORK), "not a UUID"),
        (routed(tenant, "Not A Network"), "invalid network id"),
        (
            routed(tenant, "mainnet-unlisted"),
            "missing from [networks]",
        ),
        (twice, "twice"),
    ];
    for (config, problem) in cases {
        let refused = routes(&config.custodian_routes, &config.networks).expect_err(problem);
        let text = refused.to_string();
        assert!(
            text.contains(problem) && text.contains("custodian_routes"),
            "{text}"
        );
    }
    let config = routed(tenant, NETWORK);
    let pairs = routes(&config.custodian_routes, &config.networks).expect("a valid route");
    assert_eq!(pairs.len(), 1);
}
