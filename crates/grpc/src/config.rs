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
    Ok(figment
        .merge(Env::prefixed(prefix))
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
