//! gRPC request metrics of this process: a tower layer every server built by [`crate::server`]
//! carries, and their Prometheus text.
//!
//! - `opledger_grpc_requests_total{service,method,code}`: calls answered, by status code.
//! - `opledger_grpc_request_duration_seconds{service,method}`: a histogram of the time from
//!   request to response headers (for unary calls: the whole call).
//!
//! Paths that are not a method of the service (UNIMPLEMENTED) are counted under
//! `method="unknown"`, so a caller cannot grow the label set.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tonic::codegen::http;

/// Upper bounds of the latency histogram, seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// gRPC status code names, by number.
const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

#[derive(Debug, Default)]
struct MethodStats {
    codes: BTreeMap<usize, u64>,
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Stats by service, then by method.
type Registry = BTreeMap<String, BTreeMap<String, MethodStats>>;

/// The registry of one process.
#[derive(Debug, Default)]
pub struct GrpcMetrics {
    methods: Mutex<Registry>,
}

impl GrpcMetrics {
    /// Records one answered call.
    pub fn record(&self, service: &str, method: &str, code: usize, elapsed: Duration) {
        let method = if code == 12 { "unknown" } else { method };
        let seconds = elapsed.as_secs_f64();
        let Ok(mut services) = self.methods.lock() else {
            return;
        };
        // Keys are allocated once per (service, method), not on every call.
        if !services.contains_key(service) {
            services.insert(service.to_owned(), BTreeMap::new());
        }
        let Some(methods) = services.get_mut(service) else {
            return;
        };
        if !methods.contains_key(method) {
            methods.insert(method.to_owned(), MethodStats::default());
        }
        let Some(stats) = methods.get_mut(method) else {
            return;
        };
        *stats.codes.entry(code.min(CODES.len() - 1)).or_default() += 1;
        for (bound, bucket) in BUCKETS.iter().zip(stats.buckets.iter_mut()) {
            if seconds <= *bound {
                *bucket += 1;
            }
        }
        stats.count += 1;
        stats.sum += seconds;
    }

    /// The Prometheus text of every recorded method.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# HELP opledger_grpc_requests_total gRPC calls answered, by status code.\n\
             # TYPE opledger_grpc_requests_total counter\n",
        );
        let Ok(methods) = self.methods.lock() else {
            return out;
        };
        let all = || {
            methods.iter().flat_map(|(service, m)| {
                m.iter()
                    .map(move |(method, stats)| (service, method, stats))
            })
        };
        for (service, method, stats) in all() {
            for (code, n) in &stats.codes {
                let _ = writeln!(
                    out,
                    "opledger_grpc_requests_total{{service=\"{service}\",method=\"{method}\",code=\"{}\"}} {n}",
                    CODES[*code]
                );
            }
        }
        out.push_str(
            "# HELP opledger_grpc_request_duration_seconds Time from request to response headers.\n\
             # TYPE opledger_grpc_request_duration_seconds histogram\n",
        );
        for (service, method, stats) in all() {
            let labels = format!("service=\"{service}\",method=\"{method}\"");
            for (bound, n) in BUCKETS.iter().zip(stats.buckets.iter()) {
                let _ = writeln!(
                    out,
                    "opledger_grpc_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "opledger_grpc_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}\n\
                 opledger_grpc_request_duration_seconds_sum{{{labels}}} {}\n\
                 opledger_grpc_request_duration_seconds_count{{{labels}}} {}",
                stats.count, stats.sum, stats.count
            );
        }
        out
    }
}

/// The process-wide registry.
pub fn global() -> &'static GrpcMetrics {
    static GLOBAL: OnceLock<GrpcMetrics> = OnceLock::new();
    GLOBAL.get_or_init(GrpcMetrics::default)
}

/// The tower layer recording every call of a server into [`global`].
#[derive(Debug, Clone)]
pub struct MetricsLayer {
    service: Arc<str>,
}

impl MetricsLayer {
    /// A layer labelling calls with `service` (the gRPC service name).
    pub fn new(service: &str) -> MetricsLayer {
        MetricsLayer {
            service: Arc::from(service),
        }
    }
}

impl<S> tower::Layer<S> for MetricsLayer {
    type Service = MetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        MetricsService {
            inner,
            service: self.service.clone(),
        }
    }
}

/// See [`MetricsLayer`].
#[derive(Debug, Clone)]
pub struct MetricsService<S> {
    inner: S,
    service: Arc<str>,
}

impl<S, B, R> tower::Service<http::Request<B>> for MetricsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().to_owned();
        let service = self.service.clone();
        let started = Instant::now();
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await;
            let code = match &response {
                Ok(r) => usize::try_from(opledger_telemetry::grpc::status_of(r)).unwrap_or(2),
                Err(_) => 2,
            };
            global().record(&service, &method, code, started.elapsed());
            response
        })
    }
}

/// `GET /metrics` with this process's gRPC metrics only (services without database gauges).
pub fn router() -> axum::Router {
    axum::Router::new().route(
        "/metrics",
        axum::routing::get(|| async {
            (
                [(http::header::CONTENT_TYPE, TEXT_FORMAT)],
                global().render(),
            )
        }),
    )
}

/// The content type of the Prometheus text exposition every `/metrics` endpoint serves.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4";

/// The answer of a `/metrics` endpoint whose `gauges` are read from the database at scrape time:
/// their text followed by this process's gRPC metrics, or 503 with a one-line comment when the
/// store could not be read (logged through its log-safe form).
pub fn store_scrape(
    gauges: Result<String, opledger_store::StoreError>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let format = [(http::header::CONTENT_TYPE, TEXT_FORMAT)];
    match gauges {
        Ok(text) => (format, text + &global().render()).into_response(),
        Err(e) => {
            tracing::warn!(error = %e.log_safe(), "metrics unavailable");
            (
                http::StatusCode::SERVICE_UNAVAILABLE,
                format,
                "# store unavailable\n",
            )
                .into_response()
        }
    }
}

/// Serves [`router`] on `listener` in a background task.
pub fn spawn_endpoint(
    listener: tokio::net::TcpListener,
    limits: crate::listener::Limits,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ =
            crate::listener::serve_http(listener, router(), limits, std::future::pending()).await;
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_code_and_timed_into_cumulative_buckets() {
        let m = GrpcMetrics::default();
        m.record("s", "/p.S/A", 0, Duration::from_millis(3));
        m.record("s", "/p.S/A", 5, Duration::from_millis(30));
        m.record("s", "/random/path", 12, Duration::from_millis(1));
        let text = m.render();
        assert!(text.contains(
            "opledger_grpc_requests_total{service=\"s\",method=\"/p.S/A\",code=\"OK\"} 1"
        ));
        assert!(text.contains(
            "opledger_grpc_requests_total{service=\"s\",method=\"/p.S/A\",code=\"NOT_FOUND\"} 1"
        ));
        assert!(text.contains("method=\"unknown\",code=\"UNIMPLEMENTED\"} 1"));
        assert!(!text.contains("/random/path"));
        assert!(text.contains(
            "opledger_grpc_request_duration_seconds_bucket{service=\"s\",method=\"/p.S/A\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "opledger_grpc_request_duration_seconds_bucket{service=\"s\",method=\"/p.S/A\",le=\"0.05\"} 2"
        ));
        assert!(text.contains(
            "opledger_grpc_request_duration_seconds_count{service=\"s\",method=\"/p.S/A\"} 2"
        ));
    }
}
