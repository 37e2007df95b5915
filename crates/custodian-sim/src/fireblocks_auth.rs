//! Fireblocks request authentication: `X-API-Key` and an RS256 JWT over the URI and body hash.

use base64::Engine;
use base64::alphabet::URL_SAFE;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use http::HeaderMap;
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::keys::PublicKey;

/// base64url, padding optional.
const B64URL: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The longest lifetime a token may claim (`exp - iat`).
const MAX_LIFETIME_SECS: i64 = 30;

#[derive(Debug, Deserialize)]
struct JwtHeader {
    alg: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Claims {
    uri: String,
    nonce: Value,
    iat: i64,
    exp: i64,
    sub: String,
    body_hash: String,
}

/// Checks a request; gives the token's nonce (the caller refuses one seen before) or why not.
pub fn verify(
    key: &PublicKey,
    api_key: &str,
    headers: &HeaderMap,
    uri: &str,
    body: &[u8],
    now_secs: i64,
) -> Result<String, &'static str> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let sent_key = header("x-api-key").ok_or("no X-API-Key")?;
    if sent_key != api_key {
        return Err("unknown API key");
    }
    let token = header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or("no bearer token")?;
    let mut parts = token.split('.');
    let (Some(head), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a JWT");
    };
    let decode = |part: &str| B64URL.decode(part).map_err(|_| "bad base64url");
    let jwt_header: JwtHeader =
        serde_json::from_slice(&decode(head)?).map_err(|_| "bad JWT header")?;
    if jwt_header.alg != "RS256" {
        return Err("alg is not RS256");
    }
    let signed = &token[..head.len() + 1 + claims.len()];
    if !key.verify_rs256(signed.as_bytes(), &decode(signature)?) {
        return Err("bad signature");
    }
    let claims: Claims = serde_json::from_slice(&decode(claims)?).map_err(|_| "bad claims")?;
    if claims.sub != sent_key {
        return Err("sub is not the API key");
    }
    if claims.uri != uri {
        return Err("uri does not match");
    }
    let body_hash = hex::encode(Sha256::digest(body));
    if !claims.body_hash.eq_ignore_ascii_case(&body_hash) {
        return Err("bodyHash does not match");
    }
    if claims.exp <= now_secs {
        return Err("expired");
    }
    if claims.exp.saturating_sub(claims.iat) > MAX_LIFETIME_SECS {
        return Err("lifetime over 30 s");
    }
    match claims.nonce {
        Value::String(nonce) if !nonce.is_empty() => Ok(nonce),
        Value::Number(nonce) => Ok(nonce.to_string()),
        _ => Err("no nonce"),
    }
}
