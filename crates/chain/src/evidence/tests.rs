//! Configuration checks of the evidence reader (no node needed); the reads themselves are tested
//! against a real anvil behind faulty proxies in `tests/evidence`.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn config(urls: &[&str], quorum: usize) -> EvidenceConfig {
    EvidenceConfig {
        urls: urls.iter().map(|u| (*u).to_owned()).collect(),
        chain_id: 31337,
        quorum,
        finality: Finality::Confirmations(2),
        max_lag_blocks: 2,
        timeout: Duration::from_secs(2),
        ca_file: None,
        headers: Vec::new(),
        allow_clear_text: false,
    }
}

fn refused(config: &EvidenceConfig) -> Option<EvidenceSetupError> {
    EvidenceReader::new(config).err()
}

#[test]
fn loopback_clear_text_and_https_are_accepted() -> Result<(), EvidenceSetupError> {
    let reader = EvidenceReader::new(&config(
        &[
            "http://127.0.0.1:8545",
            "http://127.8.9.10:8545",
            "http://[::1]:8545",
            "http://LocalHost:8545",
            "https://node.example.com/v3/key",
        ],
        2,
    ))?;
    assert_eq!(reader.endpoints(), 5);
    assert_eq!(reader.quorum(), 2);
    assert_eq!(reader.finality(), Finality::Confirmations(2));
    assert_eq!(reader.max_lag_blocks(), 2);
    Ok(())
}

#[test]
fn clear_text_off_loopback_is_refused() {
    for url in [
        "http://10.0.0.1:8545",
        "http://node.example.com",
        "http://localhost.example.com",
        "http://[::2]:8545",
        "ws://127.0.0.1:8546",
    ] {
        let error = refused(&config(&["https://a.example.com", url], 1));
        assert!(
            matches!(error, Some(EvidenceSetupError::NotHttps { endpoint: 1 })),
            "{url}: {error:?}"
        );
    }
    for url in ["not a url", "/relative", "unix:/var/run/node.sock"] {
        let error = refused(&config(&[url], 1));
        assert!(
            matches!(
                error,
                Some(EvidenceSetupError::BadUrl { endpoint: 0 })
                    | Some(EvidenceSetupError::NotHttps { endpoint: 0 })
            ),
            "{url}: {error:?}"
        );
    }
}

#[test]
fn quorum_zero_or_above_the_endpoints_is_refused() {
    assert!(matches!(
        refused(&config(&["http://127.0.0.1:1"], 0)),
        Some(EvidenceSetupError::QuorumZero)
    ));
    assert!(matches!(
        refused(&config(&["http://127.0.0.1:1", "http://127.0.0.1:2"], 3)),
        Some(EvidenceSetupError::QuorumAboveEndpoints {
            quorum: 3,
            endpoints: 2
        })
    ));
    assert!(matches!(
        refused(&config(&[], 1)),
        Some(EvidenceSetupError::NoEndpoints)
    ));
    let mut no_chain = config(&["http://127.0.0.1:1"], 1);
    no_chain.chain_id = 0;
    assert!(matches!(
        refused(&no_chain),
        Some(EvidenceSetupError::ZeroChainId)
    ));
}

#[test]
fn zero_confirmations_and_zero_timeout_are_refused() {
    let mut zero = config(&["http://127.0.0.1:1"], 1);
    zero.finality = Finality::Confirmations(0);
    assert!(matches!(
        refused(&zero),
        Some(EvidenceSetupError::ZeroConfirmations)
    ));
    let mut tagged = config(&["http://127.0.0.1:1"], 1);
    tagged.finality = Finality::FinalizedTag;
    assert!(EvidenceReader::new(&tagged).is_ok());
    let mut instant = config(&["http://127.0.0.1:1"], 1);
    instant.timeout = Duration::ZERO;
    assert!(matches!(
        refused(&instant),
        Some(EvidenceSetupError::ZeroTimeout)
    ));
}

#[test]
fn the_same_endpoint_twice_is_refused() {
    // A trailing slash or an upper-case host is the same endpoint: it must not count twice.
    let error = refused(&config(
        &[
            "http://127.0.0.1:8545",
            "https://a.example.com",
            "http://127.0.0.1:8545/",
        ],
        2,
    ));
    assert!(
        matches!(
            error,
            Some(EvidenceSetupError::DuplicateUrl {
                first: 0,
                second: 2
            })
        ),
        "{error:?}"
    );
    let error = refused(&config(
        &["https://A.example.com", "https://a.example.com"],
        2,
    ));
    assert!(
        matches!(error, Some(EvidenceSetupError::DuplicateUrl { .. })),
        "{error:?}"
    );
}

#[test]
fn bad_headers_and_unreadable_ca_are_refused() {
    for (index, (name, value)) in [("bad name", "v"), ("x-api-key", "line\nbreak")]
        .into_iter()
        .enumerate()
    {
        let mut bad = config(&["http://127.0.0.1:1"], 1);
        bad.headers = vec![("x-ok".into(), "fine".into()), (name.into(), value.into())];
        let error = refused(&bad);
        assert!(
            matches!(error, Some(EvidenceSetupError::Header { index: 1 })),
            "{index}: {error:?}"
        );
    }
    let mut missing = config(&["https://a.example.com"], 1);
    missing.ca_file = Some("/nonexistent/ca.pem".into());
    assert!(matches!(
        refused(&missing),
        Some(EvidenceSetupError::ReadCa(_))
    ));
}

#[test]
fn secrets_never_show_in_debug_or_errors() -> Result<(), EvidenceSetupError> {
    let mut secret = config(
        &[
            "https://node.example.com/v3/url-secret-1234",
            "http://127.0.0.1:8545",
        ],
        2,
    );
    secret.headers = vec![("x-api-key".into(), "header-secret-5678".into())];
    let reader = EvidenceReader::new(&secret)?;
    for shown in [format!("{reader:?}"), format!("{secret:?}")] {
        assert!(!shown.contains("url-secret-1234"), "{shown}");
        assert!(!shown.contains("header-secret-5678"), "{shown}");
        assert!(!shown.contains("example.com"), "{shown}");
    }
    let mut clear = secret.clone();
    clear.urls[0] = "http://node.example.com/v3/url-secret-1234".into();
    let error = refused(&clear).map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(
        error,
        "evidence endpoint 0 must use https:// (clear text only on loopback)"
    );
    Ok(())
}

/// Answers one HTTP request with a JSON-RPC error and returns the request as received.
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
    let answer = r#"{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"no"}}"#;
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
async fn configured_headers_go_with_every_call() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let mut with_key = config(&[&format!("http://{}", listener.local_addr()?)], 1);
    with_key.headers = vec![("x-api-key".into(), "provider-secret-1234".into())];
    let server = tokio::spawn(one_request(listener));
    let reader = EvidenceReader::new(&with_key)?;
    let error = reader.pin().await.err();
    // The only endpoint answered with an error: it did not answer, and nothing is pinned.
    assert_eq!(
        error,
        Some(PinError::Head(NoAgreement::TooFewAnswers {
            answered: 0,
            quorum: 1
        }))
    );
    let request = server.await??.to_ascii_lowercase();
    assert!(
        request.contains("x-api-key: provider-secret-1234"),
        "{request}"
    );
    assert!(request.contains("eth_getblockbynumber"), "{request}");
    Ok(())
}
