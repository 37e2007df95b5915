//! A webhook receiver for the tests, and signature checks written independently of the double
//! (RS512 with the `rsa` crate, HMACs with `hmac`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http::{HeaderMap, StatusCode};
use rsa::BigUint;
use rsa::signature::Verifier;
use serde_json::Value;

/// One delivery received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map_or("", String::as_str)
    }
}

#[derive(Debug, Default)]
struct Inner {
    received: Vec<Received>,
    statuses: VecDeque<u16>,
}

/// An HTTP receiver on 127.0.0.1.
#[derive(Debug, Clone)]
pub struct Inbox {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let headers = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let mut inner = inner.lock().expect("inbox lock");
    inner.received.push(Received {
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let status = inner.statuses.pop_front().unwrap_or(200);
    StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
}

impl Inbox {
    pub async fn start() -> anyhow::Result<Inbox> {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let router = Router::new()
            .route("/hook", post(receive))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Inbox { url, inner })
    }

    /// The next deliveries are answered with these statuses (then 200).
    pub fn answer_next(&self, statuses: &[u16]) {
        self.inner
            .lock()
            .expect("inbox lock")
            .statuses
            .extend(statuses);
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().expect("inbox lock").received.clone()
    }

    /// Waits (20 s at most) until `done` holds for what was received.
    pub async fn wait(&self, done: impl Fn(&[Received]) -> bool) -> anyhow::Result<Vec<Received>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let received = self.received();
            if done(&received) {
                return Ok(received);
            }
            if Instant::now() > deadline {
                let bodies: Vec<&str> = received.iter().map(|r| r.body.as_str()).collect();
                bail!("inbox never got there: {bodies:#?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Verifies a `Fireblocks-Webhook-Signature` against a JWKS; gives the key id used.
pub fn verify_fireblocks(jwks: &Value, header: &str, body: &str) -> anyhow::Result<String> {
    let (protected, signature) = header.split_once("..").context("not a detached JWS")?;
    let head: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(protected)?)?;
    anyhow::ensure!(head["alg"] == "RS512", "alg {head}");
    let kid = head["kid"].as_str().context("no kid")?;
    let jwk = jwks["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|k| k["kid"] == kid)
        .with_context(|| format!("kid {kid} not in the JWKS"))?;
    let n = BigUint::from_bytes_be(&URL_SAFE_NO_PAD.decode(jwk["n"].as_str().context("n")?)?);
    let e = BigUint::from_bytes_be(&URL_SAFE_NO_PAD.decode(jwk["e"].as_str().context("e")?)?);
    let key = rsa::pkcs1v15::VerifyingKey::<sha2_010::Sha512>::new(rsa::RsaPublicKey::new(n, e)?);
    let input = format!("{protected}.{}", URL_SAFE_NO_PAD.encode(body));
    let signature =
        rsa::pkcs1v15::Signature::try_from(URL_SAFE_NO_PAD.decode(signature)?.as_slice())?;
    key.verify(input.as_bytes(), &signature)?;
    Ok(kid.to_owned())
}

fn hmac(key: &str, parts: &[&[u8]]) -> Vec<u8> {
    use hmac::{Hmac, KeyInit, Mac};
    let mut mac = <Hmac<sha2::Sha256>>::new_from_slice(key.as_bytes()).expect("HMAC takes any key");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// Whether a BitGo webhook carries the HMAC of `secret`.
pub fn bitgo_signed(received: &Received, secret: &str) -> bool {
    received.header("x-signature-sha256") == hex::encode(hmac(secret, &[received.body.as_bytes()]))
}

/// Whether a Prime webhook carries the HMAC of `secret` over timestamp + body.
pub fn prime_signed(received: &Received, secret: &str) -> bool {
    let timestamp = received.header("x-cb-timestamp");
    let tag = hmac(secret, &[timestamp.as_bytes(), received.body.as_bytes()]);
    received.header("x-cb-signature") == STANDARD.encode(tag)
}
