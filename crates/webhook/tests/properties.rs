//! Property tests over the public API: verification and parsing never panic
//! on arbitrary input, signing then verifying always passes, and any single
//! flipped bit of the body is caught.

use opledger_webhook::{
    BodyKey, DEFAULT_TOLERANCE_SECS, Ed25519SigningKey, Headers, SigningSecret, VerificationKey,
    event, open, parse, seal, sign_v1, sign_v1a, verify,
};
use proptest::prelude::*;

/// A valid `webhook-id`: 1 to 256 visible ASCII characters.
fn event_id() -> impl Strategy<Value = String> {
    proptest::collection::vec(0x21u8..=0x7e, 1..=256)
        .prop_map(|bytes| bytes.into_iter().map(char::from).collect())
}

fn secret() -> impl Strategy<Value = SigningSecret> {
    proptest::collection::vec(any::<u8>(), 24..=64)
        .prop_map(|bytes| SigningSecret::from_bytes(&bytes).expect("24 to 64 bytes"))
}

fn opt_bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300))
}

/// Header-like text: printable, with the separators that matter.
fn header_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(prop_oneof![
        "[ -~]{0,200}",
        "(v1|v1a|v2),[A-Za-z0-9+/=]{0,90}( (v1|v1a),[A-Za-z0-9+/=]{0,90}){0,5}",
        "[0-9]{0,25}",
    ])
}

proptest! {
    #[test]
    fn verify_never_panics_on_bytes(
        id in opt_bytes(),
        timestamp in opt_bytes(),
        signature in opt_bytes(),
        body in proptest::collection::vec(any::<u8>(), 0..512),
        now in any::<i64>(),
        tolerance in any::<i64>(),
        key_bytes in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let mut keys = Vec::new();
        if let Ok(secret) = SigningSecret::from_bytes(&key_bytes) {
            keys.push(VerificationKey::Hmac(secret));
        }
        let headers = Headers {
            id: id.as_deref(),
            timestamp: timestamp.as_deref(),
            signature: signature.as_deref(),
        };
        let _ = verify(&keys, &headers, &body, now, tolerance);
        let _ = verify(
            &[VerificationKey::Hmac(SigningSecret::generate())],
            &headers,
            &body,
            now,
            tolerance,
        );
    }

    #[test]
    fn verify_never_panics_on_text(
        id in header_text(),
        timestamp in header_text(),
        signature in header_text(),
        body in any::<String>(),
        now in any::<i64>(),
    ) {
        let ed = Ed25519SigningKey::from_seed(&[3u8; 32]);
        let keys = [
            VerificationKey::Hmac(SigningSecret::from_bytes(&[1u8; 32]).expect("secret")),
            VerificationKey::Ed25519(ed.public_key()),
        ];
        let headers = Headers {
            id: id.as_deref().map(str::as_bytes),
            timestamp: timestamp.as_deref().map(str::as_bytes),
            signature: signature.as_deref().map(str::as_bytes),
        };
        let _ = verify(&keys, &headers, body.as_bytes(), now, DEFAULT_TOLERANCE_SECS);
    }

    #[test]
    fn key_parsers_never_panic(text in any::<String>(), b64 in "[A-Za-z0-9+/=]{0,100}") {
        let _ = SigningSecret::parse(&text);
        let _ = SigningSecret::parse(&format!("whsec_{b64}"));
        let _ = VerificationKey::parse(&text);
        let _ = VerificationKey::parse(&format!("whpk_{b64}"));
        let _ = Ed25519SigningKey::parse(&format!("whsk_{b64}"));
        let _ = BodyKey::parse(&text);
        let _ = BodyKey::parse(&format!("1:{b64}"));
    }

    #[test]
    fn sign_then_verify_passes(
        secret in secret(),
        id in event_id(),
        timestamp in 0i64..=i64::MAX,
        skew in -DEFAULT_TOLERANCE_SECS..=DEFAULT_TOLERANCE_SECS,
        body in proptest::collection::vec(any::<u8>(), 0..1024),
    ) {
        let signature = sign_v1(&secret, &id, timestamp, &body);
        let timestamp_text = timestamp.to_string();
        let headers = Headers::from_strs(&id, &timestamp_text, &signature);
        let now = timestamp.saturating_add(skew);
        let keys = [VerificationKey::Hmac(SigningSecret::generate()), VerificationKey::Hmac(secret)];
        let verified = verify(&keys, &headers, &body, now, DEFAULT_TOLERANCE_SECS);
        let verified = verified.map_err(|e| e.code());
        prop_assert!(verified.is_ok(), "{verified:?}");
        let verified = verified.expect("checked");
        prop_assert_eq!(verified.event_id(), id.as_str());
        prop_assert_eq!(verified.timestamp(), timestamp);
        prop_assert_eq!(verified.key_index(), 1);
    }

    #[test]
    fn single_bit_flip_of_body_fails(
        secret in secret(),
        id in event_id(),
        body in proptest::collection::vec(any::<u8>(), 1..512),
        bit in any::<proptest::sample::Index>(),
    ) {
        let timestamp = 1_700_000_000;
        let signature = sign_v1(&secret, &id, timestamp, &body);
        let mut flipped = body.clone();
        let bit = bit.index(body.len() * 8);
        flipped[bit / 8] ^= 1 << (bit % 8);
        let headers = Headers::from_strs(&id, "1700000000", &signature);
        let keys = [VerificationKey::Hmac(secret)];
        prop_assert!(verify(&keys, &headers, &body, timestamp, 300).is_ok());
        prop_assert_eq!(
            verify(&keys, &headers, &flipped, timestamp, 300).map_err(|e| e.code()),
            Err("no_valid_signature")
        );
    }

    #[test]
    fn v1a_sign_then_verify_and_flip(
        seed in any::<[u8; 32]>(),
        id in event_id(),
        body in proptest::collection::vec(any::<u8>(), 1..256),
        bit in any::<proptest::sample::Index>(),
    ) {
        let key = Ed25519SigningKey::from_seed(&seed);
        let signature = sign_v1a(&key, &id, 1_700_000_000, &body);
        let headers = Headers::from_strs(&id, "1700000000", &signature);
        let keys = [VerificationKey::Ed25519(key.public_key())];
        prop_assert!(verify(&keys, &headers, &body, 1_700_000_000, 300).is_ok());
        let mut flipped = body.clone();
        let bit = bit.index(body.len() * 8);
        flipped[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(verify(&keys, &headers, &flipped, 1_700_000_000, 300).is_err());
    }

    #[test]
    fn parse_never_panics_on_bytes(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&body);
    }

    #[test]
    fn parse_never_panics_on_shaped_json(
        event_type in prop_oneof![
            Just("\"deposit.confirmed\"".to_owned()),
            Just("\"transfer.status\"".to_owned()),
            Just("\"kyt.result\"".to_owned()),
            "\"[ !#-\\[\\]-~]{0,80}\"",
            Just("7".to_owned()),
        ],
        keys in proptest::collection::vec(
            prop_oneof![
                Just("deposit_id"), Just("account"), Just("asset"), Just("amount"),
                Just("operation_id"), Just("status"), Just("tx_hash"), Just("result"),
                Just("provider_ref"), Just("other"),
            ],
            0..6,
        ),
        values in proptest::collection::vec(
            prop_oneof![
                "\"[ !#-\\[\\]-~]{0,70}\"".boxed(),
                "[1-9][0-9]{0,4}".boxed(),
                Just("null".to_owned()).boxed(),
                Just("{}".to_owned()).boxed(),
            ],
            6,
        ),
        timestamp in proptest::option::of("\"[0-9TZ:.+-]{0,30}\""),
    ) {
        let data: Vec<String> = keys
            .iter()
            .zip(values.iter())
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect();
        let timestamp = timestamp.map(|t| format!(",\"timestamp\":{t}")).unwrap_or_default();
        let body = format!(
            "{{\"type\":{event_type}{timestamp},\"data\":{{{}}}}}",
            data.join(",")
        );
        match parse(body.as_bytes()) {
            Ok(event::Parsed::Known(_)) | Ok(event::Parsed::Unhandled(_)) => {}
            Err(err) => prop_assert!(false, "well-formed object refused: {err:?} for {body}"),
        }
    }

    #[test]
    fn seal_round_trips(
        id in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..1024),
        aad in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let key = BodyKey::generate(id);
        let sealed = seal(&key, &body, &aad).expect("seal");
        let opened = open(std::slice::from_ref(&key), &sealed, &aad).expect("open");
        prop_assert_eq!(opened.as_slice(), body.as_slice());
        let mut other_aad = aad.clone();
        other_aad.push(0);
        prop_assert!(open(&[key], &sealed, &other_aad).is_err());
    }
}
