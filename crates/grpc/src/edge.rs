//! The typed edge of every gRPC listener: what a hostile or broken client gets instead of an
//! INTERNAL status.
//!
//! - A request whose metadata is larger than the listener's limit is answered
//!   RESOURCE_EXHAUSTED (`METADATA_TOO_LARGE`) before any service sees it (HTTP/2's own hard limit,
//!   [`HARD_HEADER_LIST_BYTES`], stays above it, so a client reads a gRPC status, not HTTP 431).
//! - A request whose message does not decode, or whose gRPC framing is broken, is answered
//!   INVALID_ARGUMENT (`MALFORMED_REQUEST`): tonic reports both as INTERNAL, which would tell the
//!   caller the server failed. The answer is rewritten from tonic's own status (kept in the
//!   response's extensions for a trailers-only answer, or in the trailers of a stream), by its
//!   message, which names the decode or framing fault; `tests/hostile` pins every case.

use crate::status::{ErrorReason, error_status};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::codegen::http;
use tonic::{Code, Status};

/// The header list size HTTP/2 itself accepts (SETTINGS_MAX_HEADER_LIST_SIZE): above every
/// configurable `max_header_list_bytes`, so that the typed answer is the one clients see.
pub use opledger_config::HARD_HEADER_LIST_BYTES;

/// The size of a header list as HTTP/2 counts it (RFC 9113 section 6.5.2): name + value + 32
/// bytes per field, pseudo-header fields included.
pub fn header_list_bytes<B>(request: &http::Request<B>) -> usize {
    let pseudo = [
        (":method", request.method().as_str().len()),
        (
            ":path",
            request
                .uri()
                .path_and_query()
                .map_or(0, |p| p.as_str().len()),
        ),
        (
            ":authority",
            request.uri().authority().map_or(0, |a| a.as_str().len()),
        ),
        (":scheme", request.uri().scheme_str().map_or(0, str::len)),
    ];
    let pseudo: usize = pseudo.iter().map(|(name, len)| name.len() + len + 32).sum();
    let fields: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum();
    pseudo + fields
}

/// Which fault a tonic INTERNAL status reports, when it is the client's (a decode or framing
/// fault), by the message tonic and prost give it.
pub fn client_fault(status: &Status) -> Option<&'static str> {
    if status.code() != Code::Internal {
        return None;
    }
    let message = status.message();
    if message.starts_with("failed to decode Protobuf message") {
        Some("decode")
    } else if message.starts_with("protocol error: received message with compressed-flag")
        || message.starts_with("protocol error: received message with invalid compression flag")
        || message.starts_with("Error decompressing")
    {
        Some("compression")
    } else if message.starts_with("Unexpected EOF decoding stream")
        || message.starts_with("Missing request message")
    {
        Some("framing")
    } else {
        None
    }
}

/// The typed answer to a client fault.
pub fn malformed(problem: &'static str) -> Status {
    let message = match problem {
        "decode" => "the request message does not decode as the method's protobuf message",
        "compression" => {
            "the request's compressed-flag is invalid or names no supported grpc-encoding"
        }
        _ => {
            "the request's gRPC framing is broken (a length prefix longer than the data, or no message)"
        }
    };
    error_status(
        Code::InvalidArgument,
        ErrorReason::MalformedRequest,
        message,
        &[("problem", problem)],
    )
}

/// The answer to metadata over `limit` bytes.
pub fn metadata_too_large(limit: usize) -> Status {
    error_status(
        Code::ResourceExhausted,
        ErrorReason::MetadataTooLarge,
        format!("request metadata exceeds {limit} bytes"),
        &[("limit", &limit.to_string())],
    )
}

/// The tower layer of [`EdgeService`].
#[derive(Debug, Clone, Copy)]
pub struct EdgeLayer {
    max_header_list_bytes: usize,
}

impl EdgeLayer {
    /// Refuses metadata over `max_header_list_bytes` and types client faults.
    pub fn new(max_header_list_bytes: usize) -> EdgeLayer {
        EdgeLayer {
            max_header_list_bytes,
        }
    }
}

impl<S> tower::Layer<S> for EdgeLayer {
    type Service = EdgeService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        EdgeService {
            inner,
            max_header_list_bytes: self.max_header_list_bytes,
        }
    }
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct EdgeService<S> {
    inner: S,
    max_header_list_bytes: usize,
}

impl<S, B> tower::Service<http::Request<B>> for EdgeService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if header_list_bytes(&request) > self.max_header_list_bytes {
            let answer = metadata_too_large(self.max_header_list_bytes).into_http();
            return Box::pin(async move { Ok(answer) });
        }
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            // A trailers-only answer: tonic keeps the status it built in the extensions.
            if let Some(problem) = response.extensions().get::<Status>().and_then(client_fault) {
                return Ok(malformed(problem).into_http());
            }
            let (parts, body) = response.into_parts();
            Ok(http::Response::from_parts(
                parts,
                tonic::body::Body::new(TypedTrailers { inner: body }),
            ))
        })
    }
}

/// A response body whose trailers carry a typed status instead of tonic's INTERNAL for a client
/// fault met while a stream was being read.
#[derive(Debug)]
struct TypedTrailers {
    inner: tonic::body::Body,
}

impl http_body::Body for TypedTrailers {
    type Data = <tonic::body::Body as http_body::Body>::Data;
    type Error = <tonic::body::Body as http_body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        let frame = match frame.into_trailers() {
            Ok(trailers) => {
                let typed = Status::from_header_map(&trailers)
                    .as_ref()
                    .and_then(client_fault)
                    .map(malformed);
                match typed {
                    Some(status) => {
                        let mut rewritten = http::HeaderMap::new();
                        if status.add_header(&mut rewritten).is_err() {
                            rewritten = trailers;
                        }
                        http_body::Frame::trailers(rewritten)
                    }
                    None => http_body::Frame::trailers(trailers),
                }
            }
            Err(frame) => frame,
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tonic_and_prost_faults_are_typed_and_nothing_else_is() {
        let cases = [
            (
                "failed to decode Protobuf message: invalid wire type",
                Some("decode"),
            ),
            (
                "protocol error: received message with compressed-flag but no grpc-encoding was specified",
                Some("compression"),
            ),
            (
                "protocol error: received message with invalid compression flag: 7 (valid flags are 0 and 1), while sending request",
                Some("compression"),
            ),
            ("Unexpected EOF decoding stream.", Some("framing")),
            ("Missing request message.", Some("framing")),
            ("internal error", None),
            ("database error", None),
        ];
        for (message, expected) in cases {
            assert_eq!(
                client_fault(&Status::internal(message)),
                expected,
                "{message}"
            );
        }
        // Only INTERNAL is rewritten: a service's own typed answer is never touched.
        let typed = Status::invalid_argument("failed to decode Protobuf message");
        assert_eq!(client_fault(&typed), None);
        let answer = malformed("decode");
        assert_eq!(answer.code(), Code::InvalidArgument);
        assert_eq!(
            crate::status::reason_of(&answer).as_deref(),
            Some("MALFORMED_REQUEST")
        );
    }

    #[test]
    fn header_lists_are_counted_as_http2_counts_them() -> Result<(), http::Error> {
        let request = http::Request::builder()
            .method("POST")
            .uri("http://h/opledger.v1.OperationsService/GetBalance")
            .header("te", "trailers")
            .body(())?;
        let pseudo = (7 + 4 + 32)
            + (5 + "/opledger.v1.OperationsService/GetBalance".len() + 32)
            + (10 + 1 + 32)
            + (7 + 4 + 32);
        assert_eq!(header_list_bytes(&request), pseudo + 2 + 8 + 32);
        Ok(())
    }
}
