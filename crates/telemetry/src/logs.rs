//! JSON log lines (tracing-subscriber's format, filtered by `RUST_LOG`, default `info`) with the
//! `trace_id` and `span_id` of the span they are logged in, when that span is traced.

use opentelemetry::trace::TraceContextExt as _;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{self, FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::{FmtContext, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

/// The log layer over `writer`.
pub(crate) fn layer<S, W>(writer: W) -> impl Layer<S> + Send + Sync + 'static
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt::layer()
        .json()
        .event_format(WithTraceIds(format::format().json()))
        .with_writer(writer)
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
