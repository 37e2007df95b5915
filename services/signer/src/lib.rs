//! The signer: the security boundary between an approved withdrawal and signed bytes.
//!
//! It recomputes the payload hash from the stored fields and refuses (recording a security event)
//! unless it equals the stored and the approved hash; claims the operation with a conditional
//! update and a lease; allocates the nonce, signs and persists the attempt and moves the operation
//! to SIGNED in one transaction before it answers. Its only outbound connection is its database
//! (as `opledger_signer`, which can write nothing but signing columns and attempts); keys are
//! decrypted once into zeroizing memory and never leave the key provider.

mod batch;
pub mod config;
mod service;
pub mod signing;
pub mod trust;
pub mod wallets;

pub use config::Config;
pub use service::{Caller, SignerApi, callers, signer_status};
pub use signing::Signer;
pub use wallets::Wallets;

use opledger_grpc::server::{self, ServeError};
pub use opledger_proto::v1::signer_service_server::SERVICE_NAME;
use opledger_proto::v1::signer_service_server::SignerServiceServer;
use std::sync::Arc;
use tonic::service::Routes;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// The service's routes for a signer and its accepted callers.
pub fn routes(signer: Signer, callers: Vec<Caller>) -> Routes {
    Routes::new(SignerServiceServer::new(SignerApi::new(signer, callers)))
}

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

/// Loads the wallets, connects the store, binds the address and serves until Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let wallets = Arc::new(Wallets::load(&config)?);
    tracing::info!(wallets = wallets.len(), "signer keys loaded");
    let callers = callers(&config);
    for caller in &callers {
        let capabilities: Vec<&str> = caller.capabilities.iter().map(|c| c.as_str()).collect();
        tracing::info!(
            caller = %caller.name,
            ?capabilities,
            client_certificate_bound = caller.client_cert_sha256.is_some(),
            "signer caller configured"
        );
    }
    let tls = config.tls.as_ref().map(tls_config).transpose()?;
    let [listener, metrics] = server::bind_all([config.listen, config.metrics_listen]).await?;
    let store = server::connect(&config.database_url.0, config.store_config()).await?;
    let limits = config.listener.limits();
    let _metrics = server::spawn_metrics(metrics, limits);
    let sweep = std::time::Duration::from_millis(config.release_sweep_ms);
    let _sweep = tokio::spawn(release_sweep(store.clone(), sweep));
    let retire_every = std::time::Duration::from_secs(config.wallet_retire_check_secs);
    let signer = Signer::new(store.clone(), Arc::new(config), wallets);
    signer
        .register_wallets()
        .await
        .map_err(StartError::Register)?;
    let _retirement = tokio::spawn(wallet_retirement(signer.clone(), retire_every));
    let routes = routes(signer, callers);
    Ok(server::serve_ready(
        listener,
        SERVICE_NAME,
        routes,
        tls,
        limits,
        &store,
        server::shutdown_signal(),
    )
    .await?)
}

/// The signed-bytes gate's sweep: every `every`, releases the signed attempts at least `every`
/// old that are still held back (`Store::release_held`: a probe commit first, then the release).
/// Runs until dropped (the service spawns it for its lifetime).
pub async fn release_sweep(store: opledger_store::Store, every: std::time::Duration) {
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
