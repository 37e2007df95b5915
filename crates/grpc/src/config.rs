//! Layered, typed service configuration: defaults, then an optional TOML file, then prefixed
//! environment variables; each service validates its own values.

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A database URL; its `Debug` never shows it (it may carry a password).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DatabaseUrl(pub String);

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "DatabaseUrl(<unset>)"
        } else {
            "DatabaseUrl(<redacted>)"
        })
    }
}

/// A secret setting (a token); its `Debug` never shows it.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl AsRef<str> for Secret {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "Secret(<unset>)"
        } else {
            "Secret(<redacted>)"
        })
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A source could not be read or a value has the wrong type.
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    /// A value is out of range.
    #[error("configuration: {field} {problem}")]
    Invalid {
        /// Which setting.
        field: &'static str,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// Loads `T::default()`, then `file` if given, then environment variables named `{prefix}KEY`.
pub fn load<T>(prefix: &str, file: Option<&Path>) -> Result<T, ConfigError>
where
    T: Default + Serialize + DeserializeOwned,
{
    let mut figment = Figment::from(Serialized::defaults(T::default()));
    if let Some(file) = file {
        figment = figment.merge(Toml::file_exact(file));
    }
    // `{prefix}CONFIG` names the file itself; it is not a setting.
    Ok(figment
        .merge(Env::prefixed(prefix).ignore(&["config"]))
        .extract()
        .map_err(Box::new)?)
}

/// Refuses an empty database URL and an empty pool.
pub fn check_database(url: &DatabaseUrl, max_connections: u32) -> Result<(), ConfigError> {
    if url.0.is_empty() {
        return Err(ConfigError::Invalid {
            field: "database_url",
            problem: "is required",
        });
    }
    if max_connections == 0 {
        return Err(ConfigError::Invalid {
            field: "db_max_connections",
            problem: "must be at least 1",
        });
    }
    Ok(())
}

/// Timeouts and limits of every listener of a service (`[listener]`; the same keys on every
/// service). See [`crate::listener`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenerConfig {
    /// Milliseconds a connection may deliver nothing before it is closed (an idle keep-alive
    /// connection, a missing HTTP/2 preface, a request stalled in its headers or body).
    pub idle_timeout_ms: u64,
    /// Milliseconds an HTTP/1.1 request head may take to arrive (webhook and metrics listeners).
    pub header_read_timeout_ms: u64,
    /// Milliseconds a gRPC call may run before it is cancelled, and a webhook body may take to
    /// arrive whole.
    pub request_timeout_ms: u64,
    /// Connections open at once per listener; one more is accepted and closed at once.
    pub max_connections: usize,
    /// Largest request header list, bytes counted as HTTP/2 does (name + value + 32 per entry):
    /// gRPC answers RESOURCE_EXHAUSTED (`METADATA_TOO_LARGE`) above it, HTTP/1.1 answers 431.
    pub max_header_list_bytes: u32,
    /// Milliseconds between the server's HTTP/2 keep-alive pings.
    pub http2_keepalive_interval_ms: u64,
    /// Milliseconds a keep-alive ping may stay unanswered before the connection is closed.
    pub http2_keepalive_timeout_ms: u64,
}

impl Default for ListenerConfig {
    fn default() -> ListenerConfig {
        ListenerConfig {
            idle_timeout_ms: 60_000,
            header_read_timeout_ms: 10_000,
            request_timeout_ms: 30_000,
            max_connections: 1024,
            max_header_list_bytes: 16 * 1024,
            http2_keepalive_interval_ms: 20_000,
            http2_keepalive_timeout_ms: 10_000,
        }
    }
}

impl ListenerConfig {
    /// Refuses limits that would close healthy connections or accept none.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field, problem| Err(ConfigError::Invalid { field, problem });
        if self.idle_timeout_ms == 0
            || self.header_read_timeout_ms == 0
            || self.request_timeout_ms == 0
            || self.http2_keepalive_interval_ms == 0
            || self.http2_keepalive_timeout_ms == 0
        {
            return invalid("listener", "timeouts must be at least 1 ms");
        }
        if self.max_connections == 0 {
            return invalid("listener.max_connections", "must be at least 1");
        }
        if self.max_header_list_bytes < 1024
            || self.max_header_list_bytes >= crate::edge::HARD_HEADER_LIST_BYTES
        {
            return invalid(
                "listener.max_header_list_bytes",
                "must be at least 1024 and below 65536 (HTTP/2's own limit)",
            );
        }
        // A healthy client is read from at least once per keep-alive interval (its ping answer),
        // and an HTTP/1.1 client sends nothing while its request runs.
        if self.http2_keepalive_interval_ms >= self.idle_timeout_ms
            || self.request_timeout_ms >= self.idle_timeout_ms
        {
            return invalid(
                "listener.idle_timeout_ms",
                "must exceed http2_keepalive_interval_ms and request_timeout_ms",
            );
        }
        Ok(())
    }

    /// The limits these settings give.
    pub fn limits(&self) -> crate::listener::Limits {
        use std::time::Duration;
        crate::listener::Limits {
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            max_connections: self.max_connections,
            max_header_list_bytes: self.max_header_list_bytes,
            http2_keepalive_interval: Duration::from_millis(self.http2_keepalive_interval_ms),
            http2_keepalive_timeout: Duration::from_millis(self.http2_keepalive_timeout_ms),
        }
    }
}

/// The limits of the default `[listener]` settings.
impl Default for crate::listener::Limits {
    fn default() -> crate::listener::Limits {
        ListenerConfig::default().limits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        port: u16,
    }

    #[derive(Debug, Default, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct WithListener {
        #[serde(default)]
        listener: ListenerConfig,
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment::Error
    fn a_listener_table_in_the_environment_keeps_the_defaults_of_the_keys_it_does_not_name() {
        let loaded = figment::Jail::try_with(|jail| {
            jail.set_env(
                "OPLLTEST_LISTENER",
                "{idle_timeout_ms = 40000, max_connections = 7}",
            );
            let config: WithListener = load("OPLLTEST_", None).map_err(|e| e.to_string())?;
            let expected = ListenerConfig {
                idle_timeout_ms: 40_000,
                max_connections: 7,
                ..ListenerConfig::default()
            };
            assert_eq!(config.listener, expected);
            assert!(config.listener.validate().is_ok());
            jail.set_env("OPLLTEST_LISTENER", "{idle_timeout_ms = 100}");
            let config: WithListener = load("OPLLTEST_", None).map_err(|e| e.to_string())?;
            assert!(
                config.listener.validate().is_err(),
                "an idle timeout below the keep-alive interval would close healthy clients"
            );
            Ok(())
        });
        assert!(loaded.is_ok(), "{loaded:?}");
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure returns figment::Error
    fn the_variable_naming_the_file_is_not_a_setting_but_unknown_keys_are_refused() {
        // Runs in its own process under nextest; the variables are unique to this test.
        let file =
            std::env::temp_dir().join(format!("opledger-config-{}.toml", std::process::id()));
        std::fs::write(&file, "port = 7\n").expect("write");
        let loaded = figment::Jail::try_with(|jail| {
            jail.set_env("OPLTEST_CONFIG", file.display().to_string());
            jail.set_env("OPLTEST_PORT", "9");
            let sample: Sample = load("OPLTEST_", Some(&file)).map_err(|e| e.to_string())?;
            // Jail chdirs into a temporary folder; the file path is absolute.
            assert_eq!(sample.port, 9, "the environment overrides the file");
            jail.set_env("OPLTEST_PROT", "1");
            assert!(
                load::<Sample>("OPLTEST_", Some(&file)).is_err(),
                "a typo is refused"
            );
            Ok(())
        });
        assert!(loaded.is_ok(), "{loaded:?}");
        let _ = std::fs::remove_file(&file);
    }
}
