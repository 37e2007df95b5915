//! The configuration base of every opledger service.
//!
//! Each service's configuration is one typed struct, read in layers by [`load`]: its defaults,
//! then the TOML file named by `OPLEDGER_<SERVICE>_CONFIG` (if set), then `OPLEDGER_<SERVICE>_*`
//! environment variables (a table as an inline TOML table, or one of its keys with `__`:
//! `OPLEDGER_INBOX_LISTENER__MAX_CONNECTIONS`), and every unknown key is refused.
//! The keys every service has (listen addresses, the database pool, listener limits, span export)
//! are one [`ServiceBase`] flattened into it (each service's configuration says so through
//! [`ServiceConfig`]), so the same key means the same thing everywhere. Secrets
//! ([`DatabaseUrl`], [`Secret`]) never show in `Debug` output, logs or errors.
//!
//! Every configuration type derives `schemars::JsonSchema`: the configuration reference
//! (`docs/configuration.md`) and the deployment checks read keys and meanings from the schema.

mod api_keys;
mod base;
mod listener;
mod load;
mod secret;
mod telemetry;
mod trust;
mod wei;

pub use api_keys::ApiKeyCache;
pub use base::{ServiceBase, ServiceConfig, check_owner};
pub use listener::{HARD_HEADER_LIST_BYTES, Limits, ListenerConfig};
pub use load::{ConfigError, check_database, load};
pub use secret::{DatabaseUrl, Secret};
pub use telemetry::TelemetryConfig;
pub use trust::TrustRootConfig;
pub use wei::{NotWei, Wei};

/// Re-exported so services derive `JsonSchema` without naming the crate in their manifests.
pub use schemars;
