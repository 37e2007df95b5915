//! Fireblocks request tokens: a JWT signed RS256 (RSASSA-PKCS1-v1_5, SHA-256) by the API secret,
//! claims `uri`, `nonce`, `iat`, `exp = iat + 29`, `sub` (the API key) and `bodyHash`.

use crate::codec::{b64url, sha256};
use crate::config::SetupError;
use crate::secret::SecretBytes;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use serde::Serialize;
use std::fmt;
use uuid::Uuid;
use zeroize::Zeroizing;

/// How long a token lives: the provider refuses `exp - iat > 30`.
pub const TOKEN_LIFETIME_SECS: u64 = 29;

/// The token header, always the same.
const HEADER: &str = r#"{"alg":"RS256","typ":"JWT"}"#;

/// The setting the API secret comes from (named by errors).
const SECRET_FIELD: &str = "api_secret_file";

/// The API key and secret of one Fireblocks account. `Debug` shows neither.
pub struct FireblocksSigner {
    api_key: Zeroizing<String>,
    key_pair: RsaKeyPair,
    rng: SystemRandom,
}

impl fmt::Debug for FireblocksSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FireblocksSigner(<redacted>)")
    }
}

/// The claims of one token, in the order they are written.
#[derive(Debug, Serialize)]
pub struct Claims<'a> {
    /// The path and query as sent.
    pub uri: &'a str,
    /// A fresh UUID v4.
    pub nonce: String,
    /// Issued at, unix seconds.
    pub iat: u64,
    /// Expiry: `iat + 29`.
    pub exp: u64,
    /// The API key.
    pub sub: &'a str,
    /// Lowercase hex SHA-256 of the body sent (of the empty string for a GET).
    #[serde(rename = "bodyHash")]
    pub body_hash: String,
}

impl<'a> Claims<'a> {
    /// The claims of a request to `uri` with `body`.
    pub fn new(uri: &'a str, body: &[u8], nonce: Uuid, iat: u64, sub: &'a str) -> Claims<'a> {
        Claims {
            uri,
            nonce: nonce.hyphenated().to_string(),
            iat,
            exp: iat.saturating_add(TOKEN_LIFETIME_SECS),
            sub,
            body_hash: hex::encode(sha256(body)),
        }
    }
}

impl FireblocksSigner {
    /// The signer of the account with `api_key` whose secret is the PKCS#8 PEM `pem`.
    pub fn new(api_key: &SecretBytes, pem: &SecretBytes) -> Result<FireblocksSigner, SetupError> {
        let Some(api_key) = api_key.expose_str() else {
            return Err(SetupError::Invalid {
                field: "api_key_file",
                problem: "the API key is not UTF-8",
            });
        };
        let der = pkcs8_from_pem(pem.expose()).map_err(|problem| SetupError::Invalid {
            field: SECRET_FIELD,
            problem,
        })?;
        let key_pair = RsaKeyPair::from_pkcs8(&der).map_err(|_| SetupError::Invalid {
            field: SECRET_FIELD,
            problem: "not an RSA private key of 2048 to 8192 bits in PKCS#8",
        })?;
        Ok(FireblocksSigner {
            api_key: Zeroizing::new(api_key.to_owned()),
            key_pair,
            rng: SystemRandom::new(),
        })
    }

    /// The API key (`X-API-Key`, the token's `sub`).
    pub fn api_key(&self) -> &str {
        &self.api_key
    }

    /// The token of a request to `uri` (path and query as sent) with `body`, issued at `iat`
    /// (unix seconds) under `nonce`.
    pub fn token(
        &self,
        uri: &str,
        body: &[u8],
        nonce: Uuid,
        iat: u64,
    ) -> Result<String, ring::error::Unspecified> {
        let claims = Claims::new(uri, body, nonce, iat, &self.api_key);
        let claims = serde_json::to_vec(&claims).map_err(|_| ring::error::Unspecified)?;
        let signing_input = format!("{}.{}", b64url(HEADER.as_bytes()), b64url(&claims));
        let mut signature = vec![0_u8; self.key_pair.public().modulus_len()];
        self.key_pair.sign(
            &RSA_PKCS1_SHA256,
            &self.rng,
            signing_input.as_bytes(),
            &mut signature,
        )?;
        Ok(format!("{signing_input}.{}", b64url(&signature)))
    }
}

/// The DER inside a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), in zeroizing memory. Errors say
/// what kind of file it is, never what it holds.
pub fn pkcs8_from_pem(pem: &[u8]) -> Result<Zeroizing<Vec<u8>>, &'static str> {
    const BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
    const END: &str = "-----END PRIVATE KEY-----";
    let Ok(text) = std::str::from_utf8(pem) else {
        return Err("not a PEM file");
    };
    if text.contains("BEGIN RSA PRIVATE KEY") {
        return Err("a PKCS#1 key: convert it to PKCS#8 (openssl pkcs8 -topk8 -nocrypt)");
    }
    if text.contains("BEGIN ENCRYPTED PRIVATE KEY") {
        return Err("an encrypted key: store it unencrypted in a protected file");
    }
    let (Some(start), Some(end)) = (text.find(BEGIN), text.find(END)) else {
        return Err("not a PKCS#8 PEM (BEGIN PRIVATE KEY)");
    };
    let start = start + BEGIN.len();
    if end < start {
        return Err("not a PKCS#8 PEM (BEGIN PRIVATE KEY)");
    }
    let encoded: Zeroizing<String> = Zeroizing::new(
        text[start..end]
            .chars()
            .filter(|c| !c.is_ascii_whitespace())
            .collect(),
    );
    let mut der = Zeroizing::new(Vec::new());
    STANDARD
        .decode_vec(encoded.as_bytes(), &mut der)
        .map_err(|_| "the PEM body is not base64")?;
    Ok(der)
}
