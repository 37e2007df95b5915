//! Amounts: whole units of an asset (decimal strings) and base units (wei), exactly both ways.

/// Formats `wei` as whole units with `decimals` digits of fraction: no exponent, no `+`, the
/// fraction's trailing zeros removed (`1000` wei at 18 decimals is `"0.000000000000001"`).
pub fn to_whole(wei: u128, decimals: u32) -> String {
    let digits = wei.to_string();
    let decimals = decimals as usize;
    if decimals == 0 {
        return digits;
    }
    let padded = if digits.len() <= decimals {
        format!("{}{digits}", "0".repeat(decimals + 1 - digits.len()))
    } else {
        digits
    };
    let (int, frac) = padded.split_at(padded.len() - decimals);
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        int.to_owned()
    } else {
        format!("{int}.{frac}")
    }
}

/// Parses a whole-units decimal string (`"1"`, `"0.5"`, `"12.000"`) into base units. `None` for
/// anything else: a sign, an exponent, more fraction digits than `decimals`, an overflow, an
/// empty part.
pub fn from_whole(text: &str, decimals: u32) -> Option<u128> {
    let (int, frac) = match text.split_once('.') {
        Some((int, frac)) => (int, frac),
        None => (text, ""),
    };
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits_only(int) || !digits_only(frac) {
        return None;
    }
    if text.contains('.') && frac.is_empty() {
        return None;
    }
    if frac.len() > decimals as usize {
        return None;
    }
    let scale = 10_u128.checked_pow(decimals)?;
    let int_part = int.parse::<u128>().ok()?.checked_mul(scale)?;
    let frac_part = if frac.is_empty() {
        0
    } else {
        let pad = 10_u128.checked_pow(decimals - u32::try_from(frac.len()).ok()?)?;
        frac.parse::<u128>().ok()?.checked_mul(pad)?
    };
    int_part.checked_add(frac_part)
}

/// Parses a base-units decimal string (BitGo's `amount`): digits only.
pub fn from_base(text: &str) -> Option<u128> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Whether `text` is a `0x` address of 40 hex digits (any case).
pub fn is_address(text: &str) -> bool {
    text.len() == 42
        && (text.starts_with("0x") || text.starts_with("0X"))
        && text[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `text` is `0x` and 64 hex digits (a transaction hash).
pub fn is_hash(text: &str) -> bool {
    text.len() == 66
        && (text.starts_with("0x") || text.starts_with("0X"))
        && text[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_units_round_trip() {
        assert_eq!(to_whole(1000, 18), "0.000000000000001");
        assert_eq!(to_whole(10_u128.pow(18), 18), "1");
        assert_eq!(to_whole(15 * 10_u128.pow(17), 18), "1.5");
        assert_eq!(to_whole(0, 18), "0");
        assert_eq!(from_whole("0.000000000000001", 18), Some(1000));
        assert_eq!(from_whole("1.50", 18), Some(15 * 10_u128.pow(17)));
        assert_eq!(from_whole("2", 0), Some(2));
        for bad in [
            "",
            ".5",
            "1.",
            "-1",
            "+1",
            "1e3",
            "0.0000000000000000001",
            "1.2.3",
            " 1",
        ] {
            assert_eq!(from_whole(bad, 18), None, "{bad}");
        }
        assert_eq!(from_base("1000"), Some(1000));
        assert_eq!(from_base("-1"), None);
        assert!(is_address("0x00000000000000000000000000000000000000aB"));
        assert!(!is_address("0x00"));
        assert!(is_hash(&format!("0x{}", "aB".repeat(32))));
        assert!(!is_hash(&format!("0x{}", "a".repeat(40))));
        assert!(!is_hash(&format!("0x{}", "g".repeat(64))));
    }
}
