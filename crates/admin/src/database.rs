//! The commands that work on the database as its owner: migrations, tenants, API keys, opening
//! credits, deposit addresses and the ledger invariant checks.

use crate::cli::KeyCommand;
use crate::output::print;
use anyhow::Context;
use opledger_store::keys::Role;
use opledger_store::{MIGRATOR, Store};

/// The flags of `credit`, as given.
#[derive(Debug)]
pub(crate) struct CreditFlags<'a> {
    pub(crate) tenant: &'a str,
    pub(crate) account: &'a str,
    pub(crate) asset: &'a str,
    pub(crate) amount: &'a str,
    pub(crate) key: &'a str,
}

/// `migrate`.
pub(crate) async fn migrate(store: &Store, json: bool) -> anyhow::Result<()> {
    MIGRATOR
        .run(store.pool())
        .await
        .context("migration failed")?;
    let applied = MIGRATOR.iter().count();
    print(
        json,
        &format!("schema is current ({applied} migrations)"),
        serde_json::json!({ "migrations": applied }),
    );
    Ok(())
}

/// `tenant create`.
pub(crate) async fn create_tenant(store: &Store, name: &str, json: bool) -> anyhow::Result<()> {
    let tenant_id = store
        .create_tenant(name)
        .await
        .map_err(|e| anyhow::anyhow!("cannot create tenant: {}", e.log_safe()))?;
    print(
        json,
        &tenant_id.to_string(),
        serde_json::json!({ "tenant_id": tenant_id.to_string(), "name": name }),
    );
    Ok(())
}

/// `key create` and `key revoke`.
pub(crate) async fn key(store: &Store, command: KeyCommand, json: bool) -> anyhow::Result<()> {
    match command {
        KeyCommand::Create {
            tenant,
            role,
            label,
        } => {
            let role =
                Role::parse(&role).context("role must be client, approver, operator or service")?;
            let tenant_id = store
                .tenant_by_name(&tenant)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
                .context("no such tenant")?;
            let issued = store
                .create_api_key(tenant_id, role, &label)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
            print(
                json,
                issued.token.as_str(),
                serde_json::json!({ "key_id": issued.key_id, "api_key": issued.token.as_str(), "tenant_id": tenant_id.to_string(), "role": role.as_str() }),
            );
        }
        KeyCommand::Revoke { key_id } => {
            store
                .revoke_api_key(&key_id)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
            print(json, "revoked", serde_json::json!({ "revoked": key_id }));
        }
    }
    Ok(())
}

/// `credit`: an opening balance credited idempotently.
pub(crate) async fn credit(
    store: &Store,
    flags: CreditFlags<'_>,
    json: bool,
) -> anyhow::Result<()> {
    use opledger_domain::{amount::Amount, idempotency::IdempotencyKey, payload};
    let tenant_id = store
        .tenant_by_name(flags.tenant)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
        .context("no such tenant")?;
    let key = IdempotencyKey::parse(flags.key).map_err(|e| anyhow::anyhow!("--key: {e}"))?;
    let account = payload::AccountName::parse(flags.account)
        .map_err(|e| anyhow::anyhow!("--account: {e}"))?;
    let asset =
        payload::AssetCode::parse(flags.asset).map_err(|e| anyhow::anyhow!("--asset: {e}"))?;
    let amount = Amount::parse(flags.amount).map_err(|e| anyhow::anyhow!("--amount: {e}"))?;
    anyhow::ensure!(!amount.is_zero(), "--amount must be greater than zero");
    let credited = store
        .credit_account(opledger_store::ledger::NewCredit {
            tenant_id,
            key: &key,
            account: &account,
            asset: &asset,
            amount,
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot credit: {}", e.log_safe()))?;
    let b = &credited.balance;
    print(
        json,
        &format!(
            "available {} held {} (replayed: {})",
            b.available, b.held, credited.replayed
        ),
        serde_json::json!({ "available": b.available.to_string(), "held": b.held.to_string(), "replayed": credited.replayed }),
    );
    Ok(())
}

/// `deposit-address add`.
pub(crate) async fn add_deposit_address(
    store: &Store,
    tenant: &str,
    network: &str,
    address: &str,
    account: &str,
    json: bool,
) -> anyhow::Result<()> {
    use opledger_domain::payload;
    let tenant_id = store
        .tenant_by_name(tenant)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?
        .context("no such tenant")?;
    let network =
        payload::NetworkId::parse(network).map_err(|e| anyhow::anyhow!("--network: {e}"))?;
    let account =
        payload::AccountName::parse(account).map_err(|e| anyhow::anyhow!("--account: {e}"))?;
    let mut bytes = [0_u8; 20];
    address
        .strip_prefix("0x")
        .and_then(|digits| hex::decode_to_slice(digits, &mut bytes).ok())
        .context("--address must be 0x and 40 hex digits")?;
    let added = store
        .register_deposit_address(network.as_str(), &bytes, tenant_id, &account)
        .await
        .map_err(|e| match e {
            opledger_store::StoreError::Conflict { .. } => anyhow::anyhow!(
                "the address is already registered to another account: nothing changed"
            ),
            other => anyhow::anyhow!("cannot register: {}", other.log_safe()),
        })?;
    print(
        json,
        if added {
            "registered"
        } else {
            "already registered to this account"
        },
        serde_json::json!({ "registered": added }),
    );
    Ok(())
}

/// `check-invariants`: exits 1 when any invariant is violated.
pub(crate) async fn check_invariants(store: &Store, json: bool) -> anyhow::Result<()> {
    let violations = store
        .check_invariants()
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.log_safe()))?;
    let report: Vec<_> = violations
        .iter()
        .map(|v| serde_json::json!({ "invariant": v.invariant, "rows": v.rows }))
        .collect();
    let text = if violations.is_empty() {
        format!(
            "all {} invariants hold",
            opledger_store::invariants::CHECKS.len()
        )
    } else {
        violations
            .iter()
            .map(|v| format!("VIOLATED: {} ({:?})", v.invariant, v.rows))
            .collect::<Vec<_>>()
            .join("\n")
    };
    print(json, &text, serde_json::json!({ "violations": report }));
    if !violations.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
