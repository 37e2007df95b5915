//! Webhook v2 verification: valid (signed by `ring` and by `openssl`), wrong algorithm, unknown
//! key id, tampered body, wrong key, truncated and malformed headers; the key set and its fetch.

use crate::codec::b64url;
use crate::fireblocks::webhook::{
    FireblocksEventKind, Jwks, JwksError, JwksFetcher, verify_fireblocks_webhook,
};
use crate::testutil::{Canned, TestKey, key, other_key, serve};
use crate::types::WebhookError;
use opledger_domain::custodian::ProviderStatus;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RSA_PKCS1_SHA512, RsaKeyPair, RsaPublicKeyComponents};
use serde_json::json;
use std::time::Duration;

fn jwk(kid: &str, test_key: &TestKey) -> serde_json::Value {
    let pair = test_key.key_pair();
    let public = RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
    json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS512",
           "n": b64url(&public.n), "e": b64url(&public.e)})
}

fn jwks(keys: &[(&str, &TestKey)]) -> Jwks {
    let keys: Vec<_> = keys.iter().map(|(kid, k)| jwk(kid, k)).collect();
    Jwks::parse(json!({ "keys": keys }).to_string().as_bytes()).expect("jwks")
}

fn protected(alg: &str, kid: &str) -> String {
    b64url(json!({"alg": alg, "kid": kid}).to_string().as_bytes())
}

fn sign_with(pair: &RsaKeyPair, protected: &str, body: &[u8], sha256: bool) -> String {
    let input = format!("{protected}.{}", b64url(body));
    let mut signature = vec![0; pair.public().modulus_len()];
    let alg = if sha256 {
        &RSA_PKCS1_SHA256
    } else {
        &RSA_PKCS1_SHA512
    };
    pair.sign(alg, &SystemRandom::new(), input.as_bytes(), &mut signature)
        .expect("sign");
    format!("{protected}..{}", b64url(&signature))
}

fn signed(test_key: &TestKey, kid: &str, body: &[u8]) -> String {
    sign_with(&test_key.key_pair(), &protected("RS512", kid), body, false)
}

fn event() -> Vec<u8> {
    json!({
        "id": "5b1f1c51-3f5e-4a3c-9b7e-0a8f2e6d3c11",
        "eventType": "transaction.status.updated",
        "eventVersion": 1,
        "resourceId": "fb-tx-1",
        "data": {
            "id": "fb-tx-1",
            "externalTxId": "0f8fad5b-d9cb-469f-a165-70867728950e",
            "status": "CONFIRMING",
            "subStatus": "",
            "txHash": format!("0x{}", "ab".repeat(32)),
            "assetId": "ETH",
            "destinationAddress": "0x1111111111111111111111111111111111111111",
            "amountInfo": {"amount": "1"},
            "createdAt": 1_700_000_000_000_i64,
            "lastUpdated": 1_700_000_000_000_i64
        },
        "createdAt": 1_700_000_000_500_i64,
        "workspaceId": "ws-1"
    })
    .to_string()
    .into_bytes()
}

#[test]
fn a_valid_signature_verifies_and_the_event_reads() {
    let keys = jwks(&[("k1", key())]);
    let body = event();
    let verified =
        verify_fireblocks_webhook(&body, &signed(key(), "k1", &body), &keys).expect("verified");
    assert_eq!(verified.kind, FireblocksEventKind::TransactionStatusUpdated);
    assert_eq!(
        verified.id.to_string(),
        "5b1f1c51-3f5e-4a3c-9b7e-0a8f2e6d3c11"
    );
    assert_eq!(verified.resource_id.as_deref(), Some("fb-tx-1"));
    assert_eq!(verified.workspace_id.as_deref(), Some("ws-1"));
    assert_eq!(verified.event_version, Some(1));
    let tx = verified.transaction.expect("transaction");
    assert_eq!(tx.status, Some(ProviderStatus::Confirming));
    assert_eq!(tx.tx_hash, Some([0xab; 32]));
    assert_eq!(tx.sub_status, None);
    assert_eq!(
        tx.external_tx_id.as_deref(),
        Some("0f8fad5b-d9cb-469f-a165-70867728950e")
    );
    assert!(!format!("{tx:?}").contains("0f8fad5b"));
}

#[test]
fn a_signature_made_by_openssl_verifies_too() {
    let keys = jwks(&[("k1", key())]);
    let body = event();
    let protected = protected("RS512", "k1");
    let input = format!("{protected}.{}", b64url(&body));
    let signature = key().openssl_sign("-sha512", input.as_bytes());
    let header = format!("{protected}..{}", b64url(&signature));
    assert!(verify_fireblocks_webhook(&body, &header, &keys).is_ok());
    // And the verifier's own signatures verify under openssl.
    let ours = signed(key(), "k1", &body);
    let signature =
        crate::codec::b64url_decode(ours.rsplit('.').next().expect("sig")).expect("b64");
    assert!(key().openssl_verifies("-sha512", input.as_bytes(), &signature));
}

#[test]
fn only_rs512_is_accepted() {
    let keys = jwks(&[("k1", key())]);
    let body = event();
    let pair = key().key_pair();
    let rs256 = sign_with(&pair, &protected("RS256", "k1"), &body, true);
    assert_eq!(
        verify_fireblocks_webhook(&body, &rs256, &keys),
        Err(WebhookError::Algorithm)
    );
    // A header claiming RS512 over an RS256 signature does not verify either.
    let lying = sign_with(&pair, &protected("RS512", "k1"), &body, true);
    assert_eq!(
        verify_fireblocks_webhook(&body, &lying, &keys),
        Err(WebhookError::Signature)
    );
    for alg in ["none", "HS512", "rs512", "PS512"] {
        let header = format!("{}..{}", protected(alg, "k1"), b64url(b"x"));
        assert_eq!(
            verify_fireblocks_webhook(&body, &header, &keys),
            Err(WebhookError::Algorithm),
            "{alg}"
        );
    }
}

#[test]
fn an_unknown_kid_is_told_apart_so_the_key_set_can_be_refreshed() {
    let body = event();
    let header = signed(other_key(), "k2", &body);
    assert_eq!(
        verify_fireblocks_webhook(&body, &header, &jwks(&[("k1", key())])),
        Err(WebhookError::UnknownKey)
    );
    // After the refresh (a rotation: both keys listed during the overlap) it verifies.
    let rotated = jwks(&[("k1", key()), ("k2", other_key())]);
    assert!(verify_fireblocks_webhook(&body, &header, &rotated).is_ok());
    assert!(verify_fireblocks_webhook(&body, &signed(key(), "k1", &body), &rotated).is_ok());
}

#[test]
fn a_tampered_body_or_the_wrong_key_does_not_verify() {
    let keys = jwks(&[("k1", key())]);
    let body = event();
    let header = signed(key(), "k1", &body);
    let mut tampered = body.clone();
    let at = tampered
        .iter()
        .position(|&b| b == b'C')
        .expect("C of CONFIRMING");
    tampered[at] = b'D';
    assert_eq!(
        verify_fireblocks_webhook(&tampered, &header, &keys),
        Err(WebhookError::Signature)
    );
    let mut longer = body.clone();
    longer.push(b' ');
    assert_eq!(
        verify_fireblocks_webhook(&longer, &header, &keys),
        Err(WebhookError::Signature)
    );
    let wrong_key = signed(other_key(), "k1", &body);
    assert_eq!(
        verify_fireblocks_webhook(&body, &wrong_key, &keys),
        Err(WebhookError::Signature)
    );
    // A protected header swapped for another kid's invalidates the signature.
    let two = jwks(&[("k1", key()), ("k2", key())]);
    let swapped = header.replacen(&protected("RS512", "k1"), &protected("RS512", "k2"), 1);
    assert_eq!(
        verify_fireblocks_webhook(&body, &swapped, &two),
        Err(WebhookError::Signature)
    );
}

#[test]
fn truncated_or_malformed_headers_are_refused() {
    let keys = jwks(&[("k1", key())]);
    let body = event();
    let header = signed(key(), "k1", &body);
    let (protected_part, signature) = header.split_once("..").expect("detached");
    let embedded = format!("{protected_part}.{}.{signature}", b64url(&body));
    let with_crit = sign_with(
        &key().key_pair(),
        &b64url(br#"{"alg":"RS512","kid":"k1","crit":["exp"]}"#),
        &body,
        false,
    );
    let no_kid = sign_with(
        &key().key_pair(),
        &b64url(br#"{"alg":"RS512"}"#),
        &body,
        false,
    );
    for bad in [
        String::new(),
        "abc".to_owned(),
        protected_part.to_owned(),
        format!("{protected_part}.."),
        format!("{protected_part}."),
        format!("..{signature}"),
        embedded,
        format!("{header}.x"),
        format!("{protected_part}..{signature}="),
        format!("!!..{signature}"),
        with_crit,
        no_kid,
        "a".repeat(10_000),
    ] {
        assert_eq!(
            verify_fireblocks_webhook(&body, &bad, &keys),
            Err(WebhookError::Header),
            "{bad:.40}"
        );
    }
    for cut in [1, 2, 3, 10, signature.len() / 2] {
        let truncated = &header[..header.len() - cut];
        let error = verify_fireblocks_webhook(&body, truncated, &keys).expect_err("truncated");
        assert!(
            matches!(error, WebhookError::Header | WebhookError::Signature),
            "{cut}: {error:?}"
        );
    }
}

#[test]
fn verified_bodies_that_are_not_events_are_refused_and_other_events_pass_through() {
    let keys = jwks(&[("k1", key())]);
    for body in [
        &b"not json"[..],
        br#"{"id":"x","eventType":"transaction.created"}"#,
    ] {
        let header = signed(key(), "k1", body);
        assert_eq!(
            verify_fireblocks_webhook(body, &header, &keys),
            Err(WebhookError::Body)
        );
    }
    let missing_data =
        br#"{"id":"5b1f1c51-3f5e-4a3c-9b7e-0a8f2e6d3c11","eventType":"transaction.created"}"#;
    let header = signed(key(), "k1", missing_data);
    assert_eq!(
        verify_fireblocks_webhook(missing_data, &header, &keys),
        Err(WebhookError::Body)
    );
    let other = br#"{"id":"5b1f1c51-3f5e-4a3c-9b7e-0a8f2e6d3c11","eventType":"vault_account.created","data":{"x":1}}"#;
    let header = signed(key(), "k1", other);
    let verified = verify_fireblocks_webhook(other, &header, &keys).expect("other");
    assert_eq!(verified.kind, FireblocksEventKind::Other);
    assert_eq!(verified.transaction, None);
}

#[test]
fn key_sets_keep_only_rsa_signing_keys_for_rs512() {
    let usable = jwk("k1", key());
    let mut ec = usable.clone();
    ec["kty"] = json!("EC");
    let mut encryption = usable.clone();
    encryption["use"] = json!("enc");
    encryption["kid"] = json!("enc");
    let mut rs256 = usable.clone();
    rs256["alg"] = json!("RS256");
    rs256["kid"] = json!("rs256");
    let mut bare = usable.clone();
    bare.as_object_mut().expect("object").remove("alg");
    bare.as_object_mut().expect("object").remove("use");
    bare["kid"] = json!("bare");
    let document = json!({"keys": [ec, encryption, rs256, usable.clone(), bare]}).to_string();
    let keys = Jwks::parse(document.as_bytes()).expect("jwks");
    assert_eq!(keys.kids().collect::<Vec<_>>(), ["k1", "bare"]);

    let twice = json!({"keys": [usable.clone(), usable.clone()]}).to_string();
    assert_eq!(Jwks::parse(twice.as_bytes()), Err(JwksError::DuplicateKid));
    assert_eq!(Jwks::parse(br#"{"keys":[]}"#), Err(JwksError::NoKeys));
    assert_eq!(Jwks::parse(b"[]"), Err(JwksError::Malformed));
    let mut no_n = usable.clone();
    no_n.as_object_mut().expect("object").remove("n");
    let document = json!({"keys": [no_n]}).to_string();
    assert_eq!(Jwks::parse(document.as_bytes()), Err(JwksError::Malformed));
    let mut padded = usable;
    padded["e"] = json!("AQAB==");
    let document = json!({"keys": [padded]}).to_string();
    assert_eq!(Jwks::parse(document.as_bytes()), Err(JwksError::Malformed));
}

#[tokio::test]
async fn the_fetcher_gets_the_key_set_once_per_call() {
    let document = json!({"keys": [jwk("k1", key())]}).to_string();
    let server = serve(vec![Canned::json(200, &document), Canned::json(500, "")]).await;
    let url = format!("{}/.well-known/jwks.json", server.base);
    let fetcher = JwksFetcher::new(&url, Duration::from_secs(2), None).expect("fetcher");
    let keys = fetcher.fetch().await.expect("jwks");
    assert_eq!(keys.kids().collect::<Vec<_>>(), ["k1"]);
    assert_eq!(fetcher.fetch().await, Err(JwksError::Fetch));
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].uri, "/.well-known/jwks.json");
    assert!(JwksFetcher::new("ftp://x/jwks", Duration::from_secs(1), None).is_err());
}
