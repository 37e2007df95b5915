//! Malformed HTTP/1.1 at the webhook port over a raw TCP stream (bad request lines, invalid
//! methods, absent Host, duplicate or nonsensical Content-Length, bad chunked encoding, huge
//! headers) and hostile signature headers: every answer is a 4xx (or, for a request that is well
//! formed after all, a 2xx), or the connection is closed; never a 5xx and never a hang. A request
//! without a valid signature is never acknowledged.

use crate::harness::{Suite, Tally, rng_for};
use opledger_tests::inbox::{deposit, event_id};
use rand::Rng;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long one exchange may take before it counts as a hang.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes `request` (complete: nothing more is coming) and reads the status line of the answer:
/// `"400"`, `"closed"` when the server closes without one, `"timeout"` when nothing comes.
async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let talk = async {
        let mut stream = TcpStream::connect(addr).await?;
        // The server may answer and close before reading everything (431, 413): what it answered
        // is what counts.
        let _ = stream.write_all(request).await;
        let mut answer = Vec::new();
        let mut chunk = [0_u8; 4096];
        // Until the head of an HTTP/1.1 answer, or bytes that cannot start one (an HTTP/2
        // server's SETTINGS frame answering a preface).
        while !answer.windows(4).any(|w| w == b"\r\n\r\n")
            && (answer.len() < 8 || answer.starts_with(b"HTTP/1."))
        {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
            }
        }
        anyhow::Ok(answer)
    };
    match tokio::time::timeout(EXCHANGE_TIMEOUT, talk).await {
        Err(_) => "timeout".to_owned(),
        Ok(Err(_)) => "closed".to_owned(),
        Ok(Ok(answer)) => {
            let line = String::from_utf8_lossy(&answer);
            match line.strip_prefix("HTTP/1.") {
                Some(rest) => rest.get(2..5).unwrap_or("garbled").to_owned(),
                None if answer.is_empty() => "closed".to_owned(),
                // A frame header whose type is SETTINGS (4): the server speaks HTTP/2.
                None if answer.len() >= 9 && answer[3] == 4 => "http2".to_owned(),
                None => "garbled".to_owned(),
            }
        }
    }
}

/// The raw requests, each complete so that a correct server can answer at once.
fn raw_cases(path: &str, rng: &mut impl Rng) -> Vec<(String, Vec<u8>)> {
    let post = |headers: &str, body: &str| {
        format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n{body}").into_bytes()
    };
    let chunked = |chunks: &str| post("Transfer-Encoding: chunked\r\n", chunks);
    let random: Vec<u8> = (0..rng.random_range(16..512))
        .map(|_| rng.random())
        .collect();
    let many_headers: String = (0..200).map(|i| format!("x-h-{i}: v\r\n")).collect();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage_line", b"GARBAGE\r\n\r\n".to_vec()),
        ("random_bytes_then_crlf", [random.as_slice(), b"\r\n\r\n"].concat()),
        ("http2_preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()),
        ("get_root", b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec()),
        ("get_endpoint", format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()),
        ("method_with_at", format!("P@ST {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()),
        ("unknown_method", format!("FROB {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()),
        ("method_10k", format!("{} {path} HTTP/1.1\r\nHost: x\r\n\r\n", "P".repeat(10_000)).into_bytes()),
        ("lowercase_method", format!("post {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}").into_bytes()),
        ("options_star", b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("connect", b"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n".to_vec()),
        ("version_9_9", format!("POST {path} HTTP/9.9\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}").into_bytes()),
        ("version_garbage", format!("POST {path} HTXP/1.1\r\nHost: x\r\n\r\n").into_bytes()),
        ("no_version", format!("POST {path}\r\nHost: x\r\n\r\n").into_bytes()),
        ("no_host", format!("POST {path} HTTP/1.1\r\nContent-Length: 2\r\n\r\n{{}}").into_bytes()),
        ("http_1_0_no_host", format!("POST {path} HTTP/1.0\r\nContent-Length: 2\r\n\r\n{{}}").into_bytes()),
        ("two_hosts", post("Host: 127.0.0.2\r\nContent-Length: 2\r\n", "{}")),
        ("lf_only", format!("POST {path} HTTP/1.1\nHost: x\nContent-Length: 2\n\n{{}}").into_bytes()),
        ("content_length_twice_differing", post("Content-Length: 2\r\nContent-Length: 3\r\n", "{}x")),
        ("content_length_twice_equal", post("Content-Length: 2\r\nContent-Length: 2\r\n", "{}")),
        ("content_length_list", post("Content-Length: 2, 3\r\n", "{}x")),
        ("content_length_negative", post("Content-Length: -1\r\n", "{}")),
        ("content_length_letters", post("Content-Length: abc\r\n", "{}")),
        ("content_length_plus", post("Content-Length: +2\r\n", "{}")),
        ("content_length_overflow", post("Content-Length: 99999999999999999999999\r\n", "{}")),
        ("content_length_and_chunked", post("Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n")),
        ("chunk_size_not_hex", chunked("zz\r\n{}\r\n0\r\n\r\n")),
        ("chunk_size_overflow", chunked("fffffffffffffffffffff\r\n{}\r\n0\r\n\r\n")),
        ("chunk_data_without_crlf", chunked("2\r\n{}XX0\r\n\r\n")),
        ("chunk_extension_nul", chunked("2;\0\r\n{}\r\n0\r\n\r\n")),
        ("chunk_negative_size", chunked("-2\r\n{}\r\n0\r\n\r\n")),
        ("transfer_encoding_identity", post("Transfer-Encoding: identity\r\n", "{}")),
        ("transfer_encoding_chunked_twice", post("Transfer-Encoding: chunked, chunked\r\n", "0\r\n\r\n")),
        ("transfer_encoding_gzip_chunked", post("Transfer-Encoding: gzip, chunked\r\n", "2\r\n{}\r\n0\r\n\r\n")),
        ("header_without_colon", post("NoColonHere\r\nContent-Length: 2\r\n", "{}")),
        ("header_name_with_space", post("Bad Name: x\r\nContent-Length: 2\r\n", "{}")),
        ("header_value_nul", post("X-Nul: a\0b\r\nContent-Length: 2\r\n", "{}")),
        ("header_obs_fold", post("X-Fold: a\r\n b\r\nContent-Length: 2\r\n", "{}")),
        ("header_name_10k", post(&format!("{}: v\r\nContent-Length: 2\r\n", "n".repeat(10_000)), "{}")),
        ("header_value_100k", post(&format!("X-Big: {}\r\nContent-Length: 2\r\n", "v".repeat(100_000)), "{}")),
        ("header_value_600k", post(&format!("X-Huge: {}\r\nContent-Length: 2\r\n", "v".repeat(600_000)), "{}")),
        ("200_headers", post(&format!("{many_headers}Content-Length: 2\r\n"), "{}")),
        ("signature_twice", post("webhook-id: msg_1\r\nwebhook-timestamp: 1\r\nwebhook-signature: v1,a\r\nwebhook-signature: v1,b\r\nContent-Length: 2\r\n", "{}")),
        ("upgrade_websocket", post("Connection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n", "{}")),
        ("expect_unknown", post("Expect: 200-ok\r\nContent-Length: 2\r\n", "{}")),
        ("absolute_form", format!("POST http://evil.example{path} HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 2\r\n\r\n{{}}").into_bytes()),
        ("path_raw_0xff", b"POST /webhooks/\xff/x HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("path_100k", format!("POST /{} HTTP/1.1\r\nHost: x\r\n\r\n", "p".repeat(100_000)).into_bytes()),
        ("path_traversal", b"POST /webhooks/../../etc/passwd HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".to_vec()),
        ("path_percent_nul", b"POST /webhooks/hostile%00/whe_0 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".to_vec()),
        ("path_percent_garbage", b"POST /webhooks/%zz/%ff%fe HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}".to_vec()),
        ("body_over_limit", post("Content-Length: 300000\r\n", &"x".repeat(300_000))),
        ("pipelined_then_garbage", [post("Content-Length: 2\r\n", "{}").as_slice(), b"\x00\x01GARBAGE\r\n\r\n"].concat()),
    ];
    cases.into_iter().map(|(l, r)| (l.to_owned(), r)).collect()
}

#[tokio::test]
async fn hostile_webhook_malformed_http1() -> anyhow::Result<()> {
    const TEST: &str = "hostile_webhook_malformed_http1";
    let (mut rng, seed) = rng_for(TEST)?;
    let suite = Suite::start().await?;
    let mut tally = Tally::new(TEST, seed);
    let world = &suite.world;
    let path = format!("/webhooks/{}/{}", world.ep.source, world.ep.id);
    let cases = raw_cases(&path, &mut rng);
    let answers = futures::future::join_all(
        cases
            .iter()
            .map(|(_, request)| exchange(world.inbox.http, request)),
    )
    .await;
    for ((label, _), class) in cases.iter().zip(&answers) {
        let case = format!("raw {label}");
        tally.record(&case, class);
        // An HTTP/2 preface may be answered in HTTP/2 (the server's SETTINGS frame).
        let ok = class.starts_with(['2', '4'])
            || class == "closed"
            || (label == "http2_preface" && class == "http2");
        tally.check(ok, &case, || format!("answered {class}"));
    }
    suite.check_alive(&mut tally, "malformed HTTP/1.1").await;

    // Hostile signature headers around a valid body: refused with a 4xx, never acknowledged.
    let body = deposit(&event_id(), "treasury", "ETH", "1");
    let now = chrono::Utc::now().timestamp().to_string();
    let good_id = event_id();
    let signature = opledger_webhook::verify::sign_v1(
        &world.ep.secret,
        &good_id,
        chrono::Utc::now().timestamp(),
        body.as_bytes(),
    );
    let entries: String = (0..1000).map(|i| format!("v1,{i:0>44} ")).collect();
    let headers: Vec<(&str, [(&str, String); 3])> = vec![
        (
            "id_10k",
            [
                ("webhook-id", "m".repeat(10_000)),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", signature.clone()),
            ],
        ),
        (
            "id_empty",
            [
                ("webhook-id", String::new()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", signature.clone()),
            ],
        ),
        (
            "timestamp_huge",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", "99999999999999999999999".into()),
                ("webhook-signature", signature.clone()),
            ],
        ),
        (
            "timestamp_negative",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", "-1".into()),
                ("webhook-signature", signature.clone()),
            ],
        ),
        (
            "timestamp_exponent",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", "1e9".into()),
                ("webhook-signature", signature.clone()),
            ],
        ),
        (
            "timestamp_i64_min",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", i64::MIN.to_string()),
                ("webhook-signature", signature.clone()),
            ],
        ),
        (
            "timestamp_empty",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", String::new()),
                ("webhook-signature", signature.clone()),
            ],
        ),
        (
            "signature_empty_entry",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", "v1,".into()),
            ],
        ),
        (
            "signature_not_base64",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", "v1,!!!!".into()),
            ],
        ),
        (
            "signature_unknown_version",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", "v9,AAAA".into()),
            ],
        ),
        (
            "signature_100k",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", format!("v1,{}", "A".repeat(100_000))),
            ],
        ),
        (
            "signature_1000_entries",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", entries),
            ],
        ),
        (
            "signature_v1a_garbage",
            [
                ("webhook-id", good_id.clone()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", "v1a,AAAA".into()),
            ],
        ),
        (
            "signature_other_id",
            [
                ("webhook-id", event_id()),
                ("webhook-timestamp", now.clone()),
                ("webhook-signature", signature.clone()),
            ],
        ),
    ];
    let url = world.sender.url(&world.ep);
    for (label, header) in headers {
        let case = format!("headers {label}");
        let class = match world
            .sender
            .send_raw(&url, &header, body.clone().into_bytes())
            .await
        {
            Ok((status, _)) => status.to_string(),
            Err(e)
                if e.downcast_ref::<reqwest::Error>()
                    .is_some_and(reqwest::Error::is_timeout) =>
            {
                "timeout".to_owned()
            }
            Err(_) => "closed".to_owned(),
        };
        tally.record(&case, &class);
        tally.check(class.starts_with('4') || class == "closed", &case, || {
            format!("an unverifiable request answered {class}")
        });
    }
    suite
        .check_alive(&mut tally, "hostile signature headers")
        .await;
    tally.finish()
}
