//! What the signer runs beside its API: the signed-bytes gate's sweep, wallet retirement, and its TLS identity.

use crate::signing::Signer;
use crate::{config, signing, wallets};
use opledger_server::ServeError;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// Why the signer could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A wallet could not be loaded.
    #[error(transparent)]
    Wallet(#[from] wallets::WalletError),
    /// A TLS file could not be read.
    #[error("cannot read the tls {what} file: {source}")]
    Tls {
        /// Which file.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The wallets could not be registered in the database.
    #[error("cannot register the wallets: {0}")]
    Register(signing::SignerError),
    /// The server could not start or failed.
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// The signed-bytes gate's sweep: every `every`, releases the signed attempts at least `every`
/// old that are still held back (`SignerStore::release_held`: a probe commit first, then the release).
/// Runs until dropped (the service spawns it for its lifetime).
pub async fn release_sweep(store: opledger_store::roles::SignerStore, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match store.release_held(every, 256).await {
            Ok(0) => {}
            Ok(released) => {
                tracing::warn!(
                    released,
                    "held-back signed attempts released after a probe commit"
                );
            }
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot sweep held-back signed attempts")
            }
        }
    }
}

/// Wallet retirement: every `every`, retires the retiring wallets none of whose operations is in
/// flight any more ([`Signer::retire_finished_wallets`]). Ends when none is left to retire (the
/// set only shrinks until the next start). Runs until dropped otherwise.
pub async fn wallet_retirement(signer: Signer, every: std::time::Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while signer.holds_retiring_wallets() {
        tick.tick().await;
        signer.retire_finished_wallets().await;
    }
}

/// The server TLS settings: identity, and the client CA when mutual TLS is configured.
pub fn tls_config(tls: &config::TlsConfig) -> Result<ServerTlsConfig, StartError> {
    let read = |what, path: &std::path::Path| {
        std::fs::read(path).map_err(|source| StartError::Tls { what, source })
    };
    let identity = Identity::from_pem(read("cert", &tls.cert)?, read("key", &tls.key)?);
    let mut out = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &tls.client_ca {
        out = out.client_ca_root(Certificate::from_pem(read("client_ca", ca)?));
    }
    Ok(out)
}
