//! An in-process OTLP/gRPC trace collector (the published `opentelemetry-proto` service) and the
//! process's telemetry pointed at it, with log lines captured in memory.
//!
//! The collector and the exporter live on a runtime of their own, started once per test process,
//! so every test (whatever runner: one process per test or one for all) exports into the same
//! collector and reads back the spans of its own trace ids.

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// Everything the collector received.
#[derive(Debug, Clone, Default)]
pub struct Received(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Received {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        if let Ok(mut all) = self.0.lock() {
            all.push(request.into_inner());
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// Log lines of the process, in memory.
#[derive(Debug, Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<u8>>>);

/// One writer per log line.
#[derive(Debug)]
pub struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut all) = self.0.lock() {
            all.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for Logs {
    type Writer = LogWriter;

    fn make_writer(&'w self) -> LogWriter {
        LogWriter(self.0.clone())
    }
}

impl Logs {
    /// Every line logged so far, parsed (a line that is not JSON fails the test).
    pub fn lines(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        let text = match self.0.lock() {
            Ok(all) => String::from_utf8_lossy(&all).into_owned(),
            Err(_) => anyhow::bail!("log buffer poisoned"),
        };
        text.lines()
            .map(|l| serde_json::from_str(l).map_err(|e| anyhow::anyhow!("not JSON ({e}): {l}")))
            .collect()
    }

    /// The raw text logged so far.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|all| String::from_utf8_lossy(&all).into_owned())
            .unwrap_or_default()
    }
}

/// A received span, flattened.
#[derive(Debug, Clone)]
pub struct Span {
    /// Lowercase hex.
    pub trace_id: String,
    /// Lowercase hex.
    pub span_id: String,
    /// Lowercase hex, empty for a root.
    pub parent: String,
    /// The span's name.
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// Attributes as text.
    pub attributes: BTreeMap<String, String>,
    /// Event names.
    pub events: Vec<String>,
    /// Start time, ns since the epoch.
    pub start: u64,
    /// `service.name` of the resource that exported it.
    pub resource_service: String,
    /// Links as (trace id, span id), lowercase hex.
    pub links: Vec<(String, String)>,
}

impl Span {
    /// An attribute, or "".
    pub fn attr(&self, key: &str) -> &str {
        self.attributes.get(key).map_or("", String::as_str)
    }
}

fn text(value: &Option<AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attributes(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

impl Received {
    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        let Ok(all) = self.0.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for request in all.iter() {
            for resource_spans in &request.resource_spans {
                let resource = resource_spans
                    .resource
                    .as_ref()
                    .map(|r| attributes(&r.attributes))
                    .unwrap_or_default();
                let service = resource.get("service.name").cloned().unwrap_or_default();
                for scope in &resource_spans.scope_spans {
                    for span in &scope.spans {
                        out.push(Span {
                            trace_id: hex::encode(&span.trace_id),
                            span_id: hex::encode(&span.span_id),
                            parent: hex::encode(&span.parent_span_id),
                            name: span.name.clone(),
                            kind: SpanKind::try_from(span.kind).unwrap_or(SpanKind::Unspecified),
                            attributes: attributes(&span.attributes),
                            events: span.events.iter().map(|e| e.name.clone()).collect(),
                            start: span.start_time_unix_nano,
                            resource_service: service.clone(),
                            links: span
                                .links
                                .iter()
                                .map(|l| (hex::encode(&l.trace_id), hex::encode(&l.span_id)))
                                .collect(),
                        });
                    }
                }
            }
        }
        out
    }

    /// Everything received, as text (every name, attribute, event, link and resource value), to
    /// search for values that must never be exported.
    pub fn everything(&self) -> String {
        self.0
            .lock()
            .map(|all| format!("{:?}", *all))
            .unwrap_or_default()
    }
}

/// The process's collector, telemetry and captured logs.
#[derive(Debug)]
pub struct Harness {
    /// What the collector received.
    pub received: Received,
    /// The log lines.
    pub logs: Logs,
    /// The collector's OTLP/gRPC endpoint (for service processes).
    pub endpoint: String,
    telemetry: opledger_grpc::telemetry::Telemetry,
}

impl Harness {
    /// Exports every span ended so far into the collector.
    pub async fn flush(&self) {
        self.telemetry.flush().await;
    }
}

/// The harness of this process, started on first use.
pub fn harness() -> anyhow::Result<&'static Harness> {
    static HARNESS: OnceLock<Result<Harness, String>> = OnceLock::new();
    HARNESS
        .get_or_init(|| start().map_err(|e| format!("{e:#}")))
        .as_ref()
        .map_err(|e| anyhow::anyhow!("tracing harness: {e}"))
}

fn start() -> anyhow::Result<Harness> {
    let (tx, rx) = std::sync::mpsc::channel::<anyhow::Result<Harness>>();
    std::thread::Builder::new()
        .name("otlp-collector".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = tx.send(Err(e.into()));
                    return;
                }
            };
            runtime.block_on(async move {
                let received = Received::default();
                let logs = Logs::default();
                let started = async {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                    let addr = listener.local_addr()?;
                    let service = TraceServiceServer::new(received.clone());
                    tokio::spawn(
                        tonic::transport::Server::builder()
                            .add_service(service)
                            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(
                                listener,
                            )),
                    );
                    // The exporter is built inside this runtime, which keeps driving it.
                    let endpoint = format!("http://{addr}");
                    let telemetry = opledger_grpc::telemetry::init_with(
                        &opledger_grpc::telemetry::Options {
                            service_name: "opledger-tests".into(),
                            endpoint: Some(endpoint.clone()),
                            ..Default::default()
                        },
                        logs.clone(),
                    )?;
                    anyhow::ensure!(
                        telemetry.exporting(),
                        "another subscriber was installed first"
                    );
                    Ok(Harness {
                        received: received.clone(),
                        logs: logs.clone(),
                        endpoint,
                        telemetry,
                    })
                };
                let _ = tx.send(started.await);
                std::future::pending::<()>().await;
            });
        })?;
    rx.recv()?
}
