//! Hot wallets: one key per tenant and network, decrypted once at start and held only inside the
//! key provider (zeroized memory). Nothing here ever returns or logs key material.

use crate::config::{Config, WalletConfig};
use opledger_domain::ids::TenantId;
use opledger_evm::keystore::KeystoreError;
use opledger_evm::signer::{KeyProvider, LocalKey};
use std::collections::HashMap;
use std::sync::Arc;
use zeroize::Zeroizing;

/// A tenant's signing account on one network.
#[derive(Debug, Clone)]
pub struct Wallet {
    /// 0x-prefixed lowercase address.
    pub address: String,
    /// Nonce of the wallet's first transaction.
    pub initial_nonce: u64,
    /// Signs hashes; the key never leaves it.
    pub key: Arc<dyn KeyProvider>,
}

/// Why the wallets could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum WalletError {
    /// A wallet's tenant is not a UUID.
    #[error("wallet {index}: tenant_id is not a uuid")]
    Tenant {
        /// Position in the configuration.
        index: usize,
    },
    /// Two wallets for the same tenant and network.
    #[error("wallet {index}: a second wallet for the same tenant and network")]
    Duplicate {
        /// Position in the configuration.
        index: usize,
    },
    /// The passphrase could not be read (the path or variable name is in the configuration).
    #[error("wallet {index}: cannot read its passphrase")]
    Passphrase {
        /// Position in the configuration.
        index: usize,
    },
    /// The keystore could not be read or decrypted.
    #[error("wallet {index}: {source}")]
    Keystore {
        /// Position in the configuration.
        index: usize,
        /// Why.
        source: KeystoreError,
    },
}

/// The hot wallets by tenant and network.
#[derive(Debug, Clone, Default)]
pub struct Wallets {
    by_tenant_network: HashMap<(TenantId, String), Wallet>,
}

impl Wallets {
    /// Decrypts every configured keystore.
    pub fn load(config: &Config) -> Result<Wallets, WalletError> {
        let mut wallets = Wallets::default();
        for (index, wallet) in config.wallets.iter().enumerate() {
            let tenant: TenantId = wallet
                .tenant_id
                .parse()
                .map_err(|_| WalletError::Tenant { index })?;
            let passphrase = passphrase(wallet).ok_or(WalletError::Passphrase { index })?;
            let key = LocalKey::from_keystore_file(&wallet.keystore, &passphrase)
                .map_err(|source| WalletError::Keystore { index, source })?;
            if !wallets.insert(tenant, &wallet.network, Arc::new(key), wallet.initial_nonce) {
                return Err(WalletError::Duplicate { index });
            }
        }
        Ok(wallets)
    }

    /// Adds a wallet; false when the tenant already has one on this network.
    pub fn insert(
        &mut self,
        tenant: TenantId,
        network: &str,
        key: Arc<dyn KeyProvider>,
        initial_nonce: u64,
    ) -> bool {
        let address = format!("{:#x}", key.address());
        let slot = (tenant, network.to_owned());
        if self.by_tenant_network.contains_key(&slot) {
            return false;
        }
        self.by_tenant_network.insert(
            slot,
            Wallet {
                address,
                initial_nonce,
                key,
            },
        );
        true
    }

    /// The tenant's wallet on `network`.
    pub fn get(&self, tenant: TenantId, network: &str) -> Option<&Wallet> {
        self.by_tenant_network.get(&(tenant, network.to_owned()))
    }

    /// How many wallets are loaded.
    pub fn len(&self) -> usize {
        self.by_tenant_network.len()
    }

    /// True when none is loaded.
    pub fn is_empty(&self) -> bool {
        self.by_tenant_network.is_empty()
    }
}

fn passphrase(wallet: &WalletConfig) -> Option<Zeroizing<Vec<u8>>> {
    let raw = match (&wallet.passphrase_file, &wallet.passphrase_env) {
        (Some(path), None) => Zeroizing::new(std::fs::read(path).ok()?),
        (None, Some(var)) => Zeroizing::new(std::env::var(var).ok()?.into_bytes()),
        _ => return None,
    };
    let end = raw
        .iter()
        .rposition(|b| *b != b'\n' && *b != b'\r')
        .map_or(0, |i| i + 1);
    Some(Zeroizing::new(raw[..end].to_vec()))
}
