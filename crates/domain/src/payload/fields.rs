//! Validated text fields of a withdrawal payload.
//!
//! Every newtype keeps its value private and can only be built through
//! `parse`, so a value of the type is always valid. [`Destination`] and [`Memo`]
//! are sensitive: their `Debug` is redacted, they have no `Display`, and no
//! error ever carries their value.

use std::fmt;

/// Why a payload field was refused. Never carries the refused value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// A field is malformed or out of range; `field` is its wire name.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// Wire name of the field, e.g. `"destination"`.
        field: &'static str,
        /// Why it was refused, lowercase, without the value.
        reason: &'static str,
    },
}

impl PayloadError {
    /// Wire name of the refused field.
    pub fn field(&self) -> &'static str {
        match self {
            PayloadError::Invalid { field, .. } => field,
        }
    }
}

fn invalid(field: &'static str, reason: &'static str) -> PayloadError {
    PayloadError::Invalid { field, reason }
}

/// Checks `text` against `[first][rest]{0,max_len-1}` on ASCII bytes.
fn check_token(
    field: &'static str,
    text: &str,
    max_len: usize,
    first: fn(u8) -> bool,
    rest: fn(u8) -> bool,
    first_reason: &'static str,
) -> Result<(), PayloadError> {
    let bytes = text.as_bytes();
    let Some(&head) = bytes.first() else {
        return Err(invalid(field, "is empty"));
    };
    if bytes.len() > max_len {
        return Err(invalid(field, "is too long"));
    }
    if !first(head) {
        return Err(invalid(field, first_reason));
    }
    if !bytes[1..].iter().copied().all(rest) {
        return Err(invalid(field, "contains a character that is not allowed"));
    }
    Ok(())
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

macro_rules! text_field {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Eq, PartialEq, Hash)]
        pub struct $name(String);

        impl $name {
            /// The validated value.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
    };
}

macro_rules! public_text {
    ($name:ident) => {
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.0).finish()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

macro_rules! redacted_text {
    ($name:ident) => {
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "(<redacted>)"))
            }
        }
    };
}

text_field!(
    /// Source account inside a tenant: `[a-z0-9][a-z0-9_-]{0,62}`.
    AccountName
);
public_text!(AccountName);

impl AccountName {
    /// Validates an account name.
    pub fn parse(text: &str) -> Result<Self, PayloadError> {
        check_token(
            "source_account",
            text,
            63,
            lower_alnum,
            |b| lower_alnum(b) || b == b'_' || b == b'-',
            "must start with a lowercase letter or digit",
        )?;
        Ok(Self(text.to_owned()))
    }
}

text_field!(
    /// Asset ticker: `[A-Z0-9]{1,16}`, e.g. `ETH`, `USDC`.
    AssetCode
);
public_text!(AssetCode);

impl AssetCode {
    /// Validates an asset code.
    pub fn parse(text: &str) -> Result<Self, PayloadError> {
        let upper_alnum = |b: u8| b.is_ascii_uppercase() || b.is_ascii_digit();
        check_token(
            "asset",
            text,
            16,
            upper_alnum,
            upper_alnum,
            "contains a character that is not allowed",
        )?;
        Ok(Self(text.to_owned()))
    }
}

text_field!(
    /// Network name: `[a-z0-9][a-z0-9-]{0,62}`, e.g. `anvil`, `ethereum-mainnet`.
    NetworkId
);
public_text!(NetworkId);

impl NetworkId {
    /// Validates a network id.
    pub fn parse(text: &str) -> Result<Self, PayloadError> {
        check_token(
            "network",
            text,
            63,
            lower_alnum,
            |b| lower_alnum(b) || b == b'-',
            "must start with a lowercase letter or digit",
        )?;
        Ok(Self(text.to_owned()))
    }
}

text_field!(
    /// EVM destination address, stored as lowercase `0x` + 40 hex digits.
    /// Sensitive: redacted `Debug`, no `Display`.
    Destination
);
redacted_text!(Destination);

impl Destination {
    /// Validates `0x` followed by 40 hex digits of either case and stores the
    /// lowercase form. The prefix itself must be lowercase `0x`.
    /// No EIP-55 checksum check is done here.
    pub fn parse(text: &str) -> Result<Self, PayloadError> {
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return Err(invalid("destination", "is empty"));
        }
        let well_formed = bytes.len() == 42
            && bytes.starts_with(b"0x")
            && bytes[2..].iter().all(u8::is_ascii_hexdigit);
        if !well_formed {
            return Err(invalid(
                "destination",
                "must be 0x followed by 40 hex digits",
            ));
        }
        Ok(Self(text.to_ascii_lowercase()))
    }
}

text_field!(
    /// Free-text memo: 1 to 128 bytes of UTF-8 without control characters.
    /// Sensitive: redacted `Debug`, no `Display`.
    Memo
);
redacted_text!(Memo);

impl Memo {
    /// Maximum memo length in bytes.
    pub const MAX_LEN: usize = 128;

    /// Validates a memo. The text is kept exactly as given (no normalisation).
    pub fn parse(text: &str) -> Result<Self, PayloadError> {
        if text.is_empty() {
            return Err(invalid("memo", "is empty"));
        }
        if text.len() > Self::MAX_LEN {
            return Err(invalid("memo", "is longer than 128 bytes"));
        }
        if text.chars().any(char::is_control) {
            return Err(invalid("memo", "contains a control character"));
        }
        Ok(Self(text.to_owned()))
    }
}

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
