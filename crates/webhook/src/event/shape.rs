//! Checks of shape alone: how deeply a raw body nests, and whether a `timestamp` looks like an
//! RFC 3339 date-time.

/// True when objects and arrays nest deeper than `max` (brackets inside
/// strings do not count). Invalid JSON may give any answer: it is refused
/// either way.
pub(crate) fn nested_deeper_than(body: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Checks the shape `YYYY-MM-DD(T|t)HH:MM:SS[.fraction](Z|z|±HH:MM)` with
/// field ranges (month 1-12, day 1-31, hour 0-23, minute 0-59, second 0-60).
/// Does not check the number of days in the month.
pub(super) fn is_rfc3339_date_time(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() < 20 || b.len() > 64 {
        return false;
    }
    let number = |from: usize, len: usize| -> Option<u32> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0u32, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
        })
    };
    let at = |index: usize, allowed: &[u8]| b.get(index).is_some_and(|c| allowed.contains(c));
    let in_range =
        |value: Option<u32>, min: u32, max: u32| value.is_some_and(|v| (min..=max).contains(&v));
    let date_time = number(0, 4).is_some()
        && at(4, b"-")
        && in_range(number(5, 2), 1, 12)
        && at(7, b"-")
        && in_range(number(8, 2), 1, 31)
        && at(10, b"Tt")
        && in_range(number(11, 2), 0, 23)
        && at(13, b":")
        && in_range(number(14, 2), 0, 59)
        && at(16, b":")
        && in_range(number(17, 2), 0, 60);
    if !date_time {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = &fraction[digits..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            let two = |a: u8, b: u8| {
                (a.is_ascii_digit() && b.is_ascii_digit())
                    .then(|| u32::from(a - b'0') * 10 + u32::from(b - b'0'))
            };
            in_range(two(*h1, *h2), 0, 23) && in_range(two(*m1, *m2), 0, 59)
        }
        _ => false,
    }
}
