//! The W3C trace context (`traceparent`) in headers and as stored text.
//!
//! A `traceparent` holds a version, a random trace id, a random span id and the sampled flag:
//! nothing about the payload, so it may be stored with an operation and logged.

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tonic::codegen::http::{HeaderMap, HeaderName, HeaderValue};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Reads W3C headers from an HTTP header map (gRPC metadata is HTTP/2 headers).
struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// Writes W3C headers into an HTTP header map.
struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// A one-key carrier for a stored `traceparent`.
struct Stored<'a>(&'a str);

impl Extractor for Stored<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        (key == "traceparent").then_some(self.0)
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent"]
    }
}

/// The remote context `headers` carry (`traceparent`, `tracestate`), if any valid one.
pub fn extract(headers: &HeaderMap) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Makes the caller's context in `headers`, if they carry a valid one, the parent of `span` (a
/// server span, not yet entered); true when they did.
pub fn parent_on_headers(span: &Span, headers: &HeaderMap) -> bool {
    match extract(headers) {
        Some(cx) => {
            let _ = span.set_parent(cx);
            true
        }
        None => false,
    }
}

/// Writes the context of `span` into `headers` as `traceparent` (and `tracestate`). Nothing is
/// written when the span is not traced (tracing off, or the span is disabled).
pub fn inject(span: &Span, headers: &mut HeaderMap) {
    let cx = span.context();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(headers));
    }
}

/// The `traceparent` of `span`, to store with what it creates; `None` when not traced.
pub fn traceparent(span: &Span) -> Option<String> {
    if !crate::enabled() {
        return None;
    }
    let mut headers = HeaderMap::new();
    inject(span, &mut headers);
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The context a stored `traceparent` names, if it is valid.
pub fn context_of(traceparent: &str) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract(&Stored(traceparent));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Makes the stored context of an operation the parent of `span` (a worker step on that
/// operation), so the step joins the trace of the call that created the operation. Call it
/// before the span is entered or has children. Does nothing without a valid context.
pub fn parent_on(span: &Span, traceparent: Option<&str>) {
    if let Some(cx) = traceparent.and_then(context_of) {
        let _ = span.set_parent(cx);
    }
}

/// For a server span of a call about an existing operation: without an incoming `traceparent`
/// (`remote` false) the span adopts the operation's stored context as its parent, so the call
/// joins the operation's trace; with one, it keeps the caller's trace and links to the
/// operation's. If the span already started, it is linked instead.
pub fn join_operation_trace(span: &Span, remote: bool, traceparent: Option<&str>) {
    let Some(cx) = traceparent.and_then(context_of) else {
        return;
    };
    let linked = cx.span().span_context().clone();
    if remote || span.set_parent(cx).is_err() {
        span.add_link(linked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_traceparent_round_trips_and_garbage_is_refused() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cx = context_of(tp).expect("valid");
        assert_eq!(
            cx.span().span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        let mut headers = HeaderMap::new();
        TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(&mut headers));
        assert_eq!(
            headers.get("traceparent").and_then(|v| v.to_str().ok()),
            Some(tp)
        );
        assert!(extract(&headers).is_some());
        for bad in [
            "",
            "nonsense",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        ] {
            assert!(context_of(bad).is_none(), "{bad}");
        }
        assert!(extract(&HeaderMap::new()).is_none());
    }
}
