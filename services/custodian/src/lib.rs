//! The custodian executor: withdrawals routed to a custodian are sent under our operation id,
//! once their approvals verify as the signer's do, and followed by lookup; never a second
//! reference, never a release without the witness. Its own login (`opledger_custodian`).

pub mod accounts;
pub mod chain;
pub mod config;
pub mod executor;
pub mod metrics;
pub mod operator;
mod setup;

pub use accounts::{Account, AccountError, Accounts};
pub use config::Config;
pub use executor::{Cadence, Executor};
pub use setup::{SERVICE_NAME, StartError, executor, operator_routes, run};
