//! Typed identifiers for tenants and operations.
//!
//! Both wrap a [`Uuid`] and render as lowercase hyphenated text, which is also
//! the form used in the canonical payload encoding.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

/// Error returned when an identifier cannot be parsed from text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text is not a valid UUID for the given identifier kind.
    #[error("invalid {kind} id")]
    Invalid {
        /// Which identifier kind was being parsed, e.g. `"tenant"`.
        kind: &'static str,
    },
}

macro_rules! uuid_id {
    ($(#[$meta:meta])* $name:ident, $kind:literal) => {
        $(#[$meta])*
        #[derive(Copy, Clone, Eq, PartialEq, Hash, Ord, PartialOrd, Debug)]
        pub struct $name(Uuid);

        impl $name {
            /// Wraps an existing UUID.
            pub fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// Returns the wrapped UUID.
            pub fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0.hyphenated(), f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s)
                    .map(Self)
                    .map_err(|_| IdError::Invalid { kind: $kind })
            }
        }
    };
}

uuid_id!(
    /// Identifier of a tenant of the platform (random UUIDv4 when minted here).
    TenantId,
    "tenant"
);

uuid_id!(
    /// Identifier of one withdrawal operation (time-ordered UUIDv7 when minted here).
    OperationId,
    "operation"
);

impl TenantId {
    /// Mints a fresh random (v4) tenant id.
    pub fn new() -> Self {
        Self(Uuid::new_v4())
    }
}

impl Default for TenantId {
    fn default() -> Self {
        Self::new()
    }
}

impl OperationId {
    /// Mints a fresh time-ordered (v7) operation id.
    pub fn new() -> Self {
        Self(Uuid::now_v7())
    }
}

impl Default for OperationId {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_id_is_v7_and_tenant_id_is_v4() {
        assert_eq!(OperationId::new().as_uuid().get_version_num(), 7);
        assert_eq!(TenantId::new().as_uuid().get_version_num(), 4);
    }

    #[test]
    fn display_is_lowercase_hyphenated_and_round_trips() {
        let text = "0190A1B2-C3D4-7E5F-8A9B-0C1D2E3F4A5B";
        let id: OperationId = text.parse().expect("valid uuid");
        assert_eq!(id.to_string(), text.to_ascii_lowercase());
        assert_eq!(id.to_string().parse::<OperationId>(), Ok(id));
        let tenant = TenantId::from_uuid(id.as_uuid());
        assert_eq!(tenant.to_string(), id.to_string());
    }

    #[test]
    fn invalid_text_names_the_kind() {
        assert_eq!(
            "nope".parse::<TenantId>(),
            Err(IdError::Invalid { kind: "tenant" })
        );
        assert_eq!(
            "".parse::<OperationId>(),
            Err(IdError::Invalid { kind: "operation" })
        );
        assert_eq!(
            IdError::Invalid { kind: "tenant" }.to_string(),
            "invalid tenant id"
        );
    }

    #[test]
    fn operation_ids_are_time_ordered() {
        let a = OperationId::new();
        let b = OperationId::new();
        assert!(a < b);
    }
}
