use super::*;

const ETH: u8 = 18;

#[test]
fn base_units_become_whole_units_exactly_at_the_edges() {
    let cases: [(u128, u8, &str); 12] = [
        (1, ETH, "0.000000000000000001"),
        (1_000, ETH, "0.000000000000001"),
        (10_u128.pow(18), ETH, "1"),
        (10_u128.pow(18) + 1, ETH, "1.000000000000000001"),
        (1_500_000_000_000_000_000, ETH, "1.5"),
        (120_000_000_000_000_000_000, ETH, "120"),
        (100_000_000_000_000_000, ETH, "0.1"),
        (u128::MAX, ETH, "340282366920938463463.374607431768211455"),
        (u128::MAX, 0, "340282366920938463463374607431768211455"),
        (u128::MAX, 38, "3.40282366920938463463374607431768211455"),
        (1, 38, "0.00000000000000000000000000000000000001"),
        (1_234_500, 6, "1.2345"),
    ];
    for (wei, decimals, text) in cases {
        assert_eq!(to_whole_units(wei, decimals).as_deref(), Ok(text), "{wei}");
        assert_eq!(from_whole_units(text, decimals), Ok(wei), "{text}");
    }
    assert_eq!(to_whole_units(0, ETH).as_deref(), Ok("0"));
    assert_eq!(to_whole_units(1, 39), Err(AmountError::Decimals));
}

#[test]
fn whole_units_round_trip_for_many_amounts() {
    let mut value: u128 = 1;
    while let Some(next) = value.checked_mul(7) {
        for decimals in [0, 6, 8, 18, 38] {
            let text = to_whole_units(value, decimals).expect("text");
            assert!(!text.ends_with('0') || !text.contains('.'), "{text}");
            assert_eq!(from_whole_units(&text, decimals), Ok(value), "{text}");
        }
        value = next + 3;
    }
}

#[test]
fn answers_with_trailing_or_leading_zeros_read_back_and_inexact_or_malformed_ones_do_not() {
    assert_eq!(from_whole_units("1.500", ETH), Ok(15 * 10_u128.pow(17)));
    assert_eq!(from_whole_units("01.5", ETH), Ok(15 * 10_u128.pow(17)));
    assert_eq!(from_whole_units("0", ETH), Ok(0));
    assert_eq!(from_whole_units("0.0", ETH), Ok(0));
    assert_eq!(
        from_whole_units("0.0000000000000000010", ETH),
        Ok(1),
        "a trailing zero past the decimals is still exact"
    );
    assert_eq!(
        from_whole_units("0.0000000000000000001", ETH),
        Err(AmountError::Inexact)
    );
    assert_eq!(
        from_whole_units("340282366920938463463.374607431768211456", ETH),
        Err(AmountError::Overflow)
    );
    assert_eq!(
        from_whole_units("1000000000000000000000000", ETH),
        Err(AmountError::Overflow)
    );
    for bad in [
        "", ".5", "1.", "-1", "+1", "1e18", "1,5", " 1", "1 ", "0x10", "1.2.3", "１",
    ] {
        assert_eq!(
            from_whole_units(bad, ETH),
            Err(AmountError::Malformed),
            "{bad:?}"
        );
    }
    assert_eq!(
        from_whole_units(&"1".repeat(200), ETH),
        Err(AmountError::Malformed)
    );
    assert_eq!(from_whole_units("1", 39), Err(AmountError::Decimals));
}

#[test]
fn base_unit_strings_read_with_their_sign() {
    assert_eq!(parse_base_units("1000"), Some((false, 1000)));
    assert_eq!(parse_base_units("-1000"), Some((true, 1000)));
    assert_eq!(parse_base_units("-0"), Some((false, 0)));
    assert_eq!(
        parse_base_units(&u128::MAX.to_string()),
        Some((false, u128::MAX))
    );
    for bad in [
        "",
        "-",
        "+1",
        "1.0",
        "1e3",
        "340282366920938463463374607431768211456",
    ] {
        assert_eq!(parse_base_units(bad), None, "{bad:?}");
    }
}
