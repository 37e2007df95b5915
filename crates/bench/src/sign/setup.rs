//! Preparing the sign benchmark: senders with hot wallets, funded accounts, approved withdrawals.

use alloy_primitives::Address;
use opledger_domain::amount::Amount;
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{AccountName, AssetCode, Destination, NetworkId, WithdrawalPayload};
use opledger_domain::state::OperationState;
use opledger_evm::signer::{KeyProvider, LocalKey};
use opledger_signer::Wallets;
use opledger_signer::config::NetworkConfig;
use opledger_signer::signing::SignerError;
use opledger_store::approvals::Approve;
use opledger_store::keys::Role;
use opledger_store::ledger::NewCredit;
use opledger_store::operations::NewWithdrawal;
use opledger_store::{Store, StoreError};
use rand::RngCore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use zeroize::Zeroizing;

use super::options::{ACCOUNTS, NETWORK, PREPARE_TASKS};
use super::types::{Phase, Sender};

/// The bench network, as tests/support/signer.rs configures anvil.
pub(super) fn network() -> NetworkConfig {
    NetworkConfig {
        chain_id: 31337,
        native_asset: "ETH".into(),
        tokens: BTreeMap::new(),
        gas_limit_native: 21_000,
        gas_limit_erc20: 100_000,
        max_fee_per_gas: opledger_config::Wei(2_000_000_000),
        max_priority_fee_per_gas: opledger_config::Wei(1_000_000_000),
        fee_bump_percent: 25,
        cancel_max_fee_per_gas: opledger_config::Wei(20_000_000_000),
    }
}

pub(super) fn store_err(e: StoreError) -> anyhow::Error {
    anyhow::anyhow!(e.log_safe())
}

pub(super) fn signer_err(e: &SignerError) -> String {
    match e {
        SignerError::Store(s) => s.log_safe(),
        other => other.to_string(),
    }
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

pub(super) fn account_name(i: usize) -> String {
    format!("treasury-{i}")
}

/// Where new hot-wallet keys are made: in memory, or in a SoftHSM2 token of the run's own.
pub(super) enum Keys {
    /// A random key in the signer's memory.
    Memory,
    /// A key generated in this token, used through it.
    Token(opledger_testkit::hsm::TestToken),
}

impl Keys {
    /// The keys of `backend` (a new token for `pkcs11`).
    pub(super) fn of(backend: super::options::Backend) -> anyhow::Result<Keys> {
        Ok(match backend {
            super::options::Backend::Keystore => Keys::Memory,
            super::options::Backend::Pkcs11 => {
                Keys::Token(opledger_testkit::hsm::TestToken::create()?)
            }
        })
    }

    /// A new key.
    fn key(&self) -> anyhow::Result<Arc<dyn KeyProvider>> {
        match self {
            Keys::Memory => Ok(Arc::new(LocalKey::from_secret_bytes(random_secret())?)),
            Keys::Token(token) => {
                let label = format!("bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
                let location = token.location(&label);
                opledger_hsm::generate(&location)?;
                Ok(Arc::new(opledger_hsm::Pkcs11Key::open(
                    &location,
                    std::time::Duration::from_secs(5),
                )?))
            }
        }
    }
}

/// A tenant with client and approver keys, funded source accounts and a fresh hot wallet.
pub(super) async fn new_sender(
    store: &Store,
    wallets: &mut Wallets,
    keys: &Keys,
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
    let asset = AssetCode::parse("ETH")?;
    for i in 0..ACCOUNTS {
        let key = IdempotencyKey::parse(&uuid::Uuid::new_v4().to_string())?;
        let account = AccountName::parse(&account_name(i))?;
        store
            .credit_account(NewCredit {
                tenant_id: tenant,
                key: &key,
                account: &account,
                asset: &asset,
                amount: Amount::parse("1000000000000000000000000000000")?,
            })
            .await
            .map_err(store_err)?;
    }
    let key = keys.key()?;
    let address = format!("{:#x}", key.address());
    anyhow::ensure!(
        wallets.insert(tenant, NETWORK, key, 0),
        "a second wallet for one tenant"
    );
    Ok(Sender {
        tenant,
        client_key_id: client.key_id.clone(),
        approver_key_id: approver.key_id.clone(),
        trust,
        address,
    })
}

/// The warm-up's sender and one phase per entry of `counts` (its senders, no work yet), each
/// sender a new tenant with its own hot wallet in `wallets`.
pub(super) async fn phases(
    store: &Store,
    wallets: &mut Wallets,
    keys: &Keys,
    counts: &[usize],
) -> anyhow::Result<(Sender, Vec<Phase>)> {
    let warmup_sender = new_sender(store, wallets, keys, "bench-sign-warmup").await?;
    let mut phases = Vec::new();
    for (p, &n) in counts.iter().enumerate() {
        let mut senders = Vec::new();
        for i in 0..n {
            senders.push(new_sender(store, wallets, keys, &format!("bench-sign-{p}-{i}")).await?);
        }
        let label = if n == 1 {
            "1 sender".to_owned()
        } else {
            format!("{n} senders")
        };
        phases.push(Phase {
            label,
            senders,
            work: Vec::new(),
        });
    }
    Ok((warmup_sender, phases))
}

/// Creates and approves `n` withdrawals spread round-robin over `senders`; returns them in that
/// order, so that concurrent signers spread over the senders too.
pub(super) async fn prepare(
    store: &Store,
    senders: &[Sender],
    n: usize,
) -> anyhow::Result<Vec<(TenantId, OperationId)>> {
    let senders = Arc::new(senders.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..PREPARE_TASKS.min(n) {
        let (store, senders, next) = (store.clone(), senders.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut made = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let sender = &senders[i % senders.len()];
                let account = account_name((i / senders.len()) % ACCOUNTS);
                let op = approved_withdrawal(&store, sender, &account).await?;
                made.push((i, sender.tenant, op));
            }
            Ok::<_, anyhow::Error>(made)
        }));
    }
    let mut all = Vec::with_capacity(n);
    for task in tasks {
        all.extend(task.await??);
    }
    all.sort_unstable_by_key(|(i, _, _)| *i);
    Ok(all.into_iter().map(|(_, t, op)| (t, op)).collect())
}

/// One withdrawal created with its hold and approved by the tenant's approver (default policy:
/// one approver).
pub(super) async fn approved_withdrawal(
    store: &Store,
    sender: &Sender,
    account: &str,
) -> anyhow::Result<OperationId> {
    let payload = WithdrawalPayload {
        tenant_id: sender.tenant,
        source_account: AccountName::parse(account)?,
        asset: AssetCode::parse("ETH")?,
        network: NetworkId::parse(NETWORK)?,
        destination: Destination::parse(&format!("{:#x}", random_address()))?,
        memo: None,
        amount: Amount::parse("100")?,
        fee_cap: Amount::parse("1000000000000000")?,
        policy_version: 1,
    };
    let key = IdempotencyKey::parse(&uuid::Uuid::new_v4().to_string())?;
    let created = store
        .create_withdrawal(NewWithdrawal {
            op_id: OperationId::new(),
            key: &key,
            payload: &payload,
            actor_id: &sender.client_key_id,
            executor: opledger_domain::operation::Executor::LocalSigner,
        })
        .await
        .map_err(store_err)?;
    anyhow::ensure!(!created.replayed, "a fresh key was replayed");
    let op = created.operation;
    let (statement, signature) = sender.trust.approval(
        op.op_id,
        op.payload_hash,
        op.risk_flags.iter().copied().collect(),
    )?;
    let approved = store
        .approve(&Approve {
            approver_id: &sender.approver_key_id,
            statement,
            signature: &signature,
        })
        .await
        .map_err(store_err)?;
    anyhow::ensure!(
        approved.state == OperationState::Approved,
        "one approval did not approve (state {})",
        approved.state.as_str()
    );
    Ok(op.op_id)
}
