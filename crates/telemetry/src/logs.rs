//! JSON log lines (tracing-subscriber's format, filtered by `RUST_LOG`, default `info`) with the
//! `trace_id` and `span_id` of the span they are logged in, when that span is traced.

use opentelemetry::trace::TraceContextExt as _;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

/// The log layer over `writer`, filtered by `RUST_LOG` (default `info`).
pub(crate) fn layer<S, W>(writer: W) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    layer_with(filter, writer)
}

/// Targets whose debug and trace events and spans carry what is never logged: alloy's JSON-RPC
/// client logs each request's parameters (a raw signed transaction) and each answer's body (a
/// transaction hash), and its HTTP transport's span names the node's URL (which may carry a
/// key). They are logged at INFO and above only, whatever `RUST_LOG` says.
const CAPPED_AT_INFO: &str = "alloy_";

/// The log layer over `writer` with `filter`, and [`CAPPED_AT_INFO`] applied after it.
fn layer_with<S, W>(filter: EnvFilter, writer: W) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let capped = filter_fn(|meta: &Metadata<'_>| {
        *meta.level() <= Level::INFO || !meta.target().starts_with(CAPPED_AT_INFO)
    });
    tracing_subscriber::fmt::layer()
        .json()
        .event_format(WithTraceIds(format::format().json()))
        .with_writer(writer)
        // Nested rather than combined with FilterExt::and: combined, the service processes lost
        // the lines logged inside request spans (tests/tracing, processes).
        .with_filter(capped)
        .with_filter(filter)
}

/// Wraps the JSON format: adds `"trace_id"` and `"span_id"` to each line logged inside a traced
/// span.
struct WithTraceIds<F>(F);

/// The ids of the OpenTelemetry span behind the event's span, if it is traced.
fn ids<S, N>(ctx: &FmtContext<'_, S, N>, event: &Event<'_>) -> Option<(String, String)>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    let span = event
        .parent()
        .and_then(|id| ctx.span(id))
        .or_else(|| ctx.lookup_current())?;
    let id = span.id();
    drop(span);
    let cx = tracing::dispatcher::get_default(|dispatch| {
        tracing_opentelemetry::get_otel_context(&id, dispatch)
    })?;
    let span_context = cx.span().span_context().clone();
    span_context.is_valid().then(|| {
        (
            span_context.trace_id().to_string(),
            span_context.span_id().to_string(),
        )
    })
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let Some((trace_id, span_id)) = ids(ctx, event) else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        // One JSON object and a newline: the ids go in before its closing brace.
        match line.trim_end().strip_suffix('}') {
            Some(object) => {
                writeln!(
                    writer,
                    "{object},\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"}}"
                )
            }
            None => writer.write_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt as _;

    /// Log lines written into memory.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if let Ok(mut lines) = self.0.lock() {
                lines.extend_from_slice(buf);
            }
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Lines {
        type Writer = Lines;

        fn make_writer(&'w self) -> Lines {
            self.clone()
        }
    }

    #[test]
    fn alloy_is_never_logged_below_info_whatever_rust_log_says() {
        let lines = Lines::default();
        let subscriber =
            tracing_subscriber::registry().with(layer_with(EnvFilter::new("trace"), lines.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let request = tracing::info_span!(target: "opledger_server", "request");
            let _request = request.enter();
            tracing::info!(target: "opledger_operations", "a line inside a request span is kept");
            tracing::trace!(target: "alloy_rpc_client::call", params = "0xf86b8085raw", "sending request");
            tracing::debug!(target: "alloy_transport_http::reqwest_transport", body = "0xhashbody", "response");
            let span = tracing::debug_span!(target: "alloy_transport_http", "ReqwestTransport", url = "http://node-with-key.example/k3y");
            let _entered = span.enter();
            tracing::info!(target: "alloy_provider", "alloy info is kept");
            tracing::trace!(target: "opledger_chain::rpc", "our own trace is kept");
        });
        let text = lines
            .0
            .lock()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
            .unwrap_or_default();
        for secret in ["0xf86b8085raw", "0xhashbody", "k3y"] {
            assert!(!text.contains(secret), "{secret} logged: {text}");
        }
        assert!(text.contains("alloy info is kept"), "{text}");
        assert!(
            text.contains("a line inside a request span is kept"),
            "{text}"
        );
        assert!(text.contains("our own trace is kept"), "{text}");
    }
}
