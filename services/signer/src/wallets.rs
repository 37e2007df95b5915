//! Hot wallets: one key per tenant and network, decrypted once at start and held only inside the
//! key provider (zeroized memory). Nothing here ever returns or logs key material.

use crate::config::{Config, WalletConfig};
use opledger_domain::ids::TenantId;
use opledger_evm::keystore::KeystoreError;
use opledger_evm::signer::{KeyProvider, LocalKey};
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
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
    /// The PKCS#11 key could not be opened (no module, token, login or key; a key that can
    /// leave the token). Never holds the PIN.
    #[error("wallet {index}: {source}")]
    Token {
        /// Position in the configuration.
        index: usize,
        /// Why.
        source: opledger_hsm::HsmError,
    },
    /// The key in the token is not the configured address.
    #[error("wallet {index}: the key in the token is not the configured address")]
    AddressMismatch {
        /// Position in the configuration.
        index: usize,
    },
    /// Neither or both of `keystore` and `pkcs11` (refused by the configuration check first).
    #[error("wallet {index}: need exactly one of keystore and pkcs11")]
    Backend {
        /// Position in the configuration.
        index: usize,
    },
}

/// The hot wallets by tenant and network: one active wallet signs new withdrawals; retiring ones
/// (after a rotation) sign only replacements of their own in-flight nonces, which must come from
/// the original's sender, until [`Wallets::retire`] drops them (none of their nonces in flight).
#[derive(Debug, Default)]
pub struct Wallets {
    by_tenant_network: HashMap<(TenantId, String), Wallet>,
    retiring: RwLock<HashMap<(TenantId, String), Vec<Wallet>>>,
}

/// A tenant's slot: its tenant and network.
type Slot = (TenantId, String);

impl Wallets {
    /// Decrypts every configured keystore.
    pub fn load(config: &Config) -> Result<Wallets, WalletError> {
        let mut wallets = Wallets::default();
        for (index, wallet) in config.wallets.iter().enumerate() {
            let tenant: TenantId = wallet
                .tenant_id
                .parse()
                .map_err(|_| WalletError::Tenant { index })?;
            let key = key(index, wallet)?;
            let added = if wallet.retiring {
                wallets.insert_retiring(tenant, &wallet.network, key)
            } else {
                wallets.insert(tenant, &wallet.network, key, wallet.initial_nonce)
            };
            if !added {
                return Err(WalletError::Duplicate { index });
            }
        }
        Ok(wallets)
    }

    /// Adds the active wallet of a tenant on a network; false when the tenant already has one
    /// there, or this account is one of its retiring wallets.
    pub fn insert(
        &mut self,
        tenant: TenantId,
        network: &str,
        key: Arc<dyn KeyProvider>,
        initial_nonce: u64,
    ) -> bool {
        let address = format!("{:#x}", key.address());
        let slot = (tenant, network.to_owned());
        if self.by_tenant_network.contains_key(&slot) || self.holds_retiring(&slot, &address) {
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

    /// Adds a retiring wallet (rotated out: it signs only replacements of its own in-flight
    /// nonces); false when the account is already held for this tenant and network.
    pub fn insert_retiring(
        &mut self,
        tenant: TenantId,
        network: &str,
        key: Arc<dyn KeyProvider>,
    ) -> bool {
        let address = format!("{:#x}", key.address());
        let slot = (tenant, network.to_owned());
        let active = self
            .by_tenant_network
            .get(&slot)
            .is_some_and(|w| w.address == address);
        if active || self.holds_retiring(&slot, &address) {
            return false;
        }
        self.retiring
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(slot)
            .or_default()
            .push(Wallet {
                address,
                initial_nonce: 0,
                key,
            });
        true
    }

    /// Drops a retiring wallet for good (its key's memory is zeroized once no signing in progress
    /// holds it): no replacement of its nonces can be signed afterwards. False when it is not held
    /// as retiring.
    pub fn retire(&self, tenant: TenantId, network: &str, sender: &str) -> bool {
        let mut retiring = self
            .retiring
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let slot: Slot = (tenant, network.to_owned());
        let Some(wallets) = retiring.get_mut(&slot) else {
            return false;
        };
        let before = wallets.len();
        wallets.retain(|w| w.address != sender);
        let retired = wallets.len() < before;
        if wallets.is_empty() {
            retiring.remove(&slot);
        }
        retired
    }

    /// True while any retiring wallet is still held (none is added after start).
    pub fn any_retiring(&self) -> bool {
        !self.retiring().is_empty()
    }

    fn retiring(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Slot, Vec<Wallet>>> {
        self.retiring.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn holds_retiring(&self, slot: &Slot, address: &str) -> bool {
        self.retiring()
            .get(slot)
            .is_some_and(|ws| ws.iter().any(|w| w.address == address))
    }

    /// The tenant's active wallet on `network`: the one that signs new withdrawals.
    pub fn get(&self, tenant: TenantId, network: &str) -> Option<&Wallet> {
        self.by_tenant_network.get(&(tenant, network.to_owned()))
    }

    /// The tenant's wallet on `network` whose address is `sender` (0x-prefixed lowercase),
    /// active or retiring: the only key that may sign a replacement of that sender's attempt.
    pub fn by_sender(&self, tenant: TenantId, network: &str, sender: &str) -> Option<Wallet> {
        let slot = (tenant, network.to_owned());
        if let Some(active) = self
            .by_tenant_network
            .get(&slot)
            .filter(|w| w.address == sender)
        {
            return Some(active.clone());
        }
        self.retiring()
            .get(&slot)
            .and_then(|ws| ws.iter().find(|w| w.address == sender))
            .cloned()
    }

    /// The accounts of the tenant's wallets on `network` this signer holds keys for, active and
    /// retiring: what `opledger_domain::evidence::replacement_sender` chooses from.
    pub fn senders(&self, tenant: TenantId, network: &str) -> Vec<[u8; 20]> {
        let slot = (tenant, network.to_owned());
        let retiring = self.retiring();
        self.by_tenant_network
            .get(&slot)
            .into_iter()
            .chain(retiring.get(&slot).into_iter().flatten())
            .map(|w| w.key.address().into_array())
            .collect()
    }

    /// Every wallet with its role, for the registry the operations service reads.
    pub fn registrations(&self) -> Vec<opledger_store::wallets::Registration> {
        use opledger_store::wallets::{Registration, WalletStatus};
        let active = self
            .by_tenant_network
            .iter()
            .map(|((tenant, network), w)| Registration {
                tenant_id: *tenant,
                network: network.clone(),
                sender: w.address.clone(),
                status: WalletStatus::Active,
            });
        let retiring = self.retiring();
        let retiring = retiring.iter().flat_map(|((tenant, network), ws)| {
            ws.iter().map(|w| Registration {
                tenant_id: *tenant,
                network: network.clone(),
                sender: w.address.clone(),
                status: WalletStatus::Retiring,
            })
        });
        active.chain(retiring).collect()
    }

    /// How many wallets are loaded, retiring ones included.
    pub fn len(&self) -> usize {
        self.by_tenant_network.len() + self.retiring().values().map(Vec::len).sum::<usize>()
    }

    /// True when none is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The key of wallet `index`, by its backend: a keystore decrypted into this process's memory,
/// or a key that stays in its PKCS#11 token.
fn key(index: usize, wallet: &WalletConfig) -> Result<Arc<dyn KeyProvider>, WalletError> {
    match (&wallet.keystore, &wallet.pkcs11) {
        (Some(keystore), None) => {
            let passphrase = passphrase(wallet).ok_or(WalletError::Passphrase { index })?;
            let key = LocalKey::from_keystore_file(keystore, &passphrase)
                .map_err(|source| WalletError::Keystore { index, source })?;
            Ok(Arc::new(key))
        }
        (None, Some(token)) => {
            let location = opledger_hsm::KeyLocation {
                module: token.module.clone(),
                token_label: token.token_label.clone(),
                key_label: token.key_label.clone(),
                pin_file: token.pin_file.clone(),
                allow_software_token: token.allow_software_token,
            };
            let timeout = std::time::Duration::from_millis(token.sign_timeout_ms);
            let key = opledger_hsm::Pkcs11Key::open(&location, timeout)
                .map_err(|source| WalletError::Token { index, source })?;
            if !format!("{:#x}", key.address()).eq_ignore_ascii_case(&token.address) {
                return Err(WalletError::AddressMismatch { index });
            }
            Ok(Arc::new(key))
        }
        _ => Err(WalletError::Backend { index }),
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
