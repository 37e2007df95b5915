//! Hostile field values: texts (huge, empty, control characters, look-alike digits, injection
//! strings) and numbers written as text (signs, exponents, u128::MAX + 1, 400 digits), plus a few
//! seeded random strings over an alphabet of troublemakers.

use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

/// u128::MAX, the largest amount.
pub const U128_MAX: &str = "340282366920938463463374607431768211455";
/// u128::MAX + 1, one beyond.
pub const U128_MAX_PLUS_ONE: &str = "340282366920938463463374607431768211456";

/// Hostile texts for any string field, each with a short label.
pub fn texts(rng: &mut StdRng) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = [
        ("empty", String::new()),
        ("space", " ".to_owned()),
        ("huge_300k", "a".repeat(300_000)),
        ("long_10k", "k".repeat(10_000)),
        ("64_chars", "a".repeat(64)),
        ("nul", "\0".to_owned()),
        ("inner_nul", "tre\0asury".to_owned()),
        ("crlf_header_injection", "a\r\nx-injected: 1".to_owned()),
        ("del", "\u{7f}".to_owned()),
        ("c1_control", "\u{85}\u{9b}".to_owned()),
        ("bidi_override", "\u{202e}gnp.exe".to_owned()),
        ("zero_width", "\u{200b}treasury".to_owned()),
        ("bom", "\u{feff}treasury".to_owned()),
        ("fullwidth", "ＥＴＨ".to_owned()),
        ("combining", "e\u{301}\u{301}\u{301}".to_owned()),
        ("emoji", "\u{1f4b8}".to_owned()),
        ("max_scalar", "\u{10ffff}".to_owned()),
        ("noncharacter", "\u{fffe}\u{ffff}".to_owned()),
        ("sql", "'; DROP TABLE withdrawal_ops; --".to_owned()),
        ("path", "../../../../etc/passwd".to_owned()),
        ("format", "%s%n%x{}{0}$1".to_owned()),
        ("jndi", "${jndi:ldap://127.0.0.1:1/a}".to_owned()),
        ("html", "<script>alert(1)</script>".to_owned()),
        ("json", "{\"amount\":\"1\"}".to_owned()),
        ("uppercase", "TREASURY".to_owned()),
        ("trailing_space", "treasury ".to_owned()),
        (
            "uuid_nil",
            "00000000-0000-0000-0000-000000000000".to_owned(),
        ),
        (
            "uuid_with_nul",
            "0190f5a8-0000-7000-8000-00000000000\0".to_owned(),
        ),
        (
            "tenant_like",
            format!("tenant_{:032x}", rng.random::<u128>()),
        ),
    ]
    .into_iter()
    .map(|(label, value)| (label.to_owned(), value))
    .collect();
    out.extend(numbers());
    const ALPHABET: [char; 16] = [
        '\0',
        '\u{1}',
        '\t',
        '\n',
        '\r',
        '\u{1b}',
        '"',
        '\\',
        '\'',
        '%',
        '\u{202e}',
        '\u{fffd}',
        '\u{1f4b8}',
        '0',
        '9',
        'a',
    ];
    for i in 0..4 {
        let len = rng.random_range(1..200);
        let text: String = (0..len)
            .map(|_| ALPHABET.choose(rng).copied().unwrap_or('x'))
            .collect();
        out.push((format!("random_{i}"), text));
    }
    out
}

/// Numbers written as text: what a decimal amount field might be fed.
pub fn numbers() -> Vec<(String, String)> {
    [
        ("minus_one", "-1".to_owned()),
        ("minus_zero", "-0".to_owned()),
        ("zero", "0".to_owned()),
        ("double_zero", "00".to_owned()),
        ("leading_zero", "01".to_owned()),
        ("plus_one", "+1".to_owned()),
        ("exponent", "1e18".to_owned()),
        ("exponent_400", "1e400".to_owned()),
        ("fraction", "1.0".to_owned()),
        ("thousands", "1,000".to_owned()),
        ("underscore", "1_000".to_owned()),
        ("hex", "0x10".to_owned()),
        ("padded", " 1".to_owned()),
        ("nan", "NaN".to_owned()),
        ("infinity", "Infinity".to_owned()),
        ("u64_max_plus_one", "18446744073709551616".to_owned()),
        ("u128_max", U128_MAX.to_owned()),
        ("u128_max_plus_one", U128_MAX_PLUS_ONE.to_owned()),
        ("digits_400", "9".repeat(400)),
        ("fullwidth_digit", "１".to_owned()),
        ("arabic_digits", "٣٤٥".to_owned()),
        ("math_digits", "\u{1d7d9}\u{1d7da}".to_owned()),
        ("digit_then_nul", "1\0".to_owned()),
    ]
    .into_iter()
    .map(|(label, value)| (label.to_owned(), value))
    .collect()
}

/// Hostile `int32` values (page sizes, enums).
pub const I32S: [i32; 6] = [i32::MIN, -1, 0, 1, 9999, i32::MAX];

/// Hostile `int64` values (inbox ids).
pub const I64S: [i64; 5] = [i64::MIN, -1, 0, 1, i64::MAX];

/// Hostile `uint32` values (policy versions).
pub const U32S: [u32; 4] = [0, 2, 9999, u32::MAX];
