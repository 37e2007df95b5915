//! The keys every service has: where it listens, its database pool, its listener limits, where
//! its spans go.

use crate::{ConfigError, DatabaseUrl, ListenerConfig, TelemetryConfig};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// The section every service's configuration flattens in (`#[serde(flatten)] base`): the keys
/// stay top-level (`listen = ...`, `OPLEDGER_<SERVICE>_LISTEN`), and mean the same everywhere.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServiceBase {
    /// Address of the gRPC port (health and reflection on every service, and the service's API
    /// where it has one).
    pub listen: SocketAddr,
    /// Address of the Prometheus metrics endpoint (`GET /metrics`, HTTP/1.1).
    pub metrics_listen: SocketAddr,
    /// Timeouts and limits of every listener of the service (`[listener]`, the same keys on every
    /// service: see the listener section).
    #[serde(default)]
    pub listener: ListenerConfig,
    /// PostgreSQL URL of a login role in this service's own database role
    /// (`opledger_<service>`: each service logs in only with its own, which grants only what that
    /// service does).
    pub database_url: DatabaseUrl,
    /// Pooled database connections.
    pub db_max_connections: u32,
    /// Seconds a call waits for a pooled connection before failing UNAVAILABLE.
    pub db_acquire_timeout_secs: u64,
    /// Span export (`[telemetry]`, the same keys on every service: see the telemetry section).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
}

/// A service's whole configuration, which flattens a [`ServiceBase`]: what the runtime reads
/// before anything else (span export, then addresses and the database).
pub trait ServiceConfig {
    /// The service's base section.
    fn base(&self) -> &ServiceBase;
}

/// Implements [`ServiceConfig`] for a configuration whose base is its `base` field:
/// `opledger_config::service_config!(Config);`.
#[macro_export]
macro_rules! service_config {
    ($config:ty) => {
        impl $crate::ServiceConfig for $config {
            fn base(&self) -> &$crate::ServiceBase {
                &self.base
            }
        }
    };
}

impl ServiceBase {
    /// Loopback defaults: gRPC on `grpc_port`, metrics on `metrics_port`, a pool of
    /// `db_max_connections`, no database URL (required), default listener limits.
    pub fn loopback(grpc_port: u16, metrics_port: u16, db_max_connections: u32) -> ServiceBase {
        ServiceBase {
            listen: SocketAddr::from(([127, 0, 0, 1], grpc_port)),
            metrics_listen: SocketAddr::from(([127, 0, 0, 1], metrics_port)),
            listener: ListenerConfig::default(),
            database_url: DatabaseUrl::default(),
            db_max_connections,
            db_acquire_timeout_secs: 5,
            telemetry: TelemetryConfig::default(),
        }
    }

    /// Refuses a missing database URL, an empty pool, unusable listener limits and unusable span
    /// export settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        crate::check_database(&self.database_url, self.db_max_connections)?;
        self.listener.validate()?;
        self.telemetry.validate()
    }

    /// How long a call waits for a pooled connection.
    pub fn acquire_timeout(&self) -> Duration {
        Duration::from_secs(self.db_acquire_timeout_secs)
    }
}

/// Refuses an owner (the team an escalation is assigned to) that is not 1 to 63 lowercase
/// letters, digits, '-' or '_'.
pub fn check_owner(field: &'static str, owner: &str) -> Result<(), ConfigError> {
    let ok = !owner.is_empty()
        && owner.len() <= 63
        && owner
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            field,
            problem: "must be 1 to 63 lowercase letters, digits, '-' or '_'",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Service {
        #[serde(flatten)]
        base: ServiceBase,
        worker_id: String,
    }

    impl Default for Service {
        fn default() -> Service {
            Service {
                base: ServiceBase::loopback(1, 2, 3),
                worker_id: "w".to_owned(),
            }
        }
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment::Error
    fn the_base_keys_stay_top_level_and_unknown_keys_are_still_refused() {
        let loaded = figment::Jail::try_with(|jail| {
            jail.set_env("OPLBASE_LISTEN", "127.0.0.1:7");
            jail.set_env("OPLBASE_DB_MAX_CONNECTIONS", "9");
            jail.set_env("OPLBASE_LISTENER", "{max_connections = 5}");
            jail.set_env("OPLBASE_WORKER_ID", "a");
            let s: Service = crate::load("OPLBASE_", None).map_err(|e| e.to_string())?;
            assert_eq!(s.base.listen, SocketAddr::from(([127, 0, 0, 1], 7)));
            assert_eq!(s.base.metrics_listen, SocketAddr::from(([127, 0, 0, 1], 2)));
            assert_eq!(s.base.db_max_connections, 9);
            assert_eq!(s.base.listener.max_connections, 5);
            assert_eq!(s.worker_id, "a");
            assert_eq!(
                s.base.telemetry,
                TelemetryConfig::default(),
                "unset: OTEL_* decide"
            );
            jail.set_env("OPLBASE_TELEMETRY__OTLP_ENDPOINT", "http://collector:4317");
            jail.set_env("OPLBASE_TELEMETRY__SERVICE_NAME", "payments-signer");
            let s: Service = crate::load("OPLBASE_", None).map_err(|e| e.to_string())?;
            assert_eq!(
                s.base.telemetry.otlp_endpoint.as_deref(),
                Some("http://collector:4317")
            );
            assert_eq!(
                s.base.telemetry.service_name.as_deref(),
                Some("payments-signer")
            );
            jail.set_env("OPLBASE_TELEMETRY__ENDPOINT", "http://collector:4317");
            let typo = crate::load::<Service>("OPLBASE_", None).map(|_| ());
            assert!(
                typo.is_err_and(|e| e.to_string().contains("endpoint")),
                "a misspelt telemetry key is refused"
            );
            jail.clear_env();
            jail.set_env("OPLBASE_LISTN", "127.0.0.1:8");
            let typo = crate::load::<Service>("OPLBASE_", None).map(|_| ());
            assert!(
                typo.is_err_and(|e| e.to_string().contains("listn")),
                "a typo beside a flattened section is refused"
            );
            Ok(())
        });
        assert!(loaded.is_ok(), "{loaded:?}");
    }

    #[test]
    fn owners_are_short_lowercase_names() {
        assert!(check_owner("owner", "payments-ops_2").is_ok());
        for bad in ["", "Payments", "a b", &"x".repeat(64)] {
            assert!(check_owner("owner", bad).is_err(), "{bad:?}");
        }
    }
}
