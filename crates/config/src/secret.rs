//! Settings whose values are secrets: their `Debug` never shows them.

use serde::{Deserialize, Serialize};

/// A database URL; its `Debug` never shows it (it may carry a password).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show_in_debug_output() {
        let url = DatabaseUrl("postgres://user:hunter2@db/x".to_owned());
        let token = Secret("hunter2".to_owned());
        assert_eq!(format!("{url:?}"), "DatabaseUrl(<redacted>)");
        assert_eq!(format!("{token:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Secret::default()), "Secret(<unset>)");
    }
}
