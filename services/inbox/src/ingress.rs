//! `POST /webhooks/{source}/{endpoint}`: verify over the raw bytes, classify, record with the work
//! item in one transaction, and only then answer 2xx.
//!
//! | input                                    | stored                          | answer |
//! |------------------------------------------|---------------------------------|--------|
//! | verified, new, known and allowed type    | inbox row + work item           | 200 `accepted` |
//! | verified, same id, same body             | nothing new                     | 200 `duplicate` |
//! | verified, same id, different body        | quarantine row (never applied)  | 200 `quarantined` |
//! | verified, unknown type / schema / type the endpoint may not send | inbox row, UNHANDLED | 200 `unhandled` |
//! | unknown endpoint or source               | rejection metadata only         | 404 |
//! | missing or malformed signature headers   | rejection metadata only         | 400 |
//! | bad signature, stale or future timestamp | rejection metadata only         | 401 |
//! | verified body that is not a JSON object  | rejection metadata only         | 400 |
//! | body over the limit                      | nothing                         | 413 |
//! | database unavailable, timeout            | nothing acknowledged            | 503 |
//!
//! Out-of-order events are accepted like any new event; the processor parks what the operation's
//! state does not allow yet. Error bodies name the problem, never a header value or body content.
//!
//! An endpoint of a custodian's own scheme (`fireblocks_jws`, `bitgo_hmac`, `prime_hmac`) is
//! verified with that scheme instead of Standard Webhooks, deduplicated by the provider's event id
//! and answered by the same table (module `custodian`); its events are `custodian.status` wake-ups.

use crate::keys::KeyRing;
use crate::metrics::{IngressStats, Outcome};
use crate::recorder::{Class, Pending, Recorder};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use jwks::{JwksCache, JwksSettings};
use opledger_domain::ids::OperationId;
use opledger_store::inbox::{Endpoint, Recorded};
use opledger_store::roles::InboxStore;
use opledger_webhook::event::{self, Event, Parsed};
use opledger_webhook::secret::VerificationKey;
use opledger_webhook::verify::{self, Headers, Verified};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument as _;

mod custodian;
pub mod jwks;

/// Endpoints cached at most this many at once (the cache is cleared when full).
const CACHE_CAPACITY: usize = 10_000;

/// A signature the cached keys refuse makes the ingress re-read the endpoint's keys (a secret
/// added with `add-secret` verifies at once), at most once per this interval per endpoint, so a
/// flood of bad signatures costs the database a bounded number of reads.
const RELOAD_INTERVAL: Duration = Duration::from_millis(100);

/// An endpoint with its keys opened, ready to verify.
#[derive(Debug)]
struct Resolved {
    endpoint: Arc<Endpoint>,
    keys: Vec<VerificationKey>,
}

/// Endpoints by id, with when they were loaded.
type EndpointCache = HashMap<String, (Instant, Arc<Resolved>)>;

/// The ingress's shared state.
#[derive(Debug, Clone)]
pub struct Ingress {
    store: InboxStore,
    recorder: Recorder,
    ring: Arc<KeyRing>,
    cache: Arc<Mutex<EndpointCache>>,
    cache_ttl: Duration,
    tolerance_secs: i64,
    timeout: Duration,
    stats: Arc<IngressStats>,
    jwks: Arc<JwksCache>,
}

/// Settings of the ingress.
#[derive(Debug, Clone)]
pub struct IngressSettings {
    /// Largest body accepted.
    pub max_body_bytes: usize,
    /// Whole-request budget.
    pub timeout: Duration,
    /// Signature timestamp tolerance, seconds, both ways.
    pub tolerance_secs: i64,
    /// How long an endpoint's keys stay cached.
    pub cache_ttl: Duration,
    /// A request body must arrive whole within this (from its headers); else 408, nothing read.
    pub body_timeout: Duration,
    /// How custodians' webhook key sets are fetched and kept (`fireblocks_jws` endpoints).
    pub jwks: JwksSettings,
}

/// The ingress router.
pub fn router(
    store: InboxStore,
    ring: Arc<KeyRing>,
    stats: Arc<IngressStats>,
    settings: IngressSettings,
) -> Router {
    let ingress = Ingress {
        recorder: Recorder::new(store.clone()),
        store,
        ring,
        cache: Arc::new(Mutex::new(HashMap::new())),
        cache_ttl: settings.cache_ttl,
        tolerance_secs: settings.tolerance_secs,
        timeout: settings.timeout,
        stats,
        jwks: Arc::new(JwksCache::new(settings.jwks)),
    };
    Router::new()
        .route("/webhooks/{source}/{endpoint}", post(receive))
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            settings.body_timeout,
            body_deadline,
        ))
        .with_state(ingress)
}

/// Bounds the time a request body may take to arrive: a body still incomplete after the budget
/// fails its read, and the request is answered 408 with nothing stored (a slow drip of body bytes
/// cannot hold a request, or its memory, open).
async fn body_deadline(
    State(budget): State<Duration>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let body = opledger_grpc::listener::DeadlineBody::new(body, budget);
    let expired = body.expired();
    let response = next
        .run(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::new(body),
        ))
        .await;
    if expired.load(std::sync::atomic::Ordering::Relaxed) {
        return answer(
            StatusCode::REQUEST_TIMEOUT,
            "body_timeout",
            "the request body did not arrive in time",
        );
    }
    response
}

fn answer(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{{\"status\":\"{code}\",\"message\":\"{message}\"}}"),
    )
        .into_response()
}

fn is_label(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

fn is_endpoint_id(text: &str) -> bool {
    text.len() == 36
        && text.starts_with("whe_")
        && text[4..]
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

/// A header value, or `None` when absent; a repeated header counts as absent (never pick one).
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h [u8]> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    Some(first.as_bytes())
}

async fn receive(
    State(ingress): State<Ingress>,
    Path((source, endpoint_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // Route parameters and headers are the sender's: only the route template is recorded.
    let span = tracing::info_span!(
        "webhook.receive",
        otel.name = "POST /webhooks/{source}/{endpoint_id}",
        otel.kind = "server",
        opledger.service = "inbox",
        http.request.method = "POST",
        http.route = "/webhooks/{source}/{endpoint_id}",
        http.response.status_code = tracing::field::Empty,
    );
    opledger_grpc::telemetry::propagation::parent_on_headers(&span, &headers);
    let response = receive_in_span(ingress, source, endpoint_id, headers, body)
        .instrument(span.clone())
        .await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}

async fn receive_in_span(
    ingress: Ingress,
    source: String,
    endpoint_id: String,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let timeout = ingress.timeout;
    match tokio::time::timeout(
        timeout,
        ingress.handle(&source, &endpoint_id, &headers, &body),
    )
    .await
    {
        Ok(response) => response,
        Err(_) => {
            // The transaction may or may not have committed: no 2xx, the sender retries and the
            // dedup key makes the retry safe.
            ingress.stats.count(Outcome::Unavailable);
            answer(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "request timed out; retry",
            )
        }
    }
}

impl Ingress {
    async fn endpoint(&self, endpoint_id: &str) -> Result<Option<Arc<Resolved>>, ()> {
        if let Ok(cache) = self.cache.lock()
            && let Some((at, resolved)) = cache.get(endpoint_id)
            && at.elapsed() < self.cache_ttl
        {
            return Ok(Some(resolved.clone()));
        }
        self.load(endpoint_id).await
    }

    /// The endpoint read again from the database after its cached keys refused a signature, or
    /// `None` when it was loaded less than [`RELOAD_INTERVAL`] ago (or is gone, or the read
    /// failed: the refusal stands).
    async fn reloaded(&self, endpoint_id: &str) -> Option<Arc<Resolved>> {
        if let Ok(mut cache) = self.cache.lock() {
            match cache.get_mut(endpoint_id) {
                Some((at, _)) if at.elapsed() < RELOAD_INTERVAL => return None,
                // Claim this interval's reload before reading, so concurrent refusals read once.
                Some((at, _)) => *at = Instant::now(),
                None => {}
            }
        }
        self.load(endpoint_id).await.ok().flatten()
    }

    async fn load(&self, endpoint_id: &str) -> Result<Option<Arc<Resolved>>, ()> {
        let endpoint = match self.store.webhook_endpoint(endpoint_id).await {
            Ok(Some(endpoint)) => endpoint,
            Ok(None) => return Ok(None),
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "endpoint lookup failed");
                return Err(());
            }
        };
        let keys = self.ring.open_endpoint_keys(&endpoint);
        let resolved = Arc::new(Resolved {
            endpoint: Arc::new(endpoint),
            keys,
        });
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
            cache.insert(endpoint_id.to_owned(), (Instant::now(), resolved.clone()));
        }
        Ok(Some(resolved))
    }

    async fn reject(
        &self,
        outcome: Outcome,
        endpoint: Option<&Endpoint>,
        source: &str,
        endpoint_id: &str,
        reason: &str,
    ) {
        self.stats.count(outcome);
        // Minimal metadata only: a label that passed validation (else "invalid"), the endpoint id's
        // public prefix, the reason. Best effort: monitoring must not turn a 4xx into a 5xx.
        let source = if is_label(source) { source } else { "invalid" };
        let prefix: String = endpoint_id.chars().take(12).collect();
        let prefix = if prefix
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            prefix
        } else {
            "invalid".to_owned()
        };
        if let Err(e) = self
            .store
            .record_webhook_rejection(endpoint.map(|e| e.tenant_id), source, &prefix, reason)
            .await
        {
            tracing::warn!(error = %e.log_safe(), "webhook rejection not recorded");
        }
        tracing::info!(reason, "webhook refused");
    }

    async fn handle(
        &self,
        source: &str,
        endpoint_id: &str,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Response {
        let resolved = match self.resolved(source, endpoint_id).await {
            Ok(resolved) => resolved,
            Err(refused) => return refused,
        };
        if resolved.endpoint.scheme.is_custodian() {
            return self
                .custodian(&resolved, source, endpoint_id, headers, body)
                .await;
        }
        let endpoint = &resolved.endpoint;
        let verified = match self
            .verified(&resolved, source, endpoint_id, headers, body)
            .await
        {
            Ok(verified) => verified,
            Err(refused) => return refused,
        };
        let class = match self.classify(endpoint, source, endpoint_id, body).await {
            Ok(class) => class,
            Err(refused) => return refused,
        };
        let sent_at = chrono::DateTime::from_timestamp(verified.timestamp(), 0)
            .unwrap_or_else(chrono::Utc::now);
        let event_id = verified.event_id();
        let Some(sealed) = self.ring.seal_body(endpoint, event_id, body) else {
            self.stats.count(Outcome::BadRequest);
            return answer(StatusCode::PAYLOAD_TOO_LARGE, "too_large", "body too large");
        };
        let pending = Pending {
            endpoint: endpoint.clone(),
            event_id: event_id.to_owned(),
            body_hash: Sha256::digest(body).into(),
            sent_at,
            body: sealed,
            class,
            signature: verified.signature().copied(),
        };
        // Committed (together with the deliveries that are ready at the same time) before the 2xx.
        self.record(pending).await
    }

    /// The endpoint `endpoint_id` of `source`, or the answer refusing the request (404 for an
    /// unknown endpoint or source, 503 when the store is unavailable).
    async fn resolved(&self, source: &str, endpoint_id: &str) -> Result<Arc<Resolved>, Response> {
        if !is_label(source) || !is_endpoint_id(endpoint_id) {
            self.reject(
                Outcome::UnknownEndpoint,
                None,
                source,
                endpoint_id,
                "unknown_endpoint",
            )
            .await;
            return Err(answer(
                StatusCode::NOT_FOUND,
                "unknown_endpoint",
                "no such endpoint",
            ));
        }
        match self.endpoint(endpoint_id).await {
            Ok(Some(r)) if r.endpoint.source == source => Ok(r),
            Ok(_) => {
                self.reject(
                    Outcome::UnknownEndpoint,
                    None,
                    source,
                    endpoint_id,
                    "unknown_endpoint",
                )
                .await;
                Err(answer(
                    StatusCode::NOT_FOUND,
                    "unknown_endpoint",
                    "no such endpoint",
                ))
            }
            Err(()) => {
                self.stats.count(Outcome::Unavailable);
                Err(answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "store unavailable; retry",
                ))
            }
        }
    }

    /// The delivery verified over the raw bytes with the endpoint's keys (re-read once when they
    /// refuse it), or the answer refusing it (400 for missing or malformed headers, else 401).
    async fn verified(
        &self,
        resolved: &Resolved,
        source: &str,
        endpoint_id: &str,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<Verified, Response> {
        let endpoint = &resolved.endpoint;
        let signed = Headers {
            id: single(headers, "webhook-id"),
            timestamp: single(headers, "webhook-timestamp"),
            signature: single(headers, "webhook-signature"),
        };
        let now = chrono::Utc::now().timestamp();
        let mut checked = verify::verify(&resolved.keys, &signed, body, now, self.tolerance_secs);
        if let Err(verify::VerifyError::NoValidSignature | verify::VerifyError::NoKeys) = checked
            && let Some(fresh) = self.reloaded(endpoint_id).await
            && fresh.endpoint.source == source
        {
            checked = verify::verify(&fresh.keys, &signed, body, now, self.tolerance_secs);
        }
        match checked {
            Ok(v) => Ok(v),
            Err(e) => {
                let (status, outcome) = match e.code() {
                    "missing_header" | "invalid_header" => {
                        (StatusCode::BAD_REQUEST, Outcome::BadRequest)
                    }
                    _ => (StatusCode::UNAUTHORIZED, Outcome::BadSignature),
                };
                self.reject(outcome, Some(endpoint), source, endpoint_id, e.code())
                    .await;
                let message = match e.header() {
                    Some(h) => format!("{}: {}", h.as_str(), e.code()),
                    None => e.code().to_owned(),
                };
                Err(answer(status, e.code(), &message))
            }
        }
    }

    /// How a verified body is stored (an event the endpoint may send, or UNHANDLED), or the
    /// answer refusing a body that is not a JSON object (400).
    async fn classify(
        &self,
        endpoint: &Endpoint,
        source: &str,
        endpoint_id: &str,
        body: &Bytes,
    ) -> Result<Class, Response> {
        match event::parse(body) {
            Err(e) => {
                self.reject(
                    Outcome::BadRequest,
                    Some(endpoint),
                    source,
                    endpoint_id,
                    e.code(),
                )
                .await;
                Err(answer(
                    StatusCode::BAD_REQUEST,
                    e.code(),
                    "body is not a JSON object",
                ))
            }
            Ok(Parsed::Known(event)) => {
                let event_type = event.event_type();
                Ok(if endpoint.allowed_types.iter().any(|t| t == event_type) {
                    Class::Event {
                        event_type,
                        op_id: operation_of(&event),
                    }
                } else {
                    Class::Unhandled {
                        event_type: Some(event_type.to_owned()),
                        reason: "type_not_allowed",
                    }
                })
            }
            Ok(Parsed::Unhandled(u)) => Ok(Class::Unhandled {
                event_type: u.event_type,
                reason: u.reason.code(),
            }),
        }
    }

    /// Records a verified delivery (committed before the 2xx) and answers how it was recorded.
    async fn record(&self, pending: Pending) -> Response {
        match self.recorder.record(pending).await {
            Ok(recorded) => {
                let (outcome, code) = match recorded {
                    Recorded::Accepted { .. } => (Outcome::Accepted, "accepted"),
                    Recorded::Unhandled { .. } => (Outcome::Unhandled, "unhandled"),
                    Recorded::Duplicate { .. } => (Outcome::Duplicate, "duplicate"),
                    Recorded::Quarantined { .. } => (Outcome::Quarantined, "quarantined"),
                };
                self.stats.count(outcome);
                if matches!(outcome, Outcome::Quarantined | Outcome::Unhandled) {
                    tracing::warn!(outcome = code, "webhook stored but not applied");
                }
                answer(StatusCode::OK, code, "recorded")
            }
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "webhook not recorded");
                self.stats.count(Outcome::Unavailable);
                answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "not recorded; retry",
                )
            }
        }
    }
}

fn operation_of(event: &Event) -> Option<OperationId> {
    match event {
        Event::DepositConfirmed(_) => None,
        Event::TransferStatus(t) => Some(t.operation_id()),
        Event::KytResult(k) => Some(k.operation_id()),
    }
}
