//! Distributed tracing of opledger.
//!
//! - [`init`]: JSON logs (filtered by `RUST_LOG`, default `info`) carrying `trace_id` and
//!   `span_id` when inside a traced span, and, when an OTLP endpoint is configured by the standard
//!   `OTEL_*` variables, OpenTelemetry spans exported over OTLP/gRPC. Without an endpoint nothing
//!   is exported and no OpenTelemetry layer is installed: tracing spans only.
//! - [`grpc`]: the tower layers that put every gRPC call in a span and carry the W3C
//!   `traceparent` over gRPC metadata (server: extract; client: inject).
//! - [`propagation`]: the W3C trace context as text, to store it with an operation so the
//!   background steps an operation causes later join the trace of the call that created it.
//!
//! Redaction: spans carry identifiers the system generates (operation and tenant ids, states,
//! classes), never an idempotency key, address, memo, transaction hash or key material; the
//! events of a span are the service's log lines, which keep the same rule.

pub mod grpc;
mod logs;
pub mod propagation;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing_subscriber::Layer as _;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub use propagation::{parent_on, traceparent};

/// True once an OpenTelemetry pipeline is installed in this process: only then are trace
/// contexts stored and looked up (no database work for tracing when it is off).
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether spans of this process are exported (an OTLP pipeline is installed).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The exporter could not be built (the endpoint is invalid, say).
#[derive(Debug)]
pub struct TelemetryError(String);

impl std::fmt::Display for TelemetryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tracing exporter: {}", self.0)
    }
}

impl std::error::Error for TelemetryError {}

/// Keeps the tracer provider of the process; [`Telemetry::shutdown`] flushes what is buffered.
#[derive(Debug, Default)]
#[must_use = "shut the telemetry down on exit, or buffered spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// True when spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is buffered now (tests call this before reading the collector).
    pub async fn flush(&self) {
        if let Some(provider) = self.provider.clone() {
            let _ = tokio_blocking(move || {
                let _ = provider.force_flush();
            })
            .await;
        }
    }

    /// Flushes buffered spans and stops the exporter.
    pub async fn shutdown(mut self) {
        if let Some(provider) = self.provider.take() {
            let _ = tokio_blocking(move || {
                let _ = provider.shutdown();
            })
            .await;
        }
    }
}

/// The batch processor exports from its own thread; waiting for it must not block a runtime
/// worker that drives the exporter's connection.
async fn tokio_blocking(f: impl FnOnce() + Send + 'static) -> Result<(), ()> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(f).await.map_err(|_| ()),
        Err(_) => {
            f();
            Ok(())
        }
    }
}

/// Where spans go and how logs are written.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `service.name` of this process: replaced by `OTEL_SERVICE_NAME` when that is set, unless
    /// [`Options::name_configured`].
    pub service_name: String,
    /// `service_name` was configured explicitly (`[telemetry] service_name`): it wins over
    /// `OTEL_SERVICE_NAME`.
    pub name_configured: bool,
    /// An OTLP/gRPC endpoint that overrides the `OTEL_EXPORTER_OTLP_*` variables (configured, or
    /// a test's collector).
    pub endpoint: Option<String>,
}

/// The variable `name`, trimmed, when set and not empty.
fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Whether spans are exported, from `configured` (an endpoint in the options) and the variables
/// `var` reads: `OTEL_SDK_DISABLED=true` turns export off whatever else is set; otherwise a
/// configured endpoint exports, and so does an OTLP endpoint variable unless
/// `OTEL_TRACES_EXPORTER=none`. The exporter itself reads the endpoint, headers, timeout and
/// compression from the same variables.
fn exports(configured: bool, var: impl Fn(&str) -> Option<String>) -> bool {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return false;
    }
    if configured {
        return true;
    }
    if var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none")) {
        return false;
    }
    var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
        || var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
}

/// Starts JSON logs on stdout and, when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, span export over OTLP/gRPC, with `service_name`
/// as `service.name` unless `OTEL_SERVICE_NAME` names it. Call it inside the tokio runtime. Safe
/// to call more than once (later calls change nothing).
pub fn init(service_name: &str) -> Telemetry {
    init_from(&Options {
        service_name: service_name.to_owned(),
        ..Options::default()
    })
}

/// [`init`] with `options` (a configured endpoint or name), logging to stdout.
pub fn init_from(options: &Options) -> Telemetry {
    match init_with(options, std::io::stdout) {
        Ok(telemetry) => telemetry,
        Err(e) => {
            // Tracing must never keep a service from running: log without export.
            let _ = init_logs_only(std::io::stdout);
            tracing::warn!(error = %e, "tracing export disabled");
            Telemetry::default()
        }
    }
}

/// [`init`] with explicit options and log destination. With `options.endpoint` set, spans are
/// exported there whatever the variables say, unless `OTEL_SDK_DISABLED=true`.
pub fn init_with<W>(options: &Options, writer: W) -> Result<Telemetry, TelemetryError>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let exporting = exports(options.endpoint.is_some(), var);
    if !exporting {
        init_logs_only(writer);
        return Ok(Telemetry::default());
    }
    let provider = provider(options)?;
    let tracer = provider.tracer("opledger");
    // Spans are recorded at INFO whatever RUST_LOG says about logs.
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        // Entering a span does not fix its parent: a handler may still adopt the trace of the
        // operation it works on (see `propagation::join_operation_trace`).
        .with_context_activation(false)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_filter(tracing_subscriber::filter::LevelFilter::INFO);
    let installed = tracing_subscriber::registry()
        .with(otel)
        .with(logs::layer(writer))
        .try_init()
        .is_ok();
    if !installed {
        let _ = provider.shutdown();
        return Ok(Telemetry::default());
    }
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    opentelemetry::global::set_tracer_provider(provider.clone());
    ENABLED.store(true, Ordering::Relaxed);
    let protocol = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty()));
    if let Some(protocol) = protocol.filter(|p| p.trim() != "grpc") {
        tracing::warn!(%protocol, "only OTLP over gRPC is supported: spans are exported over gRPC");
    }
    Ok(Telemetry {
        provider: Some(provider),
    })
}

fn init_logs_only<W>(writer: W) -> bool
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::registry()
        .with(logs::layer(writer))
        .try_init()
        .is_ok()
}

fn provider(options: &Options) -> Result<SdkTracerProvider, TelemetryError> {
    use opentelemetry_otlp::WithExportConfig as _;
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_tonic();
    if let Some(endpoint) = &options.endpoint {
        builder = builder.with_endpoint(endpoint.clone());
    }
    let exporter = builder.build().map_err(|e| TelemetryError(e.to_string()))?;
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the default name, not over a
    // configured one.
    let named = !options.name_configured
        && std::env::var("OTEL_SERVICE_NAME").is_ok_and(|v| !v.trim().is_empty());
    let resource = if named || options.service_name.is_empty() {
        Resource::builder().build()
    } else {
        Resource::builder()
            .with_service_name(options.service_name.clone())
            .build()
    };
    // The sampler comes from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (default: parent
    // based, always on), the batch settings from OTEL_BSP_*.
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// The short name of the opledger component behind a gRPC service name (for the
/// `opledger.service` span attribute, which tells services apart when several run in one
/// process).
pub fn component(grpc_service: &str) -> &'static str {
    match grpc_service {
        "opledger.v1.OperationsService" => "operations",
        "opledger.v1.ApprovalsService" => "approvals",
        "opledger.v1.SignerService" => "signer",
        "opledger.v1.Broadcaster" => "broadcaster",
        "opledger.v1.OperatorService" => "reconciler",
        "opledger.v1.InboxService" => "inbox",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::exports;

    fn vars(set: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let set: Vec<(String, String)> = set
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| set.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_sdk_kill_switch_wins_even_over_a_configured_endpoint() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317");
        assert!(!exports(false, vars(&[])), "nothing set: nothing exported");
        assert!(exports(true, vars(&[])), "a configured endpoint exports");
        assert!(exports(false, vars(&[endpoint])));
        assert!(exports(
            false,
            vars(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4317")])
        ));
        let off = ("OTEL_SDK_DISABLED", "TRUE");
        assert!(
            !exports(true, vars(&[off])),
            "the kill switch wins over [telemetry]"
        );
        assert!(!exports(false, vars(&[off, endpoint])));
        let none = ("OTEL_TRACES_EXPORTER", "none");
        assert!(!exports(false, vars(&[none, endpoint])));
        assert!(
            exports(true, vars(&[none])),
            "OTEL_TRACES_EXPORTER=none turns the variables off, not [telemetry]"
        );
    }
}
