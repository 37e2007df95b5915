//! One configured account to its adapter.

use crate::api::Custodian;
use crate::bitgo::BitGo;
use crate::config::{AccountConfig, SetupError};
use crate::fireblocks::Fireblocks;
use crate::prime::Prime;
use std::sync::Arc;

/// The adapter of the account `config` describes: settings checked, secrets read, HTTP client
/// built (through `opledger_chain::http_client`). Errors name the setting, never a value.
pub fn build(config: &AccountConfig) -> Result<Arc<dyn Custodian>, SetupError> {
    Ok(match config {
        AccountConfig::LookupByReference(config) => Arc::new(Fireblocks::new(config)?),
        AccountConfig::OneSendPerReference(config) => Arc::new(BitGo::new(config)?),
        AccountConfig::NoLookup(config) => Arc::new(Prime::new(config)?),
    })
}
