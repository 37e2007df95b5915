use super::*;

const VECTOR_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

#[test]
fn parses_and_prints_whsec() {
    let secret = SigningSecret::parse(VECTOR_SECRET).expect("secret");
    assert_eq!(secret.as_bytes().len(), 24);
    assert_eq!(secret.to_whsec_string().as_str(), VECTOR_SECRET);
}

#[test]
fn whsec_requires_prefix() {
    assert_eq!(
        SigningSecret::parse("C2FVsBQIhrscChlQIMV+b5sSYspob7oD"),
        Err(KeyError::MissingPrefix {
            expected: SECRET_PREFIX
        })
    );
    assert_eq!(
        SigningSecret::parse("WHSEC_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"),
        Err(KeyError::MissingPrefix {
            expected: SECRET_PREFIX
        })
    );
}

#[test]
fn whsec_length_limits() {
    let encode = |n: usize| format!("{SECRET_PREFIX}{}", STANDARD.encode(vec![7u8; n]));
    for n in [0, 1, 23, 65, 66, 67, 100] {
        assert_eq!(
            SigningSecret::parse(&encode(n)),
            Err(KeyError::InvalidLength {
                expected: "24 to 64 bytes"
            }),
            "{n}"
        );
    }
    for n in [24, 32, 63, 64] {
        let secret = SigningSecret::parse(&encode(n)).expect("in range");
        assert_eq!(secret.as_bytes(), vec![7u8; n].as_slice());
        assert_eq!(secret.to_whsec_string().as_str(), encode(n));
    }
}

#[test]
fn whsec_refuses_bad_base64() {
    for bad in [
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7o",   // truncated
        "whsec_C2FVsBQIhrscChlQIMV-b5sSYspob7oD",  // url-safe alphabet
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD ", // trailing space
        "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD====",
    ] {
        assert_eq!(
            SigningSecret::parse(bad),
            Err(KeyError::InvalidBase64),
            "{bad}"
        );
    }
}

#[test]
fn generated_secret_round_trips() {
    let secret = SigningSecret::generate();
    let text = secret.to_whsec_string();
    assert!(text.starts_with(SECRET_PREFIX));
    let again = SigningSecret::parse(&text).expect("round trip");
    assert_eq!(again, secret);
    assert_ne!(SigningSecret::generate(), secret);
}

#[test]
fn from_bytes_checks_length() {
    assert!(SigningSecret::from_bytes(&[1u8; 23]).is_err());
    assert!(SigningSecret::from_bytes(&[1u8; 24]).is_ok());
    assert!(SigningSecret::from_bytes(&[1u8; 65]).is_err());
}

#[test]
fn debug_is_redacted() {
    let secret = SigningSecret::parse(VECTOR_SECRET).expect("secret");
    assert_eq!(format!("{secret:?}"), "SigningSecret(<redacted>)");
    let key = VerificationKey::Hmac(secret);
    let shown = format!("{key:?}");
    assert!(!shown.contains("C2FV"), "{shown}");
    let signing = Ed25519SigningKey::generate();
    assert_eq!(format!("{signing:?}"), "Ed25519SigningKey(<redacted>)");
}

#[test]
fn ed25519_keys_round_trip() {
    let signing = Ed25519SigningKey::generate();
    let text = signing.to_whsk_string();
    assert!(text.starts_with(SIGNING_KEY_PREFIX));
    let again = Ed25519SigningKey::parse(&text).expect("signing key");
    assert_eq!(again.public_key(), signing.public_key());

    let public = signing.public_key().to_whpk_string();
    assert!(public.starts_with(PUBLIC_KEY_PREFIX));
    let parsed = Ed25519PublicKey::parse(&public).expect("public key");
    assert_eq!(parsed, signing.public_key());
    assert_eq!(
        VerificationKey::parse(&public).expect("verification key"),
        VerificationKey::Ed25519(parsed)
    );
    assert!(format!("{parsed:?}").contains(&public));
}

#[test]
fn ed25519_public_key_refusals() {
    assert_eq!(
        Ed25519PublicKey::parse("whsec_AAAA"),
        Err(KeyError::MissingPrefix {
            expected: PUBLIC_KEY_PREFIX
        })
    );
    let short = format!("{PUBLIC_KEY_PREFIX}{}", STANDARD.encode([9u8; 31]));
    assert_eq!(
        Ed25519PublicKey::parse(&short),
        Err(KeyError::InvalidLength {
            expected: "32 bytes"
        })
    );
    let long = format!("{PUBLIC_KEY_PREFIX}{}", STANDARD.encode([9u8; 33]));
    assert_eq!(
        Ed25519PublicKey::parse(&long),
        Err(KeyError::InvalidLength {
            expected: "32 bytes"
        })
    );
    // The identity point (small order) is refused as weak.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    assert_eq!(
        Ed25519PublicKey::from_bytes(&identity),
        Err(KeyError::InvalidPublicKey)
    );
}

#[test]
fn verification_key_parse_picks_kind_by_prefix() {
    assert!(matches!(
        VerificationKey::parse(VECTOR_SECRET),
        Ok(VerificationKey::Hmac(_))
    ));
    assert_eq!(
        VerificationKey::parse("nope"),
        Err(KeyError::MissingPrefix {
            expected: SECRET_PREFIX
        })
    );
}

#[test]
fn errors_never_echo_the_text() {
    let bad = "whsec_SECRETSECRET!!";
    let err = SigningSecret::parse(bad).expect_err("invalid");
    assert!(!err.to_string().contains("SECRETSECRET"));
}
