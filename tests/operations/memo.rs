//! What is approved is what can be executed: the network registry refuses, at create, a memo on a
//! network whose transfers cannot carry one (naming `payload.memo`) and a network the platform
//! does not pay out on (naming `payload.network`); a tenant without an ACTIVE hot wallet
//! registered by a signer for the network is refused too (`SIGNER_NOT_CONFIGURED`). Each refusal
//! stores nothing and holds nothing, and never hides a create accepted earlier.

use opledger_operations::config::NetworkPolicy;
use opledger_proto::v1 as pb;
use opledger_proto::v1::operations_service_client::OperationsServiceClient;
use opledger_tests::signer::{HOT_WALLET, NETWORK};
use opledger_tests::{ALICE, Stack, Tenant, authed, new_key, operations_config, payload, reason};
use std::collections::{BTreeMap, HashMap};
use tonic::transport::Channel;
use tonic_types::StatusExt;

async fn funded(stack: &Stack, name: &str) -> anyhow::Result<Tenant> {
    let tenant = stack.tenant(name).await?;
    stack.fund(&tenant, "treasury", "ETH", "1000").await?;
    Ok(tenant)
}

async fn create(
    client: &mut OperationsServiceClient<Channel>,
    tenant: &Tenant,
    key: &str,
    body: pb::WithdrawalPayload,
) -> Result<pb::CreateWithdrawalResponse, tonic::Status> {
    client
        .create_withdrawal(authed(
            &tenant.client,
            pb::CreateWithdrawalRequest {
                idempotency_key: key.to_owned(),
                payload: Some(body),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

fn with_memo(memo: &str) -> pb::WithdrawalPayload {
    let mut body = payload("100", ALICE);
    body.memo = Some(memo.to_owned());
    body
}

/// The refusal is INVALID_ARGUMENT / INVALID_FIELD naming `field`, in its ErrorInfo and its
/// BadRequest, and its message carries no memo or address.
fn assert_invalid_field(status: &tonic::Status, field: &str, secrets: &[&str]) {
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert_eq!(reason(status), "INVALID_FIELD");
    let details = status.get_error_details();
    let info = details.error_info().cloned().expect("error info");
    assert_eq!(info.domain, "opledger");
    assert_eq!(info.metadata.get("field").map(String::as_str), Some(field));
    let violations = details
        .bad_request()
        .map(|b| b.field_violations.clone())
        .unwrap_or_default();
    assert_eq!(
        violations
            .iter()
            .map(|v| v.field.as_str())
            .collect::<Vec<_>>(),
        [field]
    );
    for secret in secrets {
        assert!(
            !status.message().contains(secret),
            "message {:?} carries a sensitive value",
            status.message()
        );
    }
}

/// Nothing stored for the tenant, nothing held.
async fn assert_nothing_created(stack: &Stack, tenant: &Tenant) -> anyhow::Result<()> {
    assert_eq!(stack.count("withdrawal_ops", tenant.id).await?, 0);
    assert_eq!(stack.count("withdrawal_payloads", tenant.id).await?, 0);
    assert_eq!(stack.count("ledger_holds", tenant.id).await?, 0);
    assert_eq!(
        stack.balance(tenant.id, "treasury", "ETH").await?,
        (1000, 0)
    );
    Ok(())
}

#[tokio::test]
async fn a_memo_on_a_network_whose_transfers_cannot_carry_it_is_refused_naming_payload_memo()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = funded(&stack, "acme").await?;
    let mut client = stack.client().await?;
    let key = new_key();
    let memo = "invoice 7731 jane doe";
    let refused = create(&mut client, &acme, &key, with_memo(memo))
        .await
        .expect_err("a memo on an EVM network is refused");
    assert_invalid_field(&refused, "payload.memo", &[memo, ALICE, &key]);
    assert_nothing_created(&stack, &acme).await?;

    // The key stays free: the same intent without a memo is created, not a replay.
    let created = create(&mut client, &acme, &key, payload("100", ALICE)).await?;
    assert!(!created.replayed);
    let w = created.withdrawal.expect("withdrawal");
    assert_eq!(w.payload.and_then(|p| p.memo), None);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_network_outside_the_registry_is_refused_naming_payload_network() -> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = funded(&stack, "acme").await?;
    stack
        .register_executor(acme.id, "mainnet", HOT_WALLET)
        .await?;
    let mut client = stack.client().await?;
    for memo in [None, Some("invoice 7731")] {
        let mut body = payload("100", ALICE);
        body.network = "mainnet".into();
        body.memo = memo.map(str::to_owned);
        let refused = create(&mut client, &acme, &new_key(), body)
            .await
            .expect_err("not a network of the registry");
        // The network is checked first: a memo there changes nothing.
        assert_invalid_field(&refused, "payload.network", &[ALICE]);
    }
    assert_nothing_created(&stack, &acme).await
}

#[tokio::test]
async fn a_network_whose_transfers_carry_a_memo_keeps_it_exactly() -> anyhow::Result<()> {
    let mut config = operations_config();
    config
        .networks
        .insert("memo-chain".into(), NetworkPolicy { memo: true });
    let stack = Stack::start_with(config).await?;
    let acme = funded(&stack, "acme").await?;
    stack
        .register_executor(acme.id, "memo-chain", HOT_WALLET)
        .await?;
    let mut client = stack.client().await?;
    let mut body = with_memo("invoice 7731 – café ✓");
    body.network = "memo-chain".into();
    let created = create(&mut client, &acme, &new_key(), body.clone()).await?;
    let w = created.withdrawal.expect("withdrawal");
    assert_eq!(w.payload, Some(body), "stored exactly as sent");
    // The same memo on the EVM network of the same registry is still refused.
    let refused = create(&mut client, &acme, &new_key(), with_memo("invoice 7731"))
        .await
        .expect_err("refused on anvil");
    assert_invalid_field(&refused, "payload.memo", &["invoice 7731"]);
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_tenant_without_an_active_executor_for_the_network_is_refused_with_nothing_held()
-> anyhow::Result<()> {
    let stack = Stack::start().await?;
    let acme = funded(&stack, "acme").await?;
    let mut client = stack.client().await?;
    let expect_no_executor = |status: tonic::Status| {
        assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status:?}");
        assert_eq!(reason(&status), "NO_EXECUTOR_FOR_NETWORK");
        let info = status
            .get_error_details()
            .error_info()
            .cloned()
            .expect("error info");
        assert_eq!(
            info.metadata,
            HashMap::from([("network".to_owned(), NETWORK.to_owned())])
        );
        assert!(!status.message().contains(ALICE), "{}", status.message());
    };

    // No wallet registered at all.
    stack.remove_executors(acme.id, NETWORK).await?;
    let refused = create(&mut client, &acme, &new_key(), payload("100", ALICE))
        .await
        .expect_err("no executor");
    expect_no_executor(refused);
    // Only a RETIRING wallet: it signs no new withdrawal.
    stack
        .register_executor(acme.id, NETWORK, HOT_WALLET)
        .await?;
    sqlx::query("UPDATE signer_wallets SET status = 'RETIRING' WHERE tenant_id = $1")
        .bind(acme.id.as_uuid())
        .execute(stack.admin.pool())
        .await?;
    let refused = create(&mut client, &acme, &new_key(), payload("100", ALICE))
        .await
        .expect_err("only a retiring wallet");
    expect_no_executor(refused);
    // Another tenant's wallet does not count for this one.
    let beta = funded(&stack, "beta").await?;
    let refused = create(&mut client, &acme, &new_key(), payload("100", ALICE))
        .await
        .expect_err("beta's wallet is not acme's");
    expect_no_executor(refused);
    assert_nothing_created(&stack, &acme).await?;

    // Once a signer registers an ACTIVE wallet, the same request goes through.
    stack
        .register_executor(
            acme.id,
            NETWORK,
            "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
        )
        .await?;
    let created = create(&mut client, &acme, &new_key(), payload("100", ALICE)).await?;
    assert!(!created.replayed);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    assert_eq!(stack.count("withdrawal_ops", beta.id).await?, 0);
    stack.assert_invariants().await
}

#[tokio::test]
async fn without_a_registry_or_the_executor_check_every_network_and_memo_is_accepted()
-> anyhow::Result<()> {
    let stack = Stack::start_with(opledger_operations::Config {
        networks: BTreeMap::new(),
        require_executor: false,
        ..opledger_operations::Config::default()
    })
    .await?;
    let acme = funded(&stack, "acme").await?;
    stack.remove_executors(acme.id, NETWORK).await?;
    let mut client = stack.client().await?;
    let mut body = with_memo("invoice 7731");
    body.network = "mainnet".into();
    let created = create(&mut client, &acme, &new_key(), body).await?;
    assert!(!created.replayed);
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 1);
    stack.assert_invariants().await
}

#[tokio::test]
async fn a_retry_of_a_create_accepted_before_the_registry_refused_it_is_still_its_replay()
-> anyhow::Result<()> {
    // Accepted by a service without a registry (before the deployment listed its networks)...
    let stack = Stack::start_with(opledger_operations::Config {
        networks: BTreeMap::new(),
        ..opledger_operations::Config::default()
    })
    .await?;
    let acme = funded(&stack, "acme").await?;
    let mut lenient = stack.client().await?;
    let key = new_key();
    let first = create(&mut lenient, &acme, &key, with_memo("invoice 7731")).await?;
    assert!(!first.replayed);

    // ...then retried against one that refuses memos on this network: the same operation.
    let (mut strict, server) = stack.operations_with(operations_config()).await?;
    let again = create(&mut strict, &acme, &key, with_memo("invoice 7731")).await?;
    assert!(again.replayed);
    assert_eq!(again.withdrawal, first.withdrawal);
    // The key with another payload is the key's reuse, as for any create.
    let reused = create(&mut strict, &acme, &key, with_memo("invoice 7732"))
        .await
        .expect_err("reused key");
    assert_eq!(reason(&reused), "IDEMPOTENCY_KEY_REUSED");
    // A new key with a memo is refused, and nothing more is held.
    let refused = create(&mut strict, &acme, &new_key(), with_memo("invoice 7731"))
        .await
        .expect_err("a memo on an EVM network");
    assert_invalid_field(&refused, "payload.memo", &["invoice 7731"]);
    assert_eq!(stack.count("withdrawal_ops", acme.id).await?, 1);
    assert_eq!(stack.balance(acme.id, "treasury", "ETH").await?, (900, 100));
    server.abort();
    stack.assert_invariants().await
}

#[test]
fn the_registry_is_typed_and_refuses_what_it_cannot_use() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("opledger-memo-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir)?;
    let load = |text: &str| {
        let path = dir.join("operations.toml");
        std::fs::write(&path, text).map_err(anyhow::Error::from)?;
        opledger_operations::Config::load(Some(&path)).map_err(anyhow::Error::from)
    };
    let url = "database_url = \"postgres://u@127.0.0.1/db\"\n";
    let config = load(&format!(
        "{url}require_executor = false\n[networks.anvil]\nmemo = false\n[networks.memo-chain]\nmemo = true\n[networks.other]\n"
    ))?;
    assert_eq!(
        config.networks,
        BTreeMap::from([
            ("anvil".to_owned(), NetworkPolicy { memo: false }),
            ("memo-chain".to_owned(), NetworkPolicy { memo: true }),
            ("other".to_owned(), NetworkPolicy { memo: false }),
        ]),
        "memo is false unless a network says it carries one"
    );
    assert!(!config.require_executor);
    let defaults = load(url)?;
    assert!(defaults.require_executor, "on unless turned off");
    assert!(defaults.networks.is_empty());
    assert!(
        load(&format!("{url}[networks.anvil]\nmemos = true\n")).is_err(),
        "a typo is refused"
    );
    assert!(
        load(&format!("{url}[networks.Anvil]\nmemo = false\n")).is_err(),
        "a network id that no payload can name is refused"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
