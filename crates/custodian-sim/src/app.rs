//! The double as a whole: configuration, state, hot wallet, webhooks and keys, shared by every
//! handler and background task.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context;

use crate::chain::Chain;
use crate::clock::Clock;
use crate::config::{Config, Timing, secs_ms};
use crate::keys::{KeyRing, PublicKey};
use crate::profile::Profile;
use crate::state::Shared;
use crate::views::Views;
use crate::webhooks::{Signer, Target, WebhookHub};

/// Everything the handlers and tasks share.
#[derive(Debug)]
pub struct App {
    /// The configuration.
    pub config: Config,
    /// The state.
    pub shared: Shared,
    /// The hot wallet.
    pub chain: Chain,
    /// Webhook deliveries.
    pub hub: Arc<WebhookHub>,
    /// Fireblocks' webhook keys.
    pub keys: Option<Arc<KeyRing>>,
    /// Fireblocks' API key's public key.
    pub api_key: Option<PublicKey>,
    hot_wallet: String,
}

impl App {
    /// Builds the double of `config` (generates RSA keys the configuration does not give).
    pub fn new(config: Config) -> anyhow::Result<Arc<App>> {
        let clock = Arc::new(Clock::new());
        let chain = Chain::new(&config.chain)?;
        let mut targets = HashMap::new();
        let mut keys = None;
        let mut api_key = None;
        if let Some(fb) = &config.fireblocks {
            let ring = Arc::new(KeyRing::new(
                &fb.webhook_signing_keys_pem,
                fb.webhook_forger_key_pem.clone(),
                secs_ms(fb.webhook_key_overlap_secs),
            )?);
            api_key = Some(
                PublicKey::from_pem(&fb.api_public_key_pem)
                    .context("fireblocks.api_public_key_pem")?,
            );
            let url = fb.webhook_url.clone();
            let signer = Signer::Fireblocks(ring.clone());
            targets.insert(Profile::Fireblocks, Target { url, signer });
            keys = Some(ring);
        }
        if let Some(bitgo) = &config.bitgo {
            let url = bitgo.webhook_url.clone();
            let signer = Signer::Bitgo(bitgo.webhook_secret.clone());
            targets.insert(Profile::Bitgo, Target { url, signer });
        }
        if let Some(prime) = &config.prime {
            let url = prime.webhook_url.clone();
            let signer = Signer::Prime(prime.signing_secret.clone());
            targets.insert(Profile::Prime, Target { url, signer });
        }
        let hub = Arc::new(WebhookHub::new(clock.clone(), targets)?);
        let hot_wallet = chain.address();
        let shared = Shared::new(clock, config.faults.clone());
        Ok(Arc::new(App {
            config,
            shared,
            chain,
            hub,
            keys,
            api_key,
            hot_wallet,
        }))
    }

    /// The double's time (ms).
    pub fn now_ms(&self) -> i64 {
        self.shared.clock.now_ms()
    }

    /// The renderer of provider records.
    pub fn views(&self) -> Views<'_> {
        Views {
            config: &self.config,
            hot_wallet: &self.hot_wallet,
        }
    }

    /// The hot wallet's address.
    pub fn hot_wallet(&self) -> &str {
        &self.hot_wallet
    }

    /// A profile's lags, delays and webhook URL.
    pub fn timing(&self, profile: Profile) -> Timing {
        let timing = match profile {
            Profile::Fireblocks => self.config.fireblocks.as_ref().map(|c| c.timing()),
            Profile::Bitgo => self.config.bitgo.as_ref().map(|c| c.timing()),
            Profile::Prime => self.config.prime.as_ref().map(|c| c.timing()),
        };
        timing.unwrap_or_default()
    }
}
