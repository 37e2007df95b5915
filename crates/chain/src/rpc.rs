//! A minimal EVM JSON-RPC client: submitting raw transactions, with every failure classified.

use crate::classify::SubmitClass;
use serde_json::{Value, json};
use std::time::Duration;

/// Installs ring as the process's rustls crypto provider. reqwest's TLS needs one before any
/// client is built (in every process that links this crate, whichever crate builds the client);
/// installing it again is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Why a configured JSON-RPC client could not be set up.
#[derive(Debug)]
pub enum RpcSetupError {
    /// The CA file could not be read.
    ReadCa(std::io::Error),
    /// The HTTP client refused the settings (an unparsable CA certificate, say).
    Client,
    /// A configured header name or value is not valid HTTP.
    Header,
}

impl std::fmt::Display for RpcSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcSetupError::ReadCa(e) => write!(f, "cannot read the rpc_ca file: {e}"),
            RpcSetupError::Client => f.write_str("the rpc client refused its tls settings"),
            RpcSetupError::Header => f.write_str("an rpc_headers name or value is not valid HTTP"),
        }
    }
}

impl std::error::Error for RpcSetupError {}

/// A JSON-RPC endpoint of one network.
#[derive(Debug, Clone)]
pub struct Rpc {
    http: reqwest::Client,
    url: String,
}

impl Rpc {
    /// A client of `url` whose calls give up after `timeout`. An `https://` URL is verified
    /// against the system's root certificates.
    pub fn new(url: &str, timeout: Duration) -> Result<Rpc, reqwest::Error> {
        Rpc::build(url, timeout, None, reqwest::header::HeaderMap::new())
    }

    /// A client of an `https://` `url` whose certificate must chain to the CA in `ca_pem` (and
    /// to no other root): a node behind a private CA.
    pub fn with_ca(url: &str, timeout: Duration, ca_pem: &[u8]) -> Result<Rpc, reqwest::Error> {
        Rpc::build(
            url,
            timeout,
            Some(ca_pem),
            reqwest::header::HeaderMap::new(),
        )
    }

    /// A client as a service configures it: `ca_file`, when set, names the PEM CA that alone is
    /// trusted for an `https://` `url`; `headers` go with every call (a node provider's API key),
    /// marked sensitive so the HTTP client never shows their values.
    pub fn configured<K: AsRef<str>, V: AsRef<str>>(
        url: &str,
        timeout: Duration,
        ca_file: Option<&std::path::Path>,
        headers: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Rpc, RpcSetupError> {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_ref().as_bytes())
                .map_err(|_| RpcSetupError::Header)?;
            let mut value = reqwest::header::HeaderValue::from_str(value.as_ref())
                .map_err(|_| RpcSetupError::Header)?;
            value.set_sensitive(true);
            map.insert(name, value);
        }
        let pem = match ca_file {
            None => None,
            Some(path) => Some(std::fs::read(path).map_err(RpcSetupError::ReadCa)?),
        };
        Rpc::build(url, timeout, pem.as_deref(), map).map_err(|_| RpcSetupError::Client)
    }

    fn build(
        url: &str,
        timeout: Duration,
        ca_pem: Option<&[u8]>,
        headers: reqwest::header::HeaderMap,
    ) -> Result<Rpc, reqwest::Error> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .default_headers(headers);
        if let Some(pem) = ca_pem {
            builder = builder.tls_certs_only(reqwest::Certificate::from_pem_bundle(pem)?);
        }
        Ok(Rpc {
            http: builder.build()?,
            url: url.to_owned(),
        })
    }

    /// `eth_sendRawTransaction` of exactly `raw`, classified.
    pub async fn send_raw_transaction(&self, raw: &[u8]) -> SubmitClass {
        let body = json!({
            "jsonrpc": "2.0",
            "id": 1,
            "method": "eth_sendRawTransaction",
            "params": [format!("0x{}", hex::encode(raw))],
        });
        let response = match self.http.post(&self.url).json(&body).send().await {
            Ok(response) => response,
            Err(e) if e.is_timeout() => return SubmitClass::Timeout,
            Err(_) => return SubmitClass::ConnectionFailed,
        };
        let value: Value = match response.json().await {
            Ok(value) => value,
            Err(e) if e.is_timeout() => return SubmitClass::Timeout,
            // The body was cut or is not JSON: the request may still have been accepted.
            Err(_) => return SubmitClass::ConnectionFailed,
        };
        if value.get("result").and_then(Value::as_str).is_some() {
            return SubmitClass::Accepted;
        }
        let message = value
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        SubmitClass::from_rpc_message(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Answers one JSON-RPC request with `null` and returns the request as received.
    async fn one_request(listener: tokio::net::TcpListener) -> std::io::Result<String> {
        let (mut stream, _) = listener.accept().await?;
        let mut seen = Vec::new();
        let mut buf = [0_u8; 4096];
        loop {
            let n = stream.read(&mut buf).await?;
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_owned())
                    })
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= length || n == 0 {
                    break;
                }
            }
        }
        let answer = r#"{"jsonrpc":"2.0","id":1,"result":null}"#;
        stream
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                )
                .as_bytes(),
            )
            .await?;
        Ok(String::from_utf8_lossy(&seen).into_owned())
    }

    #[tokio::test]
    async fn configured_headers_go_with_every_call_and_are_not_shown()
    -> Result<(), Box<dyn std::error::Error>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = tokio::spawn(one_request(listener));
        let rpc = Rpc::configured(
            &url,
            Duration::from_secs(5),
            None,
            [("x-api-key", "provider-secret-1234")],
        )?;
        // The answer carries no hash: not an acceptance.
        assert_ne!(
            rpc.send_raw_transaction(&[1, 2, 3]).await,
            SubmitClass::Accepted
        );
        let request = server.await??.to_ascii_lowercase();
        assert!(
            request.contains("x-api-key: provider-secret-1234"),
            "{request}"
        );
        assert!(
            !format!("{rpc:?}").contains("provider-secret-1234"),
            "the client's Debug shows the key"
        );
        Ok(())
    }

    #[test]
    fn invalid_headers_are_refused() {
        for (name, value) in [("bad name", "v"), ("x-api-key", "line\nbreak")] {
            assert!(matches!(
                Rpc::configured(
                    "http://127.0.0.1:1",
                    Duration::from_secs(1),
                    None,
                    [(name, value)]
                ),
                Err(RpcSetupError::Header)
            ));
        }
    }
}
