//! One HTTP exchange: the request sent once, the answer read whole (bounded), and what went wrong
//! told apart only as far as the classification needs (timeout, lost connection).

use std::time::Duration;

/// The largest answer body read; a larger one is unreadable.
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// A whole answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// `Retry-After` in its seconds form, when given.
    pub retry_after: Option<Duration>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why no whole answer was read. The request may have arrived in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    /// No answer (or no whole body) in time.
    Timeout,
    /// The connection failed, was refused, reset or cut, or the body was cut.
    ConnectionLost,
    /// The body is larger than [`MAX_BODY`].
    TooLarge {
        /// The HTTP status.
        status: u16,
        /// `Retry-After` in its seconds form, when given.
        retry_after: Option<Duration>,
    },
}

/// Sends `request` once with `client` and reads the whole answer.
pub async fn exchange(
    client: &reqwest::Client,
    request: reqwest::Request,
) -> Result<Answer, TransportFailure> {
    let mut response = client.execute(request).await.map_err(failure_of)?;
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failure_of)? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(TransportFailure::TooLarge {
                status,
                retry_after,
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer {
        status,
        retry_after,
        body,
    })
}

/// What a client error means here: a timeout, or a connection that may have carried the request.
fn failure_of(error: reqwest::Error) -> TransportFailure {
    if error.is_timeout() {
        TransportFailure::Timeout
    } else {
        TransportFailure::ConnectionLost
    }
}

/// `Retry-After` as delta-seconds (the HTTP-date form is not read).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let value = value.trim();
    if value.is_empty() || value.len() > 10 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok().map(Duration::from_secs)
}

/// The current time in unix seconds, `None` before 1970.
pub fn unix_now() -> Option<u64> {
    u64::try_from(chrono::Utc::now().timestamp()).ok()
}
