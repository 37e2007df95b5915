//! Raw connections that misbehave, for the listener timeout and limit tests: silent ones,
//! half-sent ones, and a check of whether the server has closed them.

use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Opens `count` connections to `addr`, writing `prefix` on each (nothing when empty) and then
/// nothing more.
pub async fn open(addr: SocketAddr, count: usize, prefix: &[u8]) -> anyhow::Result<Vec<TcpStream>> {
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = TcpStream::connect(addr).await?;
        if !prefix.is_empty() {
            stream.write_all(prefix).await?;
        }
        streams.push(stream);
    }
    Ok(streams)
}

/// How a connection ended when read until `within` passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The server closed it (end of stream or reset), having sent these bytes first.
    Closed(Vec<u8>),
    /// Still open after `within`.
    Open,
}

/// Reads what the server sends on `stream` until it closes or `within` passes.
pub async fn end(stream: &mut TcpStream, within: Duration) -> End {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return End::Open,
            Ok(Ok(0)) | Ok(Err(_)) => return End::Closed(seen),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// How many of `streams` the server has closed within `within` (all read concurrently).
pub async fn closed_within(streams: &mut [TcpStream], within: Duration) -> usize {
    let ends = futures::future::join_all(streams.iter_mut().map(|s| end(s, within))).await;
    ends.iter().filter(|e| matches!(e, End::Closed(_))).count()
}

/// The HTTP/2 client connection preface.
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The preface, an empty SETTINGS frame, and the first 9 bytes of a HEADERS frame announcing 100
/// bytes of header block that never come.
pub fn h2_half_headers() -> Vec<u8> {
    let mut bytes = H2_PREFACE.to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 0x4, 0, 0, 0, 0, 0]); // SETTINGS, empty
    bytes.extend_from_slice(&[0, 0, 100, 0x1, 0x4, 0, 0, 0, 1]); // HEADERS, stream 1, 100 bytes
    bytes.extend_from_slice(&[0x82, 0x86]); // 2 of them
    bytes
}
