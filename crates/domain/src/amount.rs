//! Money amounts in minimal units of an asset (wei, satoshi, cents...).
//!
//! Amounts are unsigned 128-bit integers, never floats. Their only text form is
//! the strict canonical decimal: ASCII digits, no sign, no whitespace, no
//! decimal point and no leading zero except for `"0"` itself. Parsing accepts
//! exactly the strings that [`Display`](fmt::Display) produces.

use std::fmt;
use std::str::FromStr;

/// Error returned when text is not a canonical decimal amount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// The text is empty.
    #[error("amount is empty")]
    Empty,
    /// The text contains something other than ASCII digits.
    #[error("amount contains a character other than an ascii digit")]
    InvalidCharacter,
    /// The text has a leading zero and is not exactly `"0"`.
    #[error("amount has a leading zero")]
    LeadingZero,
    /// The value does not fit in 128 unsigned bits.
    #[error("amount exceeds the maximum of 128 unsigned bits")]
    Overflow,
}

/// A non-negative amount in the minimal unit of an asset.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Amount(u128);

impl Amount {
    /// The zero amount.
    pub const ZERO: Amount = Amount(0);

    /// Wraps a number of minimal units.
    pub const fn new(units: u128) -> Self {
        Self(units)
    }

    /// Returns the number of minimal units.
    pub const fn get(self) -> u128 {
        self.0
    }

    /// True when the amount is zero.
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Adds two amounts, `None` on overflow.
    pub const fn checked_add(self, other: Amount) -> Option<Amount> {
        match self.0.checked_add(other.0) {
            Some(v) => Some(Amount(v)),
            None => None,
        }
    }

    /// Subtracts `other`, `None` if the result would be negative.
    pub const fn checked_sub(self, other: Amount) -> Option<Amount> {
        match self.0.checked_sub(other.0) {
            Some(v) => Some(Amount(v)),
            None => None,
        }
    }

    /// Parses the strict canonical decimal form.
    pub fn parse(text: &str) -> Result<Amount, AmountError> {
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return Err(AmountError::Empty);
        }
        if !bytes.iter().all(u8::is_ascii_digit) {
            return Err(AmountError::InvalidCharacter);
        }
        if bytes.len() > 1 && bytes[0] == b'0' {
            return Err(AmountError::LeadingZero);
        }
        let mut value: u128 = 0;
        for &b in bytes {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u128::from(b - b'0')))
                .ok_or(AmountError::Overflow)?;
        }
        Ok(Amount(value))
    }
}

impl From<u128> for Amount {
    fn from(units: u128) -> Self {
        Self(units)
    }
}

impl FromStr for Amount {
    type Err = AmountError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Amount::parse(s)
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_canonical_forms() {
        assert_eq!(Amount::parse("0"), Ok(Amount::ZERO));
        assert_eq!(Amount::parse("1"), Ok(Amount::new(1)));
        assert_eq!(
            Amount::parse("1000000000000000000"),
            Ok(Amount::new(10u128.pow(18)))
        );
        let max = u128::MAX.to_string();
        assert_eq!(Amount::parse(&max), Ok(Amount::new(u128::MAX)));
    }

    #[test]
    fn refuses_non_canonical_forms() {
        assert_eq!(Amount::parse(""), Err(AmountError::Empty));
        for bad in ["-1", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "1_000", "١"] {
            assert_eq!(
                Amount::parse(bad),
                Err(AmountError::InvalidCharacter),
                "{bad}"
            );
        }
        for bad in ["00", "01", "0000000001"] {
            assert_eq!(Amount::parse(bad), Err(AmountError::LeadingZero), "{bad}");
        }
        // u128::MAX + 1
        assert_eq!(
            Amount::parse("340282366920938463463374607431768211456"),
            Err(AmountError::Overflow)
        );
        assert_eq!(Amount::parse(&"9".repeat(60)), Err(AmountError::Overflow));
    }

    #[test]
    fn checked_arithmetic() {
        let one = Amount::new(1);
        assert_eq!(one.checked_add(one), Some(Amount::new(2)));
        assert_eq!(Amount::new(u128::MAX).checked_add(one), None);
        assert_eq!(one.checked_sub(one), Some(Amount::ZERO));
        assert_eq!(Amount::ZERO.checked_sub(one), None);
        assert!(Amount::ZERO.is_zero());
        assert!(!one.is_zero());
        assert_eq!(Amount::from(7u128).get(), 7);
    }

    proptest! {
        #[test]
        fn parse_of_display_is_identity(x in any::<u128>()) {
            let a = Amount::new(x);
            prop_assert_eq!(Amount::parse(&a.to_string()), Ok(a));
        }

        #[test]
        fn display_of_accepted_parse_is_identity(s in "[0-9]{1,40}") {
            if let Ok(a) = Amount::parse(&s) {
                prop_assert_eq!(a.to_string(), s);
            }
        }

        #[test]
        fn leading_zero_refused(s in "0[0-9]{1,40}") {
            prop_assert_eq!(Amount::parse(&s), Err(AmountError::LeadingZero));
        }

        #[test]
        fn non_digit_refused(prefix in "[0-9]{0,10}", bad in "[^0-9]", suffix in "[0-9]{0,10}") {
            let s = format!("{prefix}{bad}{suffix}");
            prop_assert_eq!(Amount::parse(&s), Err(AmountError::InvalidCharacter));
        }

        #[test]
        fn above_max_refused(extra in 1u128..=u128::MAX, digits in "[1-9][0-9]{0,5}") {
            // u128::MAX followed by more digits, or u128::MAX + extra written out
            // via a wider representation, must all overflow.
            let longer = format!("{}{digits}", u128::MAX);
            prop_assert_eq!(Amount::parse(&longer), Err(AmountError::Overflow));
            let max_plus = add_decimal(&u128::MAX.to_string(), &extra.to_string());
            prop_assert_eq!(Amount::parse(&max_plus), Err(AmountError::Overflow));
        }

        #[test]
        fn never_panics(s in any::<String>()) {
            let _ = Amount::parse(&s);
        }
    }

    /// Schoolbook addition of two canonical decimal strings.
    fn add_decimal(a: &str, b: &str) -> String {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        let mut out = Vec::new();
        let mut carry = 0u8;
        for i in 0..a.len().max(b.len()) {
            let da = if i < a.len() {
                a[a.len() - 1 - i] - b'0'
            } else {
                0
            };
            let db = if i < b.len() {
                b[b.len() - 1 - i] - b'0'
            } else {
                0
            };
            let s = da + db + carry;
            out.push(b'0' + s % 10);
            carry = s / 10;
        }
        if carry > 0 {
            out.push(b'0' + carry);
        }
        out.reverse();
        String::from_utf8(out).expect("ascii digits")
    }
}
