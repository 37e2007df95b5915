//! Tower layers that trace gRPC calls and carry the W3C `traceparent` in gRPC metadata.
//!
//! Server: every call (health and reflection excepted) runs in a span named
//! `<package.Service>/<Method>` with `otel.kind = server`, `rpc.system = grpc`, `rpc.service`,
//! `rpc.method`, `rpc.grpc.status_code` and `opledger.service` (the component), a child of the
//! caller's span when the call carries a valid `traceparent`. Client: every call runs in a span of
//! kind client, and its context is written into the request's `traceparent`, so the server's span
//! is its child.

use crate::propagation;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::codegen::http;
use tracing::Instrument as _;
use tracing::field::Empty;

/// Marker in a request's extensions: the call carried a valid `traceparent`, so its server span
/// belongs to the caller's trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteParent;

/// True when the call carried a valid `traceparent` (read from a tonic request's extensions).
pub fn has_remote_parent(extensions: &tonic::Extensions) -> bool {
    extensions.get::<RemoteParent>().is_some()
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

/// `/pkg.Service/Method` -> (`pkg.Service`, `Method`); `None` for health and reflection (not
/// traced: probes would drown the traces) and for anything that is not a gRPC path.
fn rpc_of(path: &str) -> Option<(&str, &str)> {
    let (service, method) = path.strip_prefix('/')?.split_once('/')?;
    if service.starts_with("grpc.health.") || service.starts_with("grpc.reflection.") {
        return None;
    }
    Some((service, method))
}

/// The gRPC status of a response from its headers: errors are answered "trailers-only" (status
/// in the headers); a success carries its status in the trailers, so no header means OK.
pub fn status_of<R>(response: &http::Response<R>) -> i64 {
    response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0)
}

/// Records the status on a finished call's span. Servers count only their own faults as errors
/// (OpenTelemetry's gRPC conventions); clients count every non-OK status.
/// Awaits `call` inside `span` and records its gRPC status there (`failed` when it produced no
/// response at all).
fn finish_in<R, E, F>(
    span: tracing::Span,
    call: F,
    failed: i64,
    server: bool,
) -> BoxFuture<http::Response<R>, E>
where
    F: Future<Output = Result<http::Response<R>, E>> + Send + 'static,
{
    let recorded = span.clone();
    Box::pin(
        async move {
            let response = call.await;
            let code = response.as_ref().map_or(failed, status_of);
            record_status(&recorded, code, server);
            response
        }
        .instrument(span),
    )
}

fn record_status(span: &tracing::Span, code: i64, server: bool) {
    span.record("rpc.grpc.status_code", code);
    let error = if server {
        matches!(code, 2 | 4 | 12 | 13 | 14 | 15)
    } else {
        code != 0
    };
    if error {
        span.record("otel.status_code", "error");
    }
}

/// The server layer; see the module docs.
#[derive(Debug, Clone, Copy)]
pub struct ServerLayer {
    component: &'static str,
}

impl ServerLayer {
    /// A layer for the server whose health service name is `grpc_service`.
    pub fn new(grpc_service: &str) -> ServerLayer {
        ServerLayer {
            component: crate::component(grpc_service),
        }
    }
}

impl<S> tower::Layer<S> for ServerLayer {
    type Service = Server<S>;

    fn layer(&self, inner: S) -> Server<S> {
        Server {
            inner,
            component: self.component,
        }
    }
}

/// See [`ServerLayer`].
#[derive(Debug, Clone)]
pub struct Server<S> {
    inner: S,
    component: &'static str,
}

impl<S, B, R> tower::Service<http::Request<B>> for Server<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let Some((service, method)) = rpc_of(request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        let span = tracing::info_span!(
            "grpc.server",
            otel.name = %format_args!("{service}/{method}"),
            otel.kind = "server",
            otel.status_code = Empty,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            rpc.grpc.status_code = Empty,
            opledger.service = self.component,
        );
        if propagation::parent_on_headers(&span, request.headers()) {
            request.extensions_mut().insert(RemoteParent);
        }
        let call = span.in_scope(|| self.inner.call(request));
        // A transport error is UNKNOWN (2) for a server.
        finish_in(span, call, 2, true)
    }
}

/// The client layer; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientLayer;

impl<S> tower::Layer<S> for ClientLayer {
    type Service = Client<S>;

    fn layer(&self, inner: S) -> Client<S> {
        Client { inner }
    }
}

/// See [`ClientLayer`].
#[derive(Debug, Clone)]
pub struct Client<S> {
    inner: S,
}

/// A tonic channel whose calls are traced and carry `traceparent`.
pub type TracedChannel = Client<tonic::transport::Channel>;

/// Wraps `channel` in the [`ClientLayer`].
pub fn traced(channel: tonic::transport::Channel) -> TracedChannel {
    Client { inner: channel }
}

impl<S, B, R> tower::Service<http::Request<B>> for Client<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let Some((service, method)) = rpc_of(request.uri().path()) else {
            return Box::pin(self.inner.call(request));
        };
        let span = tracing::info_span!(
            "grpc.client",
            otel.name = %format_args!("{service}/{method}"),
            otel.kind = "client",
            otel.status_code = Empty,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            rpc.grpc.status_code = Empty,
        );
        propagation::inject(&span, request.headers_mut());
        let call = span.in_scope(|| self.inner.call(request));
        // A transport error is UNAVAILABLE (14) for a client.
        finish_in(span, call, 14, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_application_methods_are_traced() {
        assert_eq!(
            rpc_of("/opledger.v1.SignerService/SignWithdrawal"),
            Some(("opledger.v1.SignerService", "SignWithdrawal"))
        );
        assert_eq!(rpc_of("/grpc.health.v1.Health/Check"), None);
        assert_eq!(
            rpc_of("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            None
        );
        assert_eq!(rpc_of("/nothing"), None);
        assert_eq!(rpc_of("relative/path"), None);
    }
}
