//! Submitting raw transactions on alloy's provider (the same provider, HTTP client and TLS stack
//! as the evidence reader), with every result classified.

use crate::classify::SubmitClass;
use crate::http::ClientError;
use alloy_provider::transport::{RpcError, TransportError, TransportErrorKind};
use alloy_provider::{Provider, RootProvider};
use alloy_rpc_client::RpcClient;
use std::fmt;
use std::time::Duration;

/// Why a configured JSON-RPC client could not be set up.
#[derive(Debug)]
pub enum RpcSetupError {
    /// The URL is not an absolute `http://` or `https://` URL with a host.
    Url,
    /// The CA file could not be read.
    ReadCa(std::io::Error),
    /// The HTTP client refused the settings (an unparsable CA certificate, say).
    Client,
    /// A configured header name or value is not valid HTTP.
    Header,
}

impl fmt::Display for RpcSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcSetupError::Url => {
                f.write_str("the rpc URL is not an http:// or https:// URL with a host")
            }
            RpcSetupError::ReadCa(e) => write!(f, "cannot read the rpc_ca file: {e}"),
            RpcSetupError::Client => f.write_str("the rpc client refused its tls settings"),
            RpcSetupError::Header => f.write_str("an rpc_headers name or value is not valid HTTP"),
        }
    }
}

impl std::error::Error for RpcSetupError {}

/// The JSON-RPC endpoint where one network's transactions are submitted. Cheap to clone (shared
/// connections); `Debug` shows neither its URL nor its headers, which may carry a key.
#[derive(Clone)]
pub struct Rpc {
    provider: RootProvider,
}

impl fmt::Debug for Rpc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rpc").finish_non_exhaustive()
    }
}

impl Rpc {
    /// A client as a service configures it: every call (connect included) gives up after
    /// `timeout`; `ca_file`, when set, names the PEM CA that alone is trusted for an `https://`
    /// `url` (otherwise the system's roots); `headers` go with every call (a node provider's API
    /// key), marked sensitive so the HTTP client never shows their values. No call is retried or
    /// redirected.
    pub fn configured<K: AsRef<str>, V: AsRef<str>>(
        url: &str,
        timeout: Duration,
        ca_file: Option<&std::path::Path>,
        headers: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Rpc, RpcSetupError> {
        let url = reqwest::Url::parse(url).map_err(|_| RpcSetupError::Url)?;
        let http_like = matches!(url.scheme(), "http" | "https");
        if !http_like || url.host_str().is_none_or(str::is_empty) {
            return Err(RpcSetupError::Url);
        }
        let http = crate::http::client(timeout, ca_file, headers).map_err(|e| match e {
            ClientError::Header(_) => RpcSetupError::Header,
            ClientError::ReadCa(e) => RpcSetupError::ReadCa(e),
            ClientError::Client(_) => RpcSetupError::Client,
        })?;
        let provider = RootProvider::new(RpcClient::new_http_with_client(http, url));
        Ok(Rpc { provider })
    }

    /// `eth_sendRawTransaction` of exactly `raw`, classified.
    pub async fn send_raw_transaction(&self, raw: &[u8]) -> SubmitClass {
        match self.provider.send_raw_transaction(raw).await {
            Ok(_) => SubmitClass::Accepted,
            Err(e) => classify(&e),
        }
    }
}

/// The class of a failed submission. Exhaustive over alloy's error kinds, with one wildcard only
/// where alloy itself reserves room for new transport kinds (each ambiguous: the request may have
/// arrived). Only an error the node answered in words is classified by its words.
fn classify(error: &TransportError) -> SubmitClass {
    match error {
        // The node answered with a JSON-RPC error (with any HTTP status).
        RpcError::ErrorResp(payload) => SubmitClass::from_rpc_message(&payload.message),
        // A whole answer, but no hash (`null`, a short string): not an acceptance, and no known
        // refusal either.
        RpcError::NullResp => SubmitClass::Unclassified,
        RpcError::DeserError { text, .. } if is_json(text) => SubmitClass::Unclassified,
        // The body was cut or is not JSON: the request may still have been accepted.
        RpcError::DeserError { .. } => SubmitClass::ConnectionFailed,
        // Refused before anything was sent.
        RpcError::SerError(_) | RpcError::LocalUsageError(_) | RpcError::UnsupportedFeature(_) => {
            SubmitClass::Unclassified
        }
        RpcError::Transport(TransportErrorKind::Custom(cause)) => {
            let timed_out = cause
                .downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout);
            if timed_out {
                SubmitClass::Timeout
            } else {
                SubmitClass::ConnectionFailed
            }
        }
        // An HTTP status without a JSON-RPC error, a lost backend, a missing batch answer.
        RpcError::Transport(_) => SubmitClass::ConnectionFailed,
    }
}

/// Whether `text` is one whole JSON value.
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// What the test node does once it has read the whole request.
    enum Answer {
        /// Writes these bytes and closes.
        Raw(String),
        /// Keeps the connection open and says nothing.
        Silent,
        /// Closes the connection without a byte.
        Close,
        /// A `307` to this same node: followed, it would be a second request.
        RedirectToSelf,
    }

    /// A `200 OK` (or `status`) answer with `body` and its exact length.
    fn http(status: &str, body: &str) -> Answer {
        Answer::Raw(format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ))
    }

    /// Every request a test node read whole, one entry per connection.
    type Requests = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

    /// Reads one whole HTTP request from `stream`, records it in `requests`, then answers it with
    /// `answer`.
    async fn answer_one(
        mut stream: tokio::net::TcpStream,
        answer: &Answer,
        requests: &Requests,
    ) -> std::io::Result<()> {
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
        if let Ok(mut list) = requests.lock() {
            list.push(String::from_utf8_lossy(&seen).into_owned());
        }
        match answer {
            Answer::Raw(bytes) => stream.write_all(bytes.as_bytes()).await?,
            Answer::Silent => tokio::time::sleep(Duration::from_secs(30)).await,
            Answer::Close => {}
            Answer::RedirectToSelf => {
                let location = format!("http://{}/", stream.local_addr()?);
                let head = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                stream.write_all(head.as_bytes()).await?;
            }
        }
        Ok(())
    }

    /// A test node on `listener` answering every connection with `answer`.
    fn node(
        listener: tokio::net::TcpListener,
        answer: Answer,
    ) -> (tokio::task::JoinHandle<()>, Requests) {
        let requests = Requests::default();
        let recorded = requests.clone();
        let answer = std::sync::Arc::new(answer);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (answer, recorded) = (answer.clone(), recorded.clone());
                tokio::spawn(async move {
                    let _ = answer_one(stream, &answer, &recorded).await;
                });
            }
        });
        (task, requests)
    }

    /// Submits `[1, 2, 3]` through a client of a test node answering with `answer`; returns the
    /// class and every request the node received.
    async fn submit_to(
        answer: Answer,
    ) -> Result<(SubmitClass, Vec<String>), Box<dyn std::error::Error>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (task, requests) = node(listener, answer);
        let rpc = Rpc::configured(
            &url,
            Duration::from_millis(500),
            None,
            std::iter::empty::<(&str, &str)>(),
        )?;
        let class = rpc.send_raw_transaction(&[1, 2, 3]).await;
        // Time for a retry, had there been one, to arrive.
        tokio::time::sleep(Duration::from_millis(200)).await;
        task.abort();
        let seen = requests.lock().map(|l| l.clone()).unwrap_or_default();
        Ok((class, seen))
    }

    #[tokio::test]
    async fn every_answer_is_classified_and_only_a_hash_is_an_acceptance()
    -> Result<(), Box<dyn std::error::Error>> {
        let hash = format!("0x{}", "ab".repeat(32));
        let rpc_error = |code: i64, message: &str| {
            format!(r#"{{"jsonrpc":"2.0","id":0,"error":{{"code":{code},"message":"{message}"}}}}"#)
        };
        let cases = [
            (
                "a hash",
                http(
                    "200 OK",
                    &format!(r#"{{"jsonrpc":"2.0","id":0,"result":"{hash}"}}"#),
                ),
                SubmitClass::Accepted,
            ),
            (
                "already known",
                http("200 OK", &rpc_error(-32000, "already known")),
                SubmitClass::AlreadyKnown,
            ),
            (
                "a refusal under an HTTP error status",
                http(
                    "500 Internal Server Error",
                    &rpc_error(-32000, "nonce too low"),
                ),
                SubmitClass::NonceTooLow,
            ),
            (
                "replacement underpriced",
                http(
                    "200 OK",
                    &rpc_error(-32000, "replacement transaction underpriced"),
                ),
                SubmitClass::ReplacementUnderpriced,
            ),
            (
                "an unknown refusal",
                http("200 OK", &rpc_error(-32000, "insufficient funds")),
                SubmitClass::Unclassified,
            ),
            (
                "already known under an HTTP error status",
                http(
                    "503 Service Unavailable",
                    &rpc_error(-32000, "already known"),
                ),
                SubmitClass::AlreadyKnown,
            ),
            (
                "a hash under an HTTP error status",
                http(
                    "500 Internal Server Error",
                    &format!(r#"{{"jsonrpc":"2.0","id":0,"result":"{hash}"}}"#),
                ),
                SubmitClass::ConnectionFailed,
            ),
            (
                "a redirect (not followed)",
                Answer::RedirectToSelf,
                SubmitClass::ConnectionFailed,
            ),
            (
                "a null result",
                http("200 OK", r#"{"jsonrpc":"2.0","id":0,"result":null}"#),
                SubmitClass::Unclassified,
            ),
            (
                "a result that is not a hash",
                http("200 OK", r#"{"jsonrpc":"2.0","id":0,"result":"0x12"}"#),
                SubmitClass::Unclassified,
            ),
            (
                "a body that is not JSON",
                http("200 OK", "<html>gateway</html>"),
                SubmitClass::ConnectionFailed,
            ),
            (
                "an HTTP error without a JSON-RPC error",
                http("503 Service Unavailable", "busy"),
                SubmitClass::ConnectionFailed,
            ),
            (
                "a cut body",
                Answer::Raw(format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 200\r\nconnection: close\r\n\r\n{{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":\"{hash}"
                )),
                SubmitClass::ConnectionFailed,
            ),
            (
                "a closed connection",
                Answer::Close,
                SubmitClass::ConnectionFailed,
            ),
            ("no answer in time", Answer::Silent, SubmitClass::Timeout),
        ];
        for (what, answer, expected) in cases {
            let (class, requests) = submit_to(answer).await?;
            assert_eq!(class, expected, "{what}");
            assert_eq!(requests.len(), 1, "{what}: sent once, never retried");
            assert_eq!(
                class.verdict(),
                expected.verdict(),
                "{what}: only a hash or the node's 'already known' is BROADCAST"
            );
        }
        Ok(())
    }

    #[tokio::test]
    async fn the_exact_bytes_are_sent_once() -> Result<(), Box<dyn std::error::Error>> {
        let hash = format!("0x{}", "cd".repeat(32));
        let (class, requests) = submit_to(http(
            "200 OK",
            &format!(r#"{{"jsonrpc":"2.0","id":0,"result":"{hash}"}}"#),
        ))
        .await?;
        assert_eq!(class, SubmitClass::Accepted);
        assert_eq!(requests.len(), 1);
        let body = requests[0]
            .split_once("\r\n\r\n")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let value: serde_json::Value = serde_json::from_str(body)?;
        assert_eq!(value["method"], "eth_sendRawTransaction");
        assert_eq!(value["params"], serde_json::json!(["0x010203"]));
        Ok(())
    }

    #[tokio::test]
    async fn a_node_that_is_not_listening_is_a_failed_connection()
    -> Result<(), Box<dyn std::error::Error>> {
        // Bound, then dropped: nothing listens on the port.
        let port = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await?
            .local_addr()?
            .port();
        let rpc = Rpc::configured(
            &format!("http://127.0.0.1:{port}"),
            Duration::from_secs(2),
            None,
            std::iter::empty::<(&str, &str)>(),
        )?;
        assert_eq!(
            rpc.send_raw_transaction(&[1]).await,
            SubmitClass::ConnectionFailed
        );
        Ok(())
    }

    #[tokio::test]
    async fn configured_headers_go_with_every_call_and_are_not_shown()
    -> Result<(), Box<dyn std::error::Error>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (node, requests) = node(
            listener,
            http("200 OK", r#"{"jsonrpc":"2.0","id":0,"result":null}"#),
        );
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
        node.abort();
        let request = requests
            .lock()
            .map(|l| l.concat())
            .unwrap_or_default()
            .to_ascii_lowercase();
        assert!(
            request.contains("x-api-key: provider-secret-1234"),
            "{request}"
        );
        let shown = format!("{rpc:?}");
        assert!(!shown.contains("provider-secret-1234"), "{shown}");
        assert!(
            !shown.contains("127.0.0.1"),
            "the client's Debug shows its URL: {shown}"
        );
        Ok(())
    }

    #[test]
    fn invalid_headers_and_urls_are_refused() {
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
        for url in [
            "",
            "127.0.0.1:8545",
            "localhost:8545",
            "node.internal:8545",
            "not a url",
            "ws://127.0.0.1:8545",
            "file:///tmp/node",
        ] {
            assert!(
                matches!(
                    Rpc::configured(
                        url,
                        Duration::from_secs(1),
                        None,
                        std::iter::empty::<(&str, &str)>()
                    ),
                    Err(RpcSetupError::Url)
                ),
                "{url:?}"
            );
        }
    }
}
