//! Preparing the pipeline benchmark: the database's service logins, senders (tenants with keys,
//! funded accounts and hot wallets) for every phase, random keys and addresses, gRPC channels.

use crate::database::{self, BenchDatabase};
use alloy_primitives::Address;
use opledger_domain::amount::Amount;
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::payload::{AccountName, AssetCode};
use opledger_evm::signer::{KeyProvider, LocalKey};
use opledger_signer::Wallets;
use opledger_store::keys::Role;
use opledger_store::ledger::NewCredit;
use opledger_store::{Store, StoreError};
use rand::RngCore;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use std::sync::Arc;
use tonic::transport::Channel;
use zeroize::Zeroizing;

use super::options::{
    APPROVALS, Args, BROADCASTER, CHANNELS, DB, NETWORK, OPERATIONS, RECONCILER, SIGNER, WITNESS,
};
use super::services::RoleUrls;
use super::types::Sender;

/// One measured phase before it runs: its label, its senders and its instance count.
pub(super) type PlannedPhase = (String, Vec<Sender>, usize);

pub(super) fn store_err(e: StoreError) -> anyhow::Error {
    anyhow::anyhow!(e.log_safe())
}

/// A fresh benchmark database and the URL of each service's login role in it.
pub(super) async fn database(admin: &PgConnectOptions) -> anyhow::Result<(PgPool, RoleUrls)> {
    let BenchDatabase {
        owner,
        role_url: operations,
    } = database::fresh(admin, DB, 8, OPERATIONS).await?;
    let urls = RoleUrls {
        operations,
        approvals: database::login_role(&owner, admin, DB, APPROVALS).await?,
        signer: database::login_role(&owner, admin, DB, SIGNER).await?,
        broadcaster: database::login_role(&owner, admin, DB, BROADCASTER).await?,
        reconciler: database::login_role(&owner, admin, DB, RECONCILER).await?,
        witness: database::login_role(&owner, admin, DB, WITNESS).await?,
    };
    Ok((owner, urls))
}

/// Every measured phase: each sender count once per instance count, in the order given, each
/// with its own new senders.
pub(super) async fn phases(
    setup: &Store,
    wallets: &mut Wallets,
    args: &Args,
) -> anyhow::Result<Vec<PlannedPhase>> {
    let mut phases = Vec::new();
    for (p, &n) in args.senders.iter().enumerate() {
        for (q, &instances) in args.instances.iter().enumerate() {
            let mut senders = Vec::new();
            for i in 0..n {
                let name = format!("bench-pipeline-{p}-{q}-{i}");
                senders.push(new_sender(setup, wallets, &name).await?);
            }
            let mut label = if n == 1 {
                "1 sender".to_owned()
            } else {
                format!("{n} senders")
            };
            if args.instances != [1] {
                label.push_str(&format!(
                    ", {instances} instance{}",
                    if instances == 1 { "" } else { "s" }
                ));
            }
            phases.push((label, senders, instances));
        }
    }
    Ok(phases)
}

/// A random secp256k1 secret (never a fixed or real key).
pub(super) fn random_secret() -> Zeroizing<[u8; 32]> {
    let mut secret = Zeroizing::new([0_u8; 32]);
    rand::rng().fill_bytes(secret.as_mut());
    secret
}

pub(super) fn random_address() -> Address {
    let mut bytes = [0_u8; 20];
    rand::rng().fill_bytes(&mut bytes);
    Address::from(bytes)
}

/// A tenant with client and approver keys, a funded `treasury` account and a fresh hot wallet.
pub(super) async fn new_sender(
    store: &Store,
    wallets: &mut Wallets,
    name: &str,
) -> anyhow::Result<Sender> {
    let tenant = store.create_tenant(name).await.map_err(store_err)?;
    let client = store
        .create_api_key(tenant, Role::Client, "bench")
        .await
        .map_err(store_err)?;
    let approver = store
        .create_api_key(tenant, Role::Approver, "bench")
        .await
        .map_err(store_err)?;
    let trust = crate::trust::publish(store, tenant).await?;
    let key = IdempotencyKey::parse(&uuid::Uuid::new_v4().to_string())?;
    store
        .credit_account(NewCredit {
            tenant_id: tenant,
            key: &key,
            account: &AccountName::parse("treasury")?,
            asset: &AssetCode::parse("ETH")?,
            amount: Amount::parse("1000000000000000000000000000000")?,
        })
        .await
        .map_err(store_err)?;
    let wallet = Arc::new(LocalKey::from_secret_bytes(random_secret())?);
    let address = format!("{:#x}", wallet.address());
    anyhow::ensure!(
        wallets.insert(tenant, NETWORK, wallet, 0),
        "a second wallet for one tenant"
    );
    Ok(Sender {
        tenant,
        client: Arc::from(client.token.as_str()),
        approver: Arc::from(approver.token.as_str()),
        trust,
        address,
    })
}

pub(super) async fn channels(url: &str) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::new();
    for _ in 0..CHANNELS {
        out.push(Channel::from_shared(url.to_owned())?.connect().await?);
    }
    Ok(out)
}
