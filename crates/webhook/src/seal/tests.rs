use super::*;

const BODY: &[u8] = br#"{"type":"deposit.confirmed","data":{"amount":"1"}}"#;

fn tenant() -> TenantId {
    "3f1c2b4a-0d9e-4c7b-8a65-1e2f3a4b5c6d"
        .parse()
        .expect("tenant id")
}

#[test]
fn round_trip() {
    let key = BodyKey::generate(7);
    let aad = row_aad(&tenant(), "custodian-a", "msg_1");
    let sealed = seal(&key, BODY, &aad).expect("seal");
    assert_eq!(sealed.key_id, 7);
    assert_eq!(sealed.ciphertext.len(), BODY.len() + TAG_LEN);
    assert_ne!(&sealed.ciphertext[..BODY.len()], BODY);
    let opened = open(std::slice::from_ref(&key), &sealed, &aad).expect("open");
    assert_eq!(opened.as_slice(), BODY);

    // Empty bodies work too.
    let sealed = seal(&key, b"", &aad).expect("seal");
    assert_eq!(sealed.ciphertext.len(), TAG_LEN);
    assert_eq!(open(&[key], &sealed, &aad).expect("open").as_slice(), b"");
}

#[test]
fn nonces_are_fresh() {
    let key = BodyKey::generate(1);
    let a = seal(&key, BODY, b"aad").expect("seal");
    let b = seal(&key, BODY, b"aad").expect("seal");
    assert_ne!(a.nonce, b.nonce);
    assert_ne!(a.ciphertext, b.ciphertext);
}

#[test]
fn rotation_picks_the_key_by_id() {
    let old = BodyKey::generate(1);
    let new = BodyKey::generate(2);
    let sealed_old = seal(&old, BODY, b"aad").expect("seal");
    let sealed_new = seal(&new, BODY, b"aad").expect("seal");
    let keys = [new.clone(), old.clone()];
    assert_eq!(
        open(&keys, &sealed_old, b"aad").expect("old").as_slice(),
        BODY
    );
    assert_eq!(
        open(&keys, &sealed_new, b"aad").expect("new").as_slice(),
        BODY
    );
}

#[test]
fn wrong_key_id() {
    let key = BodyKey::generate(1);
    let sealed = seal(&key, BODY, b"aad").expect("seal");
    let err = open(&[BodyKey::generate(2)], &sealed, b"aad").expect_err("unknown");
    assert_eq!(err, OpenError::UnknownKey { key_id: 1 });
    assert_eq!(err.code(), "unknown_key");
    assert_eq!(
        open(&[], &sealed, b"aad"),
        Err(OpenError::UnknownKey { key_id: 1 })
    );

    // Right id, different key bytes: corrupt.
    let impostor = BodyKey::generate(1);
    assert_eq!(open(&[impostor], &sealed, b"aad"), Err(OpenError::Corrupt));

    // A relabelled key id does not help either.
    let mut relabelled = sealed.clone();
    relabelled.key_id = 2;
    let other = BodyKey::generate(2);
    assert_eq!(open(&[other], &relabelled, b"aad"), Err(OpenError::Corrupt));
}

#[test]
fn tampering_is_detected() {
    let key = BodyKey::generate(3);
    let keys = [key.clone()];
    let sealed = seal(&key, BODY, b"aad").expect("seal");
    for i in 0..sealed.ciphertext.len() {
        let mut tampered = sealed.clone();
        tampered.ciphertext[i] ^= 0x01;
        assert_eq!(
            open(&keys, &tampered, b"aad"),
            Err(OpenError::Corrupt),
            "{i}"
        );
    }
    for i in 0..NONCE_LEN {
        let mut tampered = sealed.clone();
        tampered.nonce[i] ^= 0x80;
        assert_eq!(
            open(&keys, &tampered, b"aad"),
            Err(OpenError::Corrupt),
            "{i}"
        );
    }
    let mut truncated = sealed.clone();
    truncated.ciphertext.pop();
    assert_eq!(open(&keys, &truncated, b"aad"), Err(OpenError::Corrupt));
    let mut empty = sealed.clone();
    empty.ciphertext.clear();
    assert_eq!(open(&keys, &empty, b"aad"), Err(OpenError::Corrupt));
    assert_eq!(OpenError::Corrupt.code(), "corrupt");
}

#[test]
fn wrong_aad_fails() {
    let key = BodyKey::generate(4);
    let keys = [key.clone()];
    let aad = row_aad(&tenant(), "custodian-a", "msg_1");
    let sealed = seal(&key, BODY, &aad).expect("seal");
    for other in [
        row_aad(&tenant(), "custodian-a", "msg_2"),
        row_aad(&tenant(), "custodian-b", "msg_1"),
        row_aad(&TenantId::new(), "custodian-a", "msg_1"),
        Vec::new(),
    ] {
        assert_eq!(open(&keys, &sealed, &other), Err(OpenError::Corrupt));
    }
}

#[test]
fn row_aad_is_unambiguous() {
    let t = tenant();
    assert_ne!(row_aad(&t, "ab", "c"), row_aad(&t, "a", "bc"));
    assert_ne!(row_aad(&t, "", "abc"), row_aad(&t, "abc", ""));
    assert_eq!(row_aad(&t, "src", "id"), row_aad(&t, "src", "id"));
    let aad = row_aad(&t, "src", "id");
    assert!(aad.starts_with(b"opledger/webhook-body/v1\0"));
    assert_eq!(aad.len(), 25 + 16 + 8 + 3 + 8 + 2);
}

#[test]
fn body_key_text_form() {
    let key = BodyKey::generate(65535);
    let text = key.to_config_string();
    assert!(text.starts_with("65535:"));
    let parsed = BodyKey::parse(&text).expect("parse");
    assert_eq!(parsed.id(), 65535);
    let sealed = seal(&key, BODY, b"").expect("seal");
    assert_eq!(
        open(&[parsed], &sealed, b"").expect("open").as_slice(),
        BODY
    );

    let fixed = BodyKey::from_bytes(9, &[0xab; 32]);
    let text = fixed.to_config_string();
    assert_eq!(text.as_str(), format!("9:{}", STANDARD.encode([0xab; 32])));
}

#[test]
fn body_key_parse_refusals() {
    let b64 = STANDARD.encode([1u8; 32]);
    let cases = [
        (b64.clone(), BodyKeyError::MissingSeparator),
        (format!(":{b64}"), BodyKeyError::InvalidId),
        (format!("65536:{b64}"), BodyKeyError::InvalidId),
        (format!("-1:{b64}"), BodyKeyError::InvalidId),
        (format!("+1:{b64}"), BodyKeyError::InvalidId),
        (format!(" 1:{b64}"), BodyKeyError::InvalidId),
        (format!("123456:{b64}"), BodyKeyError::InvalidId),
        (
            format!("1:{}", STANDARD.encode([1u8; 31])),
            BodyKeyError::InvalidLength,
        ),
        (
            format!("1:{}", STANDARD.encode([1u8; 33])),
            BodyKeyError::InvalidLength,
        ),
        (
            format!("1:{}", STANDARD.encode([1u8; 64])),
            BodyKeyError::InvalidLength,
        ),
        ("1:".to_owned(), BodyKeyError::InvalidLength),
        (format!("1:{}", &b64[..43]), BodyKeyError::InvalidBase64),
        (format!("1:{b64}\n"), BodyKeyError::InvalidLength),
        (
            format!("1:{}", b64.replace('A', "-")),
            BodyKeyError::InvalidBase64,
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(
            BodyKey::parse(&text).map(|k| k.id()),
            Err(expected),
            "{text}"
        );
    }
    assert_eq!(
        BodyKey::parse(&format!("00012:{b64}")).map(|k| k.id()),
        Ok(12)
    );
}

#[test]
fn debug_output_hides_secrets() {
    let key = BodyKey::from_bytes(5, &[0xcd; 32]);
    let shown = format!("{key:?}");
    assert_eq!(shown, "BodyKey { id: 5, key: <redacted> }");
    let sealed = seal(&key, b"secret body", b"").expect("seal");
    let shown = format!("{sealed:?}");
    assert!(shown.contains("key_id: 5"), "{shown}");
    assert!(!shown.contains("secret"), "{shown}");
}

#[test]
fn byte_encoding_round_trip() {
    let key = BodyKey::generate(258);
    let sealed = seal(&key, BODY, b"aad").expect("seal");
    let bytes = sealed.to_bytes();
    assert_eq!(bytes[0], 1);
    assert_eq!(&bytes[1..3], &[1, 2]);
    assert_eq!(bytes.len(), 1 + 2 + NONCE_LEN + BODY.len() + TAG_LEN);
    let decoded = Sealed::from_bytes(&bytes).expect("decode");
    assert_eq!(decoded, sealed);
    assert_eq!(
        open(&[key], &decoded, b"aad").expect("open").as_slice(),
        BODY
    );

    assert_eq!(Sealed::from_bytes(&[]), None);
    assert_eq!(
        Sealed::from_bytes(&bytes[..1 + 2 + NONCE_LEN + TAG_LEN - 1]),
        None
    );
    let mut wrong_version = bytes.clone();
    wrong_version[0] = 2;
    assert_eq!(Sealed::from_bytes(&wrong_version), None);
}

#[test]
fn a_sealed_secret_opens_only_for_its_endpoint() {
    let key = BodyKey::generate(3);
    let secret = SigningSecret::generate();
    let sealed = seal_secret(&key, "whe_a", &secret).expect("sealed");
    let keys = [key];
    assert_eq!(open_secret(&keys, "whe_a", &sealed), Ok(secret));
    assert_eq!(
        open_secret(&keys, "whe_b", &sealed),
        Err(OpenError::Corrupt)
    );
}

#[test]
fn key_lists_need_one_key_and_distinct_ids() {
    let a = BodyKey::generate(1).to_config_string();
    let b = BodyKey::generate(2).to_config_string();
    let both = format!("{}, {}", a.as_str(), b.as_str());
    let keys = parse_key_list(&both).expect("two keys");
    assert_eq!(keys.iter().map(BodyKey::id).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(
        parse_key_list(" , ").err(),
        Some(BodyKeyError::EmptyOrDuplicate)
    );
    let twice = format!("{},{}", a.as_str(), a.as_str());
    assert_eq!(
        parse_key_list(&twice).err(),
        Some(BodyKeyError::EmptyOrDuplicate)
    );
    assert!(parse_key_list("1:short").is_err());
}
