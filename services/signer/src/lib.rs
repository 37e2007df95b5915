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
pub mod metrics;
mod service;
mod setup;
pub mod signing;
pub mod wallets;

pub use config::Config;
pub use service::{Caller, SignerApi, callers, signer_status};
pub use setup::{StartError, release_sweep, tls_config, wallet_retirement};
pub use signing::Signer;
pub use wallets::Wallets;

pub use opledger_proto::v1::signer_service_server::SERVICE_NAME;
use opledger_proto::v1::signer_service_server::SignerServiceServer;
use opledger_server::Runtime;
use std::sync::Arc;
use tonic::service::Routes;

/// The service's routes for a signer and its accepted callers.
pub fn routes(signer: Signer, callers: Vec<Caller>) -> Routes {
    Routes::new(SignerServiceServer::new(SignerApi::new(signer, callers)))
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
    let mut runtime = Runtime::start(SERVICE_NAME, &config.base).await?;
    runtime.metrics(metrics::router());
    let store = runtime.store().signer();
    let sweep = std::time::Duration::from_millis(config.release_sweep_ms);
    runtime.background(release_sweep(store.clone(), sweep));
    let retire_every = std::time::Duration::from_secs(config.wallet_retire_check_secs);
    let signer = Signer::new(store, Arc::new(config), wallets);
    signer
        .register_wallets()
        .await
        .map_err(StartError::Register)?;
    runtime.background(wallet_retirement(signer.clone(), retire_every));
    Ok(runtime.serve(routes(signer, callers), tls).await?)
}
