//! The provider accounts of the configuration, by tenant, network and asset, and the transfer a
//! withdrawal's stored payload asks for.

use crate::config::Config;
use opledger_custodian::{Custodian, SetupError, TransferRequest};
use opledger_domain::evidence::parse_address;
use opledger_domain::ids::TenantId;
use opledger_domain::operation::Operation;
use std::collections::HashMap;
use std::sync::Arc;

/// One configured provider account.
#[derive(Debug, Clone)]
pub struct Account {
    /// Its name, stored with each request.
    pub name: String,
    /// Its adapter.
    pub custodian: Arc<dyn Custodian>,
}

/// Every account, by (tenant, network, asset).
#[derive(Debug, Default)]
pub struct Accounts {
    by_route: HashMap<(TenantId, String, String), Account>,
}

/// Why the accounts could not be built.
#[derive(Debug, thiserror::Error)]
#[error("account {name}: {source}")]
pub struct AccountError {
    /// The account's name.
    pub name: String,
    /// Why.
    pub source: SetupError,
}

impl Accounts {
    /// The accounts of `config` (validated at load), each with its adapter built.
    pub fn from_config(config: &Config) -> Result<Accounts, AccountError> {
        let mut by_route = HashMap::new();
        for route in &config.accounts {
            let custodian =
                opledger_custodian::build(&route.provider).map_err(|source| AccountError {
                    name: route.name.clone(),
                    source,
                })?;
            let Ok(tenant) = route.tenant.parse::<TenantId>() else {
                continue;
            };
            by_route.insert(
                (tenant, route.network.clone(), route.asset.clone()),
                Account {
                    name: route.name.clone(),
                    custodian,
                },
            );
        }
        Ok(Accounts { by_route })
    }

    /// The account executing `op`, if this executor has one.
    pub fn get(&self, op: &Operation) -> Option<&Account> {
        let p = &op.payload;
        self.by_route.get(&(
            p.tenant_id,
            p.network.as_str().to_owned(),
            p.asset.as_str().to_owned(),
        ))
    }
}

/// The transfer `op`'s stored payload asks for, or the reason code it cannot be executed as
/// approved: its payload hash recomputed from the stored fields differs from the stored one, its
/// destination is not an EVM address, or it carries a memo (no profile carries one).
pub fn transfer(op: &Operation) -> Result<TransferRequest, &'static str> {
    if op.payload.hash() != op.payload_hash {
        return Err("CUSTODIAN_HASH_MISMATCH");
    }
    if op.payload.memo.is_some() {
        return Err("MEMO_NOT_EXECUTABLE");
    }
    let destination =
        parse_address(op.payload.destination.as_str()).ok_or("DESTINATION_NOT_EXECUTABLE")?;
    Ok(TransferRequest {
        reference: op.op_id.as_uuid(),
        destination,
        amount: op.payload.amount.get(),
        note: None,
    })
}
