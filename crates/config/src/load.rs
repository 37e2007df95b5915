//! The layered loader: defaults, then an optional TOML file, then prefixed environment variables.

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

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

/// Loads `T::default()`, then `file` if given, then environment variables named `{prefix}KEY`: a
/// table's key is reached with `__` (`{prefix}LISTENER__MAX_CONNECTIONS=64`), or a whole table is
/// given inline (`{prefix}LISTENER="{max_connections = 64}"`), the keys it does not name keeping
/// their values.
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
        .merge(Env::prefixed(prefix).ignore(&["config"]).split("__"))
        .extract()
        .map_err(Box::new)?)
}

/// Refuses an empty database URL and an empty pool.
pub fn check_database(url: &crate::DatabaseUrl, max_connections: u32) -> Result<(), ConfigError> {
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ListenerConfig;
    use serde::Deserialize;

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
    fn a_double_underscore_reaches_one_key_of_a_table_and_a_typo_in_it_is_refused() {
        let loaded = figment::Jail::try_with(|jail| {
            jail.set_env("OPLNTEST_LISTENER__MAX_CONNECTIONS", "64");
            jail.set_env("OPLNTEST_LISTENER__IDLE_TIMEOUT_MS", "45000");
            let config: WithListener = load("OPLNTEST_", None).map_err(|e| e.to_string())?;
            let expected = ListenerConfig {
                max_connections: 64,
                idle_timeout_ms: 45_000,
                ..ListenerConfig::default()
            };
            assert_eq!(config.listener, expected);
            jail.set_env("OPLNTEST_LISTENER__MAX_CONECTIONS", "8");
            let refused = load::<WithListener>("OPLNTEST_", None).map(|_| ());
            assert!(refused.is_err(), "a misspelt nested key is refused");
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
