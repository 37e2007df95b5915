//! Base units (wei) to whole units of an asset and back, exact: `"0.000000000000001"` is 1,000 wei
//! of an 18-decimal asset. No exponent, no sign, the fraction's trailing zeros removed.

/// The most decimals an asset may have: 10^38 is the largest power of ten a `u128` holds.
pub const MAX_DECIMALS: u8 = 38;

/// The longest amount text read back (a hostile answer is not parsed at any length).
const MAX_TEXT: usize = 128;

/// Why an amount has no exact form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// More decimals than [`MAX_DECIMALS`].
    #[error("decimals: at most 38")]
    Decimals,
    /// Not digits with at most one point between digits.
    #[error("amount: not a decimal number")]
    Malformed,
    /// More than `u128::MAX` base units.
    #[error("amount: too large")]
    Overflow,
    /// A fraction finer than one base unit.
    #[error("amount: finer than one base unit")]
    Inexact,
}

/// `amount` base units as a decimal string of whole units (`decimals` digits of fraction at
/// most, trailing zeros removed, no point when the fraction is zero).
pub fn to_whole_units(amount: u128, decimals: u8) -> Result<String, AmountError> {
    if decimals > MAX_DECIMALS {
        return Err(AmountError::Decimals);
    }
    let digits = amount.to_string();
    let places = usize::from(decimals);
    if places == 0 {
        return Ok(digits);
    }
    let padded = format!("{digits:0>width$}", width = places + 1);
    let (whole, fraction) = padded.split_at(padded.len() - places);
    let fraction = fraction.trim_end_matches('0');
    Ok(if fraction.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{fraction}")
    })
}

/// A decimal string of whole units back to base units, exactly. Leading zeros and trailing zeros
/// of the fraction are accepted (the value is unambiguous); a sign, an exponent, a point without
/// digits on both sides, or a fraction finer than one base unit are not.
pub fn from_whole_units(text: &str, decimals: u8) -> Result<u128, AmountError> {
    if decimals > MAX_DECIMALS {
        return Err(AmountError::Decimals);
    }
    if text.is_empty() || text.len() > MAX_TEXT {
        return Err(AmountError::Malformed);
    }
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (text, ""),
    };
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !all_digits(whole)
        || !all_digits(fraction)
        || (text.contains('.') && fraction.is_empty())
    {
        return Err(AmountError::Malformed);
    }
    let places = usize::from(decimals);
    let significant = fraction.trim_end_matches('0');
    if significant.len() > places {
        return Err(AmountError::Inexact);
    }
    let digits = format!("{whole}{significant:0<places$}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(0);
    }
    digits.parse::<u128>().map_err(|_| AmountError::Overflow)
}

/// A decimal string of base units (BitGo's `valueString`): digits only, an optional leading `-`
/// kept apart. `None` when it is not one.
pub fn parse_base_units(text: &str) -> Option<(bool, u128)> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    if digits.is_empty() || digits.len() > MAX_TEXT || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    if trimmed.is_empty() {
        return Some((false, 0));
    }
    trimmed.parse().ok().map(|value| (negative, value))
}

#[cfg(test)]
mod tests;
