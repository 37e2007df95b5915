//! Amounts of wei in a configuration: written as decimal strings (`"2000000000"`, beyond what a
//! TOML integer holds), parsed once when the configuration is read.

use serde::{Deserialize, Serialize};

/// An amount of wei. In TOML and `OPLEDGER_*` variables: a decimal string of digits.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct Wei(pub u128);

/// A fee that is not a decimal amount of wei.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be a decimal amount of wei (digits only, at most 2^128 - 1)")]
pub struct NotWei;

impl TryFrom<String> for Wei {
    type Error = NotWei;

    fn try_from(text: String) -> Result<Wei, NotWei> {
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(NotWei);
        }
        text.parse().map(Wei).map_err(|_| NotWei)
    }
}

impl From<Wei> for String {
    fn from(wei: Wei) -> String {
        wei.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::{NotWei, Wei};

    #[test]
    fn only_decimal_digits_within_u128_are_wei() {
        assert_eq!(
            Wei::try_from("2000000000".to_owned()),
            Ok(Wei(2_000_000_000))
        );
        assert_eq!(Wei::try_from(u128::MAX.to_string()), Ok(Wei(u128::MAX)));
        for bad in [
            "",
            "-1",
            "+1",
            "1e9",
            "0x10",
            " 1",
            "1.5",
            "340282366920938463463374607431768211456",
        ] {
            assert_eq!(Wei::try_from(bad.to_owned()), Err(NotWei), "{bad:?}");
        }
        assert_eq!(String::from(Wei(42)), "42");
    }
}
