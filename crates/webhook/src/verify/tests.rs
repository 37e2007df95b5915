use super::*;

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
const TIMESTAMP: &str = "1649367553";
const NOW: i64 = 1_649_367_553;
const BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
const SIGNATURE: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

fn vector_key() -> VerificationKey {
    VerificationKey::Hmac(SigningSecret::parse(SECRET).expect("secret"))
}

fn other_key() -> VerificationKey {
    VerificationKey::Hmac(SigningSecret::from_bytes(&[42u8; 32]).expect("secret"))
}

fn check(keys: &[VerificationKey], signature: &str) -> Result<Verified, VerifyError> {
    verify(
        keys,
        &Headers::from_strs(ID, TIMESTAMP, signature),
        BODY,
        NOW,
        DEFAULT_TOLERANCE_SECS,
    )
}

#[test]
fn published_test_vector() {
    let secret = SigningSecret::parse(SECRET).expect("secret");
    assert_eq!(sign_v1(&secret, ID, NOW, BODY), SIGNATURE);

    let verified = check(&[vector_key()], SIGNATURE).expect("valid");
    assert_eq!(verified.event_id(), ID);
    assert_eq!(verified.timestamp(), NOW);
    assert_eq!(verified.key_index(), 0);
    assert_eq!(verified.scheme(), Scheme::V1);
}

#[test]
fn rotation_second_key_matches() {
    let verified = check(&[other_key(), vector_key()], SIGNATURE).expect("valid");
    assert_eq!(verified.key_index(), 1);
}

#[test]
fn rotation_one_of_several_entries_matches() {
    let other = SigningSecret::from_bytes(&[42u8; 32]).expect("secret");
    let other_sig = sign_v1(&other, ID, NOW, BODY);
    let header = format!("v1,AAAA {other_sig}  v2,whatever {SIGNATURE} nocomma v1a,!!!");
    let verified = check(&[vector_key()], &header).expect("valid");
    assert_eq!(verified.key_index(), 0);
    // Either key alone is enough.
    let verified = check(&[other_key()], &header).expect("valid");
    assert_eq!(verified.key_index(), 0);
}

#[test]
fn unknown_versions_are_ignored_but_not_enough() {
    assert_eq!(
        check(
            &[vector_key()],
            "v2,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        ),
        Err(VerifyError::NoValidSignature)
    );
    assert_eq!(
        check(&[vector_key()], &format!("v9,xyz {SIGNATURE}")).map(|v| v.key_index()),
        Ok(0)
    );
}

#[test]
fn wrong_secret_fails() {
    assert_eq!(
        check(&[other_key()], SIGNATURE),
        Err(VerifyError::NoValidSignature)
    );
}

#[test]
fn hmac_entry_does_not_match_ed25519_key() {
    let signing = Ed25519SigningKey::generate();
    assert_eq!(
        check(&[VerificationKey::Ed25519(signing.public_key())], SIGNATURE),
        Err(VerifyError::NoValidSignature)
    );
}

#[test]
fn changed_body_fails() {
    let mut body = BODY.to_vec();
    body[10] ^= 1;
    assert_eq!(
        verify(
            &[vector_key()],
            &Headers::from_strs(ID, TIMESTAMP, SIGNATURE),
            &body,
            NOW,
            DEFAULT_TOLERANCE_SECS
        ),
        Err(VerifyError::NoValidSignature)
    );
    let mut longer = BODY.to_vec();
    longer.push(b' ');
    assert_eq!(
        verify(
            &[vector_key()],
            &Headers::from_strs(ID, TIMESTAMP, SIGNATURE),
            &longer,
            NOW,
            DEFAULT_TOLERANCE_SECS
        ),
        Err(VerifyError::NoValidSignature)
    );
}

#[test]
fn changed_id_or_timestamp_fails() {
    let keys = [vector_key()];
    let headers = Headers::from_strs("msg_other", TIMESTAMP, SIGNATURE);
    assert_eq!(
        verify(&keys, &headers, BODY, NOW, DEFAULT_TOLERANCE_SECS),
        Err(VerifyError::NoValidSignature)
    );
    // Same value, different text: the header is signed as received.
    let headers = Headers::from_strs(ID, "01649367553", SIGNATURE);
    assert_eq!(
        verify(&keys, &headers, BODY, NOW, DEFAULT_TOLERANCE_SECS),
        Err(VerifyError::NoValidSignature)
    );
}

#[test]
fn timestamp_window() {
    let keys = [vector_key()];
    let headers = Headers::from_strs(ID, TIMESTAMP, SIGNATURE);
    let at = |now: i64| verify(&keys, &headers, BODY, now, DEFAULT_TOLERANCE_SECS);
    assert!(at(NOW + 300).is_ok());
    assert!(at(NOW - 300).is_ok());
    assert_eq!(at(NOW + 301), Err(VerifyError::TimestampTooOld));
    assert_eq!(at(NOW - 301), Err(VerifyError::TimestampTooNew));
    assert_eq!(at(i64::MAX), Err(VerifyError::TimestampTooOld));
    assert_eq!(at(i64::MIN), Err(VerifyError::TimestampTooNew));

    // The tolerance is a parameter; a negative one means "exact second".
    assert!(verify(&keys, &headers, BODY, NOW + 1000, 1000).is_ok());
    assert_eq!(
        verify(&keys, &headers, BODY, NOW + 1, -5),
        Err(VerifyError::TimestampTooOld)
    );
    assert!(verify(&keys, &headers, BODY, NOW, -5).is_ok());
    assert!(verify(&keys, &headers, BODY, NOW, i64::MAX).is_ok());
}

#[test]
fn stale_and_future_signed_requests() {
    let secret = SigningSecret::generate();
    let keys = [VerificationKey::Hmac(secret.clone())];
    let now = 1_700_000_000;
    for (offset, expected) in [
        (-301, Err("timestamp_too_old")),
        (301, Err("timestamp_too_new")),
        (-300, Ok(())),
        (300, Ok(())),
    ] {
        let ts = now + offset;
        let sig = sign_v1(&secret, "evt_1", ts, b"{}");
        let ts_text = ts.to_string();
        let result = verify(
            &keys,
            &Headers::from_strs("evt_1", &ts_text, &sig),
            b"{}",
            now,
            DEFAULT_TOLERANCE_SECS,
        );
        assert_eq!(
            result.map(|_| ()).map_err(|e| e.code()),
            expected,
            "{offset}"
        );
    }
}

#[test]
fn missing_headers() {
    let keys = [vector_key()];
    let full = Headers::from_strs(ID, TIMESTAMP, SIGNATURE);
    for (headers, header) in [
        (Headers { id: None, ..full }, HeaderName::Id),
        (
            Headers {
                timestamp: None,
                ..full
            },
            HeaderName::Timestamp,
        ),
        (
            Headers {
                signature: None,
                ..full
            },
            HeaderName::Signature,
        ),
    ] {
        let err = verify(&keys, &headers, BODY, NOW, DEFAULT_TOLERANCE_SECS).expect_err("missing");
        assert_eq!(err, VerifyError::MissingHeader { header });
        assert_eq!(err.code(), "missing_header");
        assert_eq!(err.header(), Some(header));
        assert_eq!(
            err.to_string(),
            format!("missing {} header", header.as_str())
        );
    }
    let err = verify(&keys, &Headers::default(), BODY, NOW, 300).expect_err("missing");
    assert_eq!(
        err,
        VerifyError::MissingHeader {
            header: HeaderName::Id
        }
    );
}

#[test]
fn no_keys_is_its_own_error() {
    let err = check(&[], SIGNATURE).expect_err("no keys");
    assert_eq!(err, VerifyError::NoKeys);
    assert_eq!(err.code(), "no_keys");
    assert_eq!(err.header(), None);
}

fn invalid_reason(headers: Headers<'_>) -> (HeaderName, &'static str) {
    match verify(&[vector_key()], &headers, BODY, NOW, DEFAULT_TOLERANCE_SECS) {
        Err(VerifyError::InvalidHeader { header, reason }) => (header, reason),
        other => panic!("expected invalid_header, got {other:?}"),
    }
}

#[test]
fn garbage_id() {
    let full = Headers::from_strs(ID, TIMESTAMP, SIGNATURE);
    let long = "a".repeat(MAX_ID_LEN + 1);
    let max = "a".repeat(MAX_ID_LEN);
    for bad in [
        &b""[..],
        b"has space",
        b"tab\there",
        b"new\nline",
        b"caf\xc3\xa9",
        b"\xff\xfe",
        long.as_bytes(),
    ] {
        let (header, _) = invalid_reason(Headers {
            id: Some(bad),
            ..full
        });
        assert_eq!(header, HeaderName::Id);
    }
    // 256 characters is still a valid id (the signature then fails).
    assert_eq!(
        verify(
            &[vector_key()],
            &Headers {
                id: Some(max.as_bytes()),
                ..full
            },
            BODY,
            NOW,
            300
        ),
        Err(VerifyError::NoValidSignature)
    );
}

#[test]
fn garbage_timestamp() {
    let full = Headers::from_strs(ID, TIMESTAMP, SIGNATURE);
    for bad in [
        &b""[..],
        b"-1649367553",
        b"+1649367553",
        b"1649367553.5",
        b" 1649367553",
        b"0x10",
        b"1e9",
        b"\xff",
        b"9223372036854775808",
        b"99999999999999999999999",
        b"000000000000000000000000000000001",
    ] {
        let (header, _) = invalid_reason(Headers {
            timestamp: Some(bad),
            ..full
        });
        assert_eq!(header, HeaderName::Timestamp);
    }
    assert_eq!(
        invalid_reason(Headers {
            timestamp: Some(b"9223372036854775808"),
            ..full
        })
        .1,
        "does not fit in 64 bits"
    );
    // i64::MAX itself parses, and is then far in the future.
    assert_eq!(
        verify(
            &[vector_key()],
            &Headers {
                timestamp: Some(b"9223372036854775807"),
                ..full
            },
            BODY,
            NOW,
            300
        ),
        Err(VerifyError::TimestampTooNew)
    );
}

#[test]
fn garbage_signature_header() {
    let full = Headers::from_strs(ID, TIMESTAMP, SIGNATURE);
    let too_long = format!("{SIGNATURE} {}", "x".repeat(MAX_SIGNATURE_HEADER_LEN));
    let too_many = vec![SIGNATURE; MAX_SIGNATURE_ENTRIES + 1].join(" ");
    for (bad, reason) in [
        (&b""[..], "is empty"),
        (b"   ", "has no entry"),
        (b"\xff\xfe", "is not valid utf-8"),
        (too_long.as_bytes(), "is too long"),
        (too_many.as_bytes(), "has too many entries"),
    ] {
        assert_eq!(
            invalid_reason(Headers {
                signature: Some(bad),
                ..full
            }),
            (HeaderName::Signature, reason)
        );
    }
    // Exactly the limit of entries is fine.
    let at_limit = vec![SIGNATURE; MAX_SIGNATURE_ENTRIES].join(" ");
    assert!(check(&[vector_key()], &at_limit).is_ok());

    for junk in [
        "v1",
        "v1,",
        ",",
        "v1,not base64!",
        "v1,AAAA",
        "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw",
        "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=AAAA",
        "V1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
        "v1a,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
        "v1;tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
    ] {
        assert_eq!(
            check(&[vector_key()], junk),
            Err(VerifyError::NoValidSignature),
            "{junk}"
        );
    }
}

#[test]
fn header_checks_come_before_the_time_window() {
    // A malformed signature header on a stale request reports the header.
    let headers = Headers::from_strs(ID, TIMESTAMP, "   ");
    assert_eq!(
        verify(&[vector_key()], &headers, BODY, NOW + 10_000, 300).map_err(|e| e.code()),
        Err("invalid_header")
    );
}

#[test]
fn error_codes_and_messages_hide_values() {
    let cases = [
        (VerifyError::TimestampTooOld, "timestamp_too_old"),
        (VerifyError::TimestampTooNew, "timestamp_too_new"),
        (VerifyError::NoValidSignature, "no_valid_signature"),
        (
            VerifyError::InvalidHeader {
                header: HeaderName::Signature,
                reason: "is too long",
            },
            "invalid_header",
        ),
    ];
    for (err, code) in cases {
        assert_eq!(err.code(), code);
        assert!(err.header().is_some());
    }
    let secret_sig = "v1,SuperSecretSignatureValue=";
    let err = check(&[vector_key()], secret_sig).expect_err("invalid");
    assert!(!err.to_string().contains("SuperSecret"));
    assert!(!format!("{err:?}").contains("SuperSecret"));

    let headers = Headers::from_strs(ID, TIMESTAMP, secret_sig);
    let shown = format!("{headers:?}");
    assert!(!shown.contains("SuperSecret"), "{shown}");
    assert!(!shown.contains(ID), "{shown}");
}

#[test]
fn ed25519_round_trip() {
    let signing = Ed25519SigningKey::generate();
    let keys = [vector_key(), VerificationKey::Ed25519(signing.public_key())];
    let signature = sign_v1a(&signing, ID, NOW, BODY);
    assert!(signature.starts_with("v1a,"));
    let verified = check(&keys, &signature).expect("valid");
    assert_eq!(verified.key_index(), 1);
    assert_eq!(verified.scheme(), Scheme::V1a);

    // Mixed header during a migration from v1 to v1a: the v1 key matches first.
    let verified = check(&keys, &format!("{signature} {SIGNATURE}")).expect("valid");
    assert_eq!(verified.key_index(), 0);
    assert_eq!(verified.scheme(), Scheme::V1);

    // A v1a signature with a different key, or over another body, fails.
    let other = Ed25519SigningKey::generate();
    let keys = [VerificationKey::Ed25519(other.public_key())];
    assert_eq!(check(&keys, &signature), Err(VerifyError::NoValidSignature));
    let keys = [VerificationKey::Ed25519(signing.public_key())];
    assert_eq!(
        verify(
            &keys,
            &Headers::from_strs(ID, TIMESTAMP, &signature),
            b"{}",
            NOW,
            300
        ),
        Err(VerifyError::NoValidSignature)
    );
    // Written as a v1 entry, it does not match the ed25519 key.
    let as_v1 = signature.replacen("v1a,", "v1,", 1);
    assert_eq!(check(&keys, &as_v1), Err(VerifyError::NoValidSignature));
}

#[test]
fn ed25519_known_seed_is_deterministic() {
    let signing = Ed25519SigningKey::from_seed(&[5u8; 32]);
    let first = sign_v1a(&signing, ID, NOW, BODY);
    assert_eq!(sign_v1a(&signing, ID, NOW, BODY), first);
    let public = Ed25519PublicKey::parse(&signing.public_key().to_whpk_string()).expect("pk");
    let keys = [VerificationKey::Ed25519(public)];
    assert!(check(&keys, &first).is_ok());
}

#[test]
fn header_names() {
    assert_eq!(HeaderName::Id.to_string(), "webhook-id");
    assert_eq!(HeaderName::Timestamp.as_str(), "webhook-timestamp");
    assert_eq!(HeaderName::Signature.as_str(), "webhook-signature");
    assert_eq!(Scheme::V1.as_str(), "v1");
    assert_eq!(Scheme::V1a.as_str(), "v1a");
}
