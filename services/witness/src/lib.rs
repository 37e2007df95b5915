//! The witness: the second, independent principal of every release that could pay twice.
//!
//! Releasing the hold of a withdrawal that has a signed attempt needs the reconciler's proposal
//! and the witness's attestation of the same chain evidence (migration 28; the rule is
//! `opledger_domain::witness`). The witness runs as its own binary, deployable on another host,
//! with its own database login (`opledger_witness`: read what a release rests on, record
//! attestations and refusals, nothing else) and its own `[evidence]` endpoints. It never moves an
//! operation, a hold or a balance; it has no API beyond health, and no signer token. A custodian
//! withdrawal's proposed release it attests from its own lookup of the provider's record, with its
//! own read-only account at the provider (`[[custodian_accounts]]`, [`custodian`]).

pub mod attest;
pub mod config;
pub mod credits;
pub mod custodian;
pub mod metrics;
pub mod outcome;
mod setup;

pub use attest::Witness;
pub use config::Config;
pub use credits::CreditWitness;
pub use custodian::CustodianWitness;
pub use outcome::{CustodianOutcome, Outcome};
pub use setup::{StartError, credit_witness, custodian_witness, witness};

use opledger_server::Runtime;
use std::sync::Arc;
use std::time::Duration;
use tonic::service::Routes;

/// The name the witness's health service reports (it serves no API).
pub const SERVICE_NAME: &str = "opledger.witness";

/// Connects the store, runs a pass every `poll_interval_ms` and serves health and metrics until
/// Ctrl-C or SIGTERM.
pub async fn run(config: Config) -> Result<(), StartError> {
    let mut runtime = Runtime::start(SERVICE_NAME, &config.base).await?;
    let store = runtime.store().witness();
    let counters = Arc::new(metrics::Counters::default());
    runtime.metrics(metrics::router(store.clone(), counters.clone()));
    let passes = Arc::new(setup::Passes::new(&config, store, counters)?);
    let batch = config.batch_size;
    runtime.every(Duration::from_millis(config.poll_interval_ms), move || {
        let passes = passes.clone();
        async move { passes.tick(batch).await }
    });
    Ok(runtime.serve(Routes::default(), None).await?)
}
