use super::*;
use opledger_domain::Amount;

const OP: &str = "0190a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b";
const HASH: &str = "0x8f3cabcdef0123456789abcdef0123456789abcdef0123456789abcdef012345";

fn known(body: &str) -> Event {
    match parse(body.as_bytes()) {
        Ok(Parsed::Known(event)) => event,
        other => panic!("expected a known event for {body}, got {other:?}"),
    }
}

fn unhandled_of(body: &str) -> Unhandled {
    match parse(body.as_bytes()) {
        Ok(Parsed::Unhandled(unhandled)) => unhandled,
        other => panic!("expected unhandled for {body}, got {other:?}"),
    }
}

fn schema_detail(body: &str) -> String {
    let unhandled = unhandled_of(body);
    assert_eq!(unhandled.reason.code(), "schema", "{body}");
    match unhandled.reason {
        UnhandledReason::Schema { detail } => detail,
        UnhandledReason::UnknownType => unreachable!(),
    }
}

fn deposit_body(data: &str) -> String {
    format!(r#"{{"type":"deposit.confirmed","timestamp":"2025-01-31T12:00:00Z","data":{data}}}"#)
}

const DEPOSIT_DATA: &str =
    r#"{"deposit_id":"dep_01J","account":"treasury","asset":"USDC","amount":"2500000"}"#;

#[test]
fn deposit_confirmed_valid() {
    let event = known(&deposit_body(DEPOSIT_DATA));
    assert_eq!(event.event_type(), "deposit.confirmed");
    let Event::DepositConfirmed(deposit) = event else {
        panic!("wrong variant");
    };
    assert_eq!(deposit.deposit_id().as_str(), "dep_01J");
    assert_eq!(deposit.account().as_str(), "treasury");
    assert_eq!(deposit.asset().as_str(), "USDC");
    assert_eq!(deposit.amount(), Amount::new(2_500_000));
}

#[test]
fn transfer_status_valid() {
    for (status, expected) in [
        ("broadcast", TransferState::Broadcast),
        ("confirmed", TransferState::Confirmed),
    ] {
        let upper_hash = HASH.to_ascii_uppercase().replacen("0X", "0x", 1);
        let body = format!(
            r#"{{"type":"transfer.status","data":{{"operation_id":"{}","status":"{status}","tx_hash":"{upper_hash}"}}}}"#,
            OP.to_ascii_uppercase()
        );
        let event = known(&body);
        assert_eq!(event.event_type(), "transfer.status");
        let Event::TransferStatus(update) = event else {
            panic!("wrong variant");
        };
        assert_eq!(update.operation_id().to_string(), OP);
        assert_eq!(update.status(), expected);
        assert_eq!(update.status().as_str(), status);
        assert_eq!(update.tx_hash_hex(), HASH);
        assert_eq!(update.tx_hash()[0], 0x8f);
        assert_eq!(update.tx_hash()[31], 0x45);
    }
}

#[test]
fn kyt_result_valid() {
    for (result, expected) in [("pass", KytVerdict::Pass), ("fail", KytVerdict::Fail)] {
        let body = format!(
            r#"{{"type":"kyt.result","data":{{"provider_ref":"chk-7731","result":"{result}","operation_id":"{OP}"}},"extra":1}}"#
        );
        let event = known(&body);
        assert_eq!(event.event_type(), "kyt.result");
        let Event::KytResult(kyt) = event else {
            panic!("wrong variant");
        };
        assert_eq!(kyt.operation_id().to_string(), OP);
        assert_eq!(kyt.result(), expected);
        assert_eq!(kyt.result().as_str(), result);
        assert_eq!(kyt.provider_ref().as_str(), "chk-7731");
    }
}

#[test]
fn timestamp_is_optional_but_checked() {
    let without = format!(r#"{{"type":"deposit.confirmed","data":{DEPOSIT_DATA}}}"#);
    known(&without);
    for good in [
        "2025-01-31T12:00:00Z",
        "2025-01-31t12:00:00z",
        "2025-01-31T12:00:00.123456Z",
        "2025-01-31T12:00:60+05:30",
        "1999-12-31T23:59:59-00:00",
    ] {
        let body =
            format!(r#"{{"type":"deposit.confirmed","timestamp":"{good}","data":{DEPOSIT_DATA}}}"#);
        known(&body);
    }
    for bad in [
        r#""2025-01-31""#,
        r#""2025-01-31 12:00:00Z""#,
        r#""2025-13-31T12:00:00Z""#,
        r#""2025-01-00T12:00:00Z""#,
        r#""2025-01-31T24:00:00Z""#,
        r#""2025-01-31T12:00:00""#,
        r#""2025-01-31T12:00:00.Z""#,
        r#""2025-01-31T12:00:00+0530""#,
        r#""2025-01-31T12:00:00+24:00""#,
        r#""2025-01-31T12:00:00Zjunk""#,
        r#""１９９９-01-31T12:00:00Z""#,
        "1738324800",
        "null",
    ] {
        let body =
            format!(r#"{{"type":"deposit.confirmed","timestamp":{bad},"data":{DEPOSIT_DATA}}}"#);
        assert_eq!(
            schema_detail(&body),
            "timestamp: must be an RFC 3339 date-time string",
            "{bad}"
        );
    }
}

#[test]
fn deposit_schema_errors() {
    let cases = [
        (
            r#"{"account":"treasury","asset":"USDC","amount":"1"}"#,
            "data.deposit_id: missing",
        ),
        (
            r#"{"deposit_id":7,"account":"treasury","asset":"USDC","amount":"1"}"#,
            "data.deposit_id: must be a string",
        ),
        (
            r#"{"deposit_id":"","account":"treasury","asset":"USDC","amount":"1"}"#,
            "data.deposit_id: must be 1 to 128 visible ascii characters",
        ),
        (
            r#"{"deposit_id":"a b","account":"treasury","asset":"USDC","amount":"1"}"#,
            "data.deposit_id: must be 1 to 128 visible ascii characters",
        ),
        (
            r#"{"deposit_id":"d","account":"Treasury","asset":"USDC","amount":"1"}"#,
            "data.account: must match [a-z0-9][a-z0-9_-]{0,62}",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"usdc","amount":"1"}"#,
            "data.asset: must match [A-Z0-9]{1,16}",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"USDC","amount":1}"#,
            "data.amount: must be a string",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"USDC","amount":"1.5"}"#,
            "data.amount: must be a canonical decimal integer of minimal units",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"USDC","amount":"01"}"#,
            "data.amount: must be a canonical decimal integer of minimal units",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"USDC","amount":"0"}"#,
            "data.amount: must be greater than zero",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"USDC","amount":"1","memo":"x"}"#,
            "data: unknown field `memo`",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"USDC","amount":"1","a b":"x"}"#,
            "data: unknown field (name not shown)",
        ),
        (
            r#"{"deposit_id":"d","account":"treasury","asset":"USDC","amount":"1","amount":"9"}"#,
            "data.amount: repeated",
        ),
        ("[]", "data: must be an object"),
        ("null", "data: must be an object"),
        (r#""text""#, "data: must be an object"),
    ];
    for (data, expected) in cases {
        let body = deposit_body(data);
        let unhandled = unhandled_of(&body);
        assert_eq!(unhandled.event_type.as_deref(), Some("deposit.confirmed"));
        assert_eq!(
            unhandled.reason,
            UnhandledReason::Schema {
                detail: expected.to_owned()
            },
            "{data}"
        );
    }
    let missing_data = r#"{"type":"deposit.confirmed"}"#;
    assert_eq!(schema_detail(missing_data), "data: missing");
    let twice = format!(r#"{{"type":"deposit.confirmed","data":{DEPOSIT_DATA},"data":{{}}}}"#);
    assert_eq!(schema_detail(&twice), "data: repeated");
}

#[test]
fn transfer_status_schema_errors() {
    let body = |op: &str, status: &str, hash: &str| {
        format!(
            r#"{{"type":"transfer.status","data":{{"operation_id":{op},"status":{status},"tx_hash":{hash}}}}}"#
        )
    };
    let op = format!("\"{OP}\"");
    let hash = format!("\"{HASH}\"");
    let uuid_rule = "data.operation_id: must be a hyphenated uuid";
    let hash_rule = "data.tx_hash: must be 0x followed by 64 hex digits";
    let cases = [
        (body("\"nope\"", "\"broadcast\"", &hash), uuid_rule),
        (
            body(
                "\"0190a0b45c6d7e8f9a0b1c2d3e4f5a6b\"",
                "\"broadcast\"",
                &hash,
            ),
            uuid_rule,
        ),
        (
            body(
                "\"{0190a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b}\"",
                "\"broadcast\"",
                &hash,
            ),
            uuid_rule,
        ),
        (
            body("42", "\"broadcast\"", &hash),
            "data.operation_id: must be a string",
        ),
        (
            body(&op, "\"Broadcast\"", &hash),
            "data.status: must be \"broadcast\" or \"confirmed\"",
        ),
        (
            body(&op, "\"failed\"", &hash),
            "data.status: must be \"broadcast\" or \"confirmed\"",
        ),
        (
            body(&op, "\"confirmed\"", &format!("\"{}\"", &HASH[2..])),
            hash_rule,
        ),
        (
            body(&op, "\"confirmed\"", &format!("\"0X{}\"", &HASH[2..])),
            hash_rule,
        ),
        (
            body(&op, "\"confirmed\"", &format!("\"{}\"", &HASH[..65])),
            hash_rule,
        ),
        (
            body(&op, "\"confirmed\"", &format!("\"{HASH}0\"")),
            hash_rule,
        ),
        (
            body(&op, "\"confirmed\"", &format!("\"0x{}\"", "g".repeat(64))),
            hash_rule,
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(schema_detail(&body), expected, "{body}");
    }
    let missing = format!(
        r#"{{"type":"transfer.status","data":{{"operation_id":"{OP}","status":"confirmed"}}}}"#
    );
    assert_eq!(schema_detail(&missing), "data.tx_hash: missing");
    let extra = format!(
        r#"{{"type":"transfer.status","data":{{"operation_id":"{OP}","status":"confirmed","tx_hash":"{HASH}","fee":"1"}}}}"#
    );
    assert_eq!(schema_detail(&extra), "data: unknown field `fee`");
}

#[test]
fn kyt_result_schema_errors() {
    let body = |result: &str, reference: &str| {
        format!(
            r#"{{"type":"kyt.result","data":{{"operation_id":"{OP}","result":{result},"provider_ref":{reference}}}}}"#
        )
    };
    let long = format!("\"{}\"", "r".repeat(129));
    let max = format!("\"{}\"", "r".repeat(128));
    known(&body("\"pass\"", &max));
    let cases = [
        (
            body("\"PASS\"", "\"r\""),
            "data.result: must be \"pass\" or \"fail\"",
        ),
        (body("true", "\"r\""), "data.result: must be a string"),
        (
            body("\"pass\"", &long),
            "data.provider_ref: must be 1 to 128 visible ascii characters",
        ),
        (
            body("\"pass\"", "\"caf\u{e9}\""),
            "data.provider_ref: must be 1 to 128 visible ascii characters",
        ),
        (
            body("\"pass\"", "null"),
            "data.provider_ref: must be a string",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(schema_detail(&body), expected, "{body}");
    }
}

#[test]
fn schema_details_never_echo_values() {
    let secret_value = "SENSITIVE_VALUE_123";
    let bodies = [
        deposit_body(&format!(
            r#"{{"deposit_id":"d","account":"{secret_value}","asset":"USDC","amount":"1"}}"#
        )),
        deposit_body(&format!(
            r#"{{"deposit_id":"d","account":"a","asset":"USDC","amount":"{secret_value}"}}"#
        )),
        format!(
            r#"{{"type":"kyt.result","data":{{"operation_id":"{secret_value}","result":"pass","provider_ref":"r"}}}}"#
        ),
    ];
    for body in bodies {
        let detail = schema_detail(&body);
        assert!(!detail.contains(secret_value), "{detail}");
    }
}

#[test]
fn unknown_type() {
    let cases = [
        (
            r#"{"type":"deposit.reversed","data":{}}"#,
            Some("deposit.reversed"),
        ),
        (
            r#"{"type":"Deposit.Confirmed","data":{}}"#,
            Some("Deposit.Confirmed"),
        ),
        (r#"{"data":{}}"#, None),
        (r#"{}"#, None),
        (r#"{"type":5}"#, None),
        (r#"{"type":null}"#, None),
        (r#"{"type":["kyt.result"]}"#, None),
        (r#"{"type":"kyt.result","type":"deposit.confirmed"}"#, None),
    ];
    for (body, event_type) in cases {
        let unhandled = unhandled_of(body);
        assert_eq!(unhandled.reason, UnhandledReason::UnknownType, "{body}");
        assert_eq!(unhandled.reason.code(), "unknown_type");
        assert_eq!(unhandled.event_type.as_deref(), event_type, "{body}");
    }
}

#[test]
fn unknown_type_is_truncated_by_characters() {
    let long: String = "é".repeat(100);
    let body = format!(r#"{{"type":"{long}"}}"#);
    let unhandled = unhandled_of(&body);
    let kept = unhandled.event_type.expect("string type");
    assert_eq!(kept.chars().count(), MAX_EVENT_TYPE_CHARS);
    assert!(kept.chars().all(|c| c == 'é'));
}

#[test]
fn control_characters_of_an_unknown_type_are_kept_as_replacement_characters() {
    // A NUL cannot be stored in a text column: found by the hostile suite (a 503 forever).
    let unhandled = unhandled_of(r#"{"type":"deposit.confirmed\u0000\u001b[31m"}"#);
    assert_eq!(unhandled.reason, UnhandledReason::UnknownType);
    assert_eq!(
        unhandled.event_type.as_deref(),
        Some("deposit.confirmed\u{fffd}\u{fffd}[31m")
    );
}

#[test]
fn malformed_bodies() {
    let cases: [(&[u8], MalformedBody); 12] = [
        (b"", MalformedBody::NotJson),
        (b"not json", MalformedBody::NotJson),
        (b"{", MalformedBody::NotJson),
        (b"{\"type\":}", MalformedBody::NotJson),
        (b"{} {}", MalformedBody::NotJson),
        (b"{\"type\":\"kyt.result\"}x", MalformedBody::NotJson),
        (b"{\"a\":\"\xff\"}", MalformedBody::NotJson),
        (b"[]", MalformedBody::NotAnObject),
        (b"\"text\"", MalformedBody::NotAnObject),
        (b"42", MalformedBody::NotAnObject),
        (b"null", MalformedBody::NotAnObject),
        (
            b"  [1, {\"type\": \"kyt.result\"}]  ",
            MalformedBody::NotAnObject,
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(
            parse(body),
            Err(expected),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    assert_eq!(MalformedBody::NotJson.code(), "not_json");
    assert_eq!(MalformedBody::NotAnObject.code(), "not_an_object");
    assert_eq!(MalformedBody::TooDeep.code(), "too_deep");
}

#[test]
fn nesting_limit() {
    let nested = |depth: usize| {
        // depth counts the outer object too.
        let inner = depth - 1;
        format!(
            r#"{{"type":"x","deep":{}1{}}}"#,
            "[".repeat(inner),
            "]".repeat(inner)
        )
    };
    assert!(matches!(
        parse(nested(MAX_DEPTH).as_bytes()),
        Ok(Parsed::Unhandled(_))
    ));
    assert_eq!(
        parse(nested(MAX_DEPTH + 1).as_bytes()),
        Err(MalformedBody::TooDeep)
    );
    // Brackets inside strings, escaped quotes included, do not count.
    let in_string = format!(r#"{{"type":"x","s":"\"{}"}}"#, "[".repeat(1000));
    assert!(matches!(
        parse(in_string.as_bytes()),
        Ok(Parsed::Unhandled(_))
    ));
    // Far beyond serde_json's own limit: refused, not a stack overflow.
    let huge = "[".repeat(100_000);
    assert_eq!(parse(huge.as_bytes()), Err(MalformedBody::TooDeep));
}

#[test]
fn external_ref_rules() {
    assert!(ExternalRef::parse("a").is_ok());
    assert!(ExternalRef::parse(&"~".repeat(128)).is_ok());
    assert_eq!(ExternalRef::parse(""), Err(InvalidExternalRef));
    assert_eq!(
        ExternalRef::parse(&"a".repeat(129)),
        Err(InvalidExternalRef)
    );
    assert_eq!(ExternalRef::parse("a\u{7f}"), Err(InvalidExternalRef));
    assert_eq!(ExternalRef::parse(" a"), Err(InvalidExternalRef));
    assert_eq!(
        ExternalRef::parse("x").map(|r| r.to_string()),
        Ok("x".into())
    );
}
