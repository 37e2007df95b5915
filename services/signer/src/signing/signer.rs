//! The [`Signer`] itself (store, configuration, keys, lanes, trust roots), its [`Signed`] answer,
//! and the registration and retirement of its wallets.

use super::error::SignerError;
use crate::batch::Lanes;
use crate::config::Config;
use crate::wallets::Wallets;
use opledger_store::roles::SignerStore;
use opledger_store::signing::Attempt;
use opledger_store::wallets::{RetireAfter, WalletStatus};
use opledger_trust::TrustRoots;
use std::sync::Arc;
use std::time::Duration;

/// The signer's state: store, configuration and keys.
#[derive(Debug, Clone)]
pub struct Signer {
    pub(super) store: SignerStore,
    pub(super) config: Arc<Config>,
    pub(super) wallets: Arc<Wallets>,
    pub(super) lanes: Lanes,
    pub(super) trust: TrustRoots,
}

/// A signed attempt and whether an earlier call had already persisted it.
#[derive(Debug, Clone)]
pub struct Signed {
    /// The latest persisted attempt.
    pub attempt: Attempt,
    /// True when nothing new was signed by this call.
    pub already_signed: bool,
}

impl Signer {
    /// A signer over this store, configuration and wallets.
    pub fn new(store: SignerStore, config: Arc<Config>, wallets: Arc<Wallets>) -> Signer {
        Signer {
            lanes: Lanes::new(store.clone()),
            trust: TrustRoots::new(&config.trust_roots),
            store,
            config,
            wallets,
        }
    }

    /// Registers this signer's wallets (active and retiring) where the operations service reads
    /// them, and logs, for each retiring wallet, how many of its operations are still in flight
    /// (it retires once that is zero: [`Signer::retire_finished_wallets`]).
    pub async fn register_wallets(&self) -> Result<(), SignerError> {
        let registrations = self.wallets.registrations();
        self.store.register_wallets(&registrations).await?;
        for wallet in registrations
            .iter()
            .filter(|w| w.status == WalletStatus::Retiring)
        {
            let in_flight = self
                .store
                .in_flight_of_sender(
                    wallet.tenant_id,
                    &wallet.network,
                    &wallet.sender,
                    self.retire_grace(),
                )
                .await?;
            tracing::info!(
                tenant_id = %wallet.tenant_id,
                network = %wallet.network,
                in_flight,
                "retiring wallet: signs only replacements of its own nonces until none is in flight"
            );
        }
        Ok(())
    }

    /// True while this signer holds a retiring wallet.
    pub fn holds_retiring_wallets(&self) -> bool {
        self.wallets.any_retiring()
    }

    /// Retires every retiring wallet none of whose operations is in flight any more (each
    /// original it signed ended without a payout, or CONFIRMED longer than
    /// `wallet_retire_grace_secs` ago) and that signed nothing for `wallet_retire_min_age_secs`:
    /// its row becomes RETIRED in the same statement that checks this, then its key is dropped,
    /// so no replacement of its nonces can be signed afterwards.
    /// Returns how many it retired; a wallet the database could not check is left for the next
    /// call (late is the safe direction).
    pub async fn retire_finished_wallets(&self) -> usize {
        let mut retired = 0;
        for wallet in self
            .wallets
            .registrations()
            .into_iter()
            .filter(|w| w.status == WalletStatus::Retiring)
        {
            let finished = self
                .store
                .retire_wallet(
                    wallet.tenant_id,
                    &wallet.network,
                    &wallet.sender,
                    RetireAfter {
                        grace: self.retire_grace(),
                        quiet: Duration::from_secs(self.config.wallet_retire_min_age_secs),
                    },
                )
                .await;
            match finished {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(
                        tenant_id = %wallet.tenant_id,
                        network = %wallet.network,
                        error = %e.log_safe(),
                        "cannot check a retiring wallet"
                    );
                    continue;
                }
            }
            if self
                .wallets
                .retire(wallet.tenant_id, &wallet.network, &wallet.sender)
            {
                retired += 1;
                tracing::warn!(
                    tenant_id = %wallet.tenant_id,
                    network = %wallet.network,
                    "wallet retired: none of its operations is in flight; its key is dropped, remove it from the configuration"
                );
            }
        }
        retired
    }

    fn retire_grace(&self) -> Duration {
        Duration::from_secs(self.config.wallet_retire_grace_secs)
    }
}
