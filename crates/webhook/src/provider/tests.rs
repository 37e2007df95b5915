use super::*;
use crate::secret::{Ed25519SigningKey, SigningSecret};

const SECRET: &[u8] = b"bitgo-webhook-secret-of-the-tests-0001";
const OTHER: &[u8] = b"another-secret-nobody-configured-00002";
const REFERENCE: &str = "0190a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b";

fn key(bytes: &[u8]) -> VerificationKey {
    VerificationKey::Hmac(SigningSecret::from_bytes(bytes).expect("secret"))
}

fn mac(secret: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret).expect("key");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn bitgo_body() -> Vec<u8> {
    format!(
        r#"{{"type":"transfer","wallet":"w","coin":"hteth","transfer":"t1","hash":"","state":"signed","sequenceId":"{REFERENCE}"}}"#
    )
    .into_bytes()
}

fn bitgo(
    keys: &[VerificationKey],
    signature: &str,
    body: &[u8],
) -> Result<ProviderDelivery, ProviderError> {
    verify_bitgo(keys, Some(signature.as_bytes()), Some(b"evt-1"), body)
}

#[test]
fn scheme_names_parse_back_and_nothing_else_does() {
    for scheme in EndpointScheme::ALL {
        assert_eq!(EndpointScheme::parse(scheme.as_str()), Some(scheme));
        assert_eq!(scheme.to_string(), scheme.as_str());
    }
    assert_eq!(EndpointScheme::parse("FIREBLOCKS_JWS"), None);
    assert_eq!(EndpointScheme::parse(""), None);
    assert_eq!(EndpointScheme::default(), EndpointScheme::Standard);
    assert!(!EndpointScheme::Standard.is_custodian());
    assert!(EndpointScheme::FireblocksJws.is_custodian());
    assert!(!EndpointScheme::FireblocksJws.uses_stored_keys());
    assert!(EndpointScheme::BitgoHmac.uses_stored_keys());
}

#[test]
fn a_bitgo_delivery_signed_with_the_endpoint_secret_names_our_reference() {
    let body = bitgo_body();
    let tag = hex::encode(mac(SECRET, &[&body]));
    let read = bitgo(&[key(SECRET)], &tag, &body).expect("verified");
    assert_eq!(read.event_id, "evt-1");
    assert!(read.about_transfer);
    assert_eq!(read.reference.as_deref(), Some(REFERENCE));
    assert_eq!(read.event_type.as_deref(), Some("transfer"));
    assert_eq!(read.sent_at, None);
    // Uppercase hex, and the second key of a rotation, verify too.
    let upper = tag.to_uppercase();
    assert!(bitgo(&[key(OTHER), key(SECRET)], &upper, &body).is_ok());
    // The reference never shows in Debug output.
    assert!(!format!("{read:?}").contains(REFERENCE));
}

#[test]
fn a_bitgo_delivery_is_refused_unless_its_secret_and_body_match() {
    let body = bitgo_body();
    let forged = hex::encode(mac(OTHER, &[&body]));
    assert_eq!(
        bitgo(&[key(SECRET)], &forged, &body),
        Err(ProviderError::NoValidSignature)
    );
    let tag = hex::encode(mac(SECRET, &[&body]));
    let mut tampered = body.clone();
    tampered[10] ^= 1;
    assert_eq!(
        bitgo(&[key(SECRET)], &tag, &tampered),
        Err(ProviderError::NoValidSignature)
    );
    assert_eq!(
        bitgo(&[key(SECRET)], &tag[..62], &body),
        Err(ProviderError::InvalidHeader("x-signature-sha256"))
    );
    assert_eq!(
        bitgo(&[key(SECRET)], &"zz".repeat(32), &body),
        Err(ProviderError::InvalidHeader("x-signature-sha256"))
    );
    assert_eq!(
        verify_bitgo(&[key(SECRET)], None, Some(b"evt-1"), &body),
        Err(ProviderError::MissingHeader("x-signature-sha256"))
    );
    assert_eq!(
        verify_bitgo(&[key(SECRET)], Some(tag.as_bytes()), None, &body),
        Err(ProviderError::MissingHeader("idempotency-key"))
    );
    assert_eq!(
        verify_bitgo(
            &[key(SECRET)],
            Some(tag.as_bytes()),
            Some(b"has space"),
            &body
        ),
        Err(ProviderError::InvalidHeader("idempotency-key"))
    );
    let ed = VerificationKey::Ed25519(Ed25519SigningKey::generate().public_key());
    assert_eq!(bitgo(&[ed], &tag, &body), Err(ProviderError::NoKeys));
    assert_eq!(bitgo(&[], &tag, &body), Err(ProviderError::NoKeys));
}

#[test]
fn a_verified_bitgo_body_must_be_an_event_and_only_a_transfer_names_a_reference() {
    let not_json = b"not json".to_vec();
    let tag = hex::encode(mac(SECRET, &[&not_json]));
    assert_eq!(
        bitgo(&[key(SECRET)], &tag, &not_json),
        Err(ProviderError::Body)
    );
    let other =
        format!(r#"{{"type":"wallet_confirmation","sequenceId":"{REFERENCE}"}}"#).into_bytes();
    let tag = hex::encode(mac(SECRET, &[&other]));
    let read = bitgo(&[key(SECRET)], &tag, &other).expect("verified");
    assert!(!read.about_transfer);
    assert_eq!(read.reference, None);
}

fn prime_body(event_id: &str, event_type: &str) -> Vec<u8> {
    format!(
        r#"{{"event_id":"{event_id}","event_type":"{event_type}","portfolio_id":"p","created_at":"2026-12-11T00:00:00Z","transaction":{{"id":"t","status":"TRANSACTION_DONE"}}}}"#
    )
    .into_bytes()
}

fn prime_sign(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    STANDARD.encode(mac(secret, &[timestamp.as_bytes(), body]))
}

fn prime(
    keys: &[VerificationKey],
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now: i64,
) -> Result<ProviderDelivery, ProviderError> {
    verify_prime(
        keys,
        Some(timestamp.as_bytes()),
        Some(signature.as_bytes()),
        body,
        now,
        300,
    )
}

#[test]
fn a_prime_delivery_signed_over_its_timestamp_and_body_is_recorded_without_a_reference() {
    let body = prime_body("e-42", "TRANSACTION_STATUS_UPDATED");
    let signature = prime_sign(SECRET, "1765400000", &body);
    let read = prime(
        &[key(SECRET)],
        "1765400000",
        &signature,
        &body,
        1_765_400_100,
    )
    .expect("ok");
    assert_eq!(read.event_id, "e-42");
    assert_eq!(read.sent_at, Some(1_765_400_000));
    assert!(read.about_transfer);
    assert_eq!(read.reference, None);
    let other = prime_body("e-43", "PORTFOLIO_UPDATED");
    let signature = prime_sign(SECRET, "1765400000", &other);
    let read = prime(
        &[key(SECRET)],
        "1765400000",
        &signature,
        &other,
        1_765_400_000,
    )
    .expect("ok");
    assert!(!read.about_transfer);
}

#[test]
fn a_prime_delivery_is_refused_out_of_its_window_or_under_another_secret() {
    let body = prime_body("e-42", "TRANSACTION_CREATED");
    let signature = prime_sign(SECRET, "1765400000", &body);
    let keys = [key(SECRET)];
    assert_eq!(
        prime(&keys, "1765400000", &signature, &body, 1_765_400_301),
        Err(ProviderError::TimestampTooOld)
    );
    assert_eq!(
        prime(&keys, "1765400000", &signature, &body, 1_765_399_699),
        Err(ProviderError::TimestampTooNew)
    );
    // The timestamp is signed: another one with the same signature does not verify.
    assert_eq!(
        prime(&keys, "1765400001", &signature, &body, 1_765_400_000),
        Err(ProviderError::NoValidSignature)
    );
    let forged = prime_sign(OTHER, "1765400000", &body);
    assert_eq!(
        prime(&keys, "1765400000", &forged, &body, 1_765_400_000),
        Err(ProviderError::NoValidSignature)
    );
    assert_eq!(
        prime(&keys, "17654e5", &signature, &body, 1_765_400_000),
        Err(ProviderError::InvalidHeader("x-cb-timestamp"))
    );
    assert_eq!(
        prime(&keys, "1765400000", "AAAA", &body, 1_765_400_000),
        Err(ProviderError::InvalidHeader("x-cb-signature"))
    );
    assert_eq!(
        verify_prime(&keys, None, Some(signature.as_bytes()), &body, 0, 300),
        Err(ProviderError::MissingHeader("x-cb-timestamp"))
    );
    let no_id = br#"{"event_type":"TRANSACTION_CREATED"}"#.to_vec();
    let signature = prime_sign(SECRET, "1765400000", &no_id);
    assert_eq!(
        prime(&keys, "1765400000", &signature, &no_id, 1_765_400_000),
        Err(ProviderError::Body)
    );
}

#[test]
fn error_codes_fit_the_rejection_counts() {
    let all = [
        ProviderError::NoKeys,
        ProviderError::MissingHeader("x"),
        ProviderError::InvalidHeader("x"),
        ProviderError::Algorithm,
        ProviderError::UnknownKey,
        ProviderError::TimestampTooOld,
        ProviderError::TimestampTooNew,
        ProviderError::NoValidSignature,
        ProviderError::Body,
    ];
    for error in all {
        let code = error.code();
        assert!(
            !code.is_empty()
                && code.len() <= 40
                && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{code}"
        );
    }
    assert!(ProviderError::Body.is_malformed());
    assert!(!ProviderError::UnknownKey.is_malformed());
}
