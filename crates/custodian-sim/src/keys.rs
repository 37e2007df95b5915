//! RSA keys: the Fireblocks webhook signing keys (JWS RS512 with a detached payload, a JWKS with
//! rotation and overlap), and the API key's public key that verifies RS256 JWTs.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use anyhow::{Context, anyhow};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA512, RsaKeyPair};
use rsa::pkcs1::{DecodeRsaPrivateKey, DecodeRsaPublicKey};
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey};
use rsa::traits::PublicKeyParts;
use rsa::{RsaPrivateKey, RsaPublicKey};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::faults::Forgery;
use crate::state::lock;

/// Bits of generated keys.
const GENERATED_BITS: usize = 2048;

/// An RSA signing key.
#[derive(Debug)]
pub struct SigningKey {
    /// Its key id (`kid`).
    pub kid: String,
    pair: RsaKeyPair,
    n: Vec<u8>,
    e: Vec<u8>,
}

impl SigningKey {
    fn from_private(key: &RsaPrivateKey) -> anyhow::Result<SigningKey> {
        let der = key.to_pkcs8_der().context("encoding an RSA key")?;
        let pair = RsaKeyPair::from_pkcs8(der.as_bytes())
            .map_err(|e| anyhow!("RSA key refused by ring: {e}"))?;
        let n = key.n().to_bytes_be();
        let kid = format!("sim-{}", &hex::encode(Sha256::digest(&n))[..16]);
        Ok(SigningKey {
            kid,
            pair,
            n,
            e: key.e().to_bytes_be(),
        })
    }

    /// Reads a PKCS#8 or PKCS#1 private key PEM.
    pub fn from_pem(pem: &str) -> anyhow::Result<SigningKey> {
        let key = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem))
            .context("not an RSA private key PEM (PKCS#8 or PKCS#1)")?;
        Self::from_private(&key)
    }

    /// A new 2048-bit key (seconds of CPU in a debug build: run it off the async threads).
    pub fn generate() -> anyhow::Result<SigningKey> {
        let key = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, GENERATED_BITS)
            .context("generating an RSA key")?;
        Self::from_private(&key)
    }

    /// The detached JWS of `body` under `kid`: `protected..signature`.
    pub fn detached_jws(&self, kid: &str, body: &[u8]) -> anyhow::Result<String> {
        let protected = URL_SAFE_NO_PAD.encode(json!({"alg": "RS512", "kid": kid}).to_string());
        let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(body));
        let mut signature = vec![0; self.pair.public().modulus_len()];
        self.pair
            .sign(
                &RSA_PKCS1_SHA512,
                &SystemRandom::new(),
                input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| anyhow!("RSA signing failed"))?;
        Ok(format!(
            "{protected}..{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }

    fn jwk(&self) -> Value {
        json!({
            "kty": "RSA",
            "kid": self.kid,
            "use": "sig",
            "alg": "RS512",
            "n": URL_SAFE_NO_PAD.encode(&self.n),
            "e": URL_SAFE_NO_PAD.encode(&self.e),
        })
    }
}

#[derive(Debug)]
struct Ring {
    current: Arc<SigningKey>,
    /// Rotated-out keys and when they leave the JWKS (double's clock, ms).
    retired: Vec<(Arc<SigningKey>, i64)>,
    pool: VecDeque<String>,
}

/// The Fireblocks webhook keys.
#[derive(Debug)]
pub struct KeyRing {
    ring: Mutex<Ring>,
    forger: Mutex<Option<Arc<SigningKey>>>,
    forger_pem: Option<String>,
    /// Default overlap of a rotation (ms).
    pub overlap_ms: i64,
}

impl KeyRing {
    /// The first PEM of `pems` (or a generated key) signs; the others wait for rotations.
    pub fn new(
        pems: &[String],
        forger_pem: Option<String>,
        overlap_ms: i64,
    ) -> anyhow::Result<Self> {
        let mut pool: VecDeque<String> = pems.iter().cloned().collect();
        let current = match pool.pop_front() {
            Some(pem) => {
                SigningKey::from_pem(&pem).context("fireblocks.webhook_signing_keys_pem")?
            }
            None => SigningKey::generate()?,
        };
        if let Some(pem) = &forger_pem {
            SigningKey::from_pem(pem).context("fireblocks.webhook_forger_key_pem")?;
        }
        Ok(KeyRing {
            ring: Mutex::new(Ring {
                current: Arc::new(current),
                retired: Vec::new(),
                pool,
            }),
            forger: Mutex::new(None),
            forger_pem,
            overlap_ms,
        })
    }

    /// The `Fireblocks-Webhook-Signature` of `body` under the current key.
    pub fn sign(&self, body: &[u8]) -> anyhow::Result<String> {
        let current = lock(&self.ring).current.clone();
        current.detached_jws(&current.kid, body)
    }

    /// A signature of `body` the JWKS does not vouch for.
    pub async fn forge(&self, body: &[u8], forgery: Forgery) -> anyhow::Result<String> {
        let forger = self.forger().await?;
        let kid = match forgery {
            Forgery::WrongKey => lock(&self.ring).current.kid.clone(),
            Forgery::UnknownKid => format!("forged-{}", forger.kid),
        };
        forger.detached_jws(&kid, body)
    }

    async fn forger(&self) -> anyhow::Result<Arc<SigningKey>> {
        if let Some(key) = lock(&self.forger).clone() {
            return Ok(key);
        }
        let key = match &self.forger_pem {
            Some(pem) => SigningKey::from_pem(pem)?,
            None => tokio::task::spawn_blocking(SigningKey::generate).await??,
        };
        let key = Arc::new(key);
        *lock(&self.forger) = Some(key.clone());
        Ok(key)
    }

    /// A new current key; the old one stays in the JWKS until `now_ms + overlap_ms`. Gives the
    /// new and the old key ids.
    pub async fn rotate(&self, now_ms: i64, overlap_ms: i64) -> anyhow::Result<(String, String)> {
        let pem = lock(&self.ring).pool.pop_front();
        let key = match pem {
            Some(pem) => SigningKey::from_pem(&pem)?,
            None => tokio::task::spawn_blocking(SigningKey::generate).await??,
        };
        let key = Arc::new(key);
        let mut ring = lock(&self.ring);
        let old = std::mem::replace(&mut ring.current, key.clone());
        let old_kid = old.kid.clone();
        ring.retired.push((old, now_ms.saturating_add(overlap_ms)));
        Ok((key.kid.clone(), old_kid))
    }

    /// `GET /.well-known/jwks.json` at `now_ms`.
    pub fn jwks(&self, now_ms: i64) -> Value {
        let mut ring = lock(&self.ring);
        ring.retired.retain(|(_, until)| *until > now_ms);
        let mut keys = vec![ring.current.jwk()];
        keys.extend(ring.retired.iter().map(|(key, _)| key.jwk()));
        json!({ "keys": keys })
    }
}

/// The API key's registered public key (verifies RS256).
#[derive(Debug, Clone)]
pub struct PublicKey {
    n: Vec<u8>,
    e: Vec<u8>,
}

impl PublicKey {
    /// Reads an SPKI (`PUBLIC KEY`) or PKCS#1 (`RSA PUBLIC KEY`) PEM.
    pub fn from_pem(pem: &str) -> anyhow::Result<PublicKey> {
        let key = RsaPublicKey::from_public_key_pem(pem)
            .or_else(|_| RsaPublicKey::from_pkcs1_pem(pem))
            .context("not an RSA public key PEM (SPKI or PKCS#1)")?;
        Ok(PublicKey {
            n: key.n().to_bytes_be(),
            e: key.e().to_bytes_be(),
        })
    }

    /// Whether `signature` is an RSASSA-PKCS1-v1_5 SHA-256 signature of `message`.
    pub fn verify_rs256(&self, message: &[u8], signature: &[u8]) -> bool {
        let components = ring::signature::RsaPublicKeyComponents {
            n: &self.n,
            e: &self.e,
        };
        components
            .verify(
                &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                message,
                signature,
            )
            .is_ok()
    }
}
