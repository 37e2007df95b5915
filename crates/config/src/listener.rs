//! Timeouts and limits of every listener of a service (`[listener]`; the same keys on every
//! service), and the [`Limits`] they give. The listeners themselves are `opledger_grpc::listener`.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The header list size HTTP/2 itself accepts (SETTINGS_MAX_HEADER_LIST_SIZE): above every
/// configurable `max_header_list_bytes`, so that the typed answer is the one clients see.
pub const HARD_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// Timeouts and limits of every listener of a service (`[listener]`; the same keys on every
/// service).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ListenerConfig {
    /// Milliseconds a connection may deliver nothing before it is closed (an idle keep-alive
    /// connection, a missing HTTP/2 preface, a request stalled in its headers or body).
    pub idle_timeout_ms: u64,
    /// Milliseconds an HTTP/1.1 request head may take to arrive (webhook and metrics listeners).
    pub header_read_timeout_ms: u64,
    /// Milliseconds a gRPC call may run before it is cancelled, and a webhook body may take to
    /// arrive whole.
    pub request_timeout_ms: u64,
    /// Connections open at once per listener; one more is accepted and closed at once.
    pub max_connections: usize,
    /// Largest request header list, bytes counted as HTTP/2 does (name + value + 32 per entry):
    /// gRPC answers RESOURCE_EXHAUSTED (`METADATA_TOO_LARGE`) above it, HTTP/1.1 answers 431.
    pub max_header_list_bytes: u32,
    /// Milliseconds between the server's HTTP/2 keep-alive pings.
    pub http2_keepalive_interval_ms: u64,
    /// Milliseconds a keep-alive ping may stay unanswered before the connection is closed.
    pub http2_keepalive_timeout_ms: u64,
}

impl Default for ListenerConfig {
    fn default() -> ListenerConfig {
        ListenerConfig {
            idle_timeout_ms: 60_000,
            header_read_timeout_ms: 10_000,
            request_timeout_ms: 30_000,
            max_connections: 1024,
            max_header_list_bytes: 16 * 1024,
            http2_keepalive_interval_ms: 20_000,
            http2_keepalive_timeout_ms: 10_000,
        }
    }
}

impl ListenerConfig {
    /// Refuses limits that would close healthy connections or accept none.
    pub fn validate(&self) -> Result<(), crate::ConfigError> {
        let invalid = |field, problem| Err(crate::ConfigError::Invalid { field, problem });
        if self.idle_timeout_ms == 0
            || self.header_read_timeout_ms == 0
            || self.request_timeout_ms == 0
            || self.http2_keepalive_interval_ms == 0
            || self.http2_keepalive_timeout_ms == 0
        {
            return invalid("listener", "timeouts must be at least 1 ms");
        }
        if self.max_connections == 0 {
            return invalid("listener.max_connections", "must be at least 1");
        }
        if self.max_header_list_bytes < 1024 || self.max_header_list_bytes >= HARD_HEADER_LIST_BYTES
        {
            return invalid(
                "listener.max_header_list_bytes",
                "must be at least 1024 and below 65536 (HTTP/2's own limit)",
            );
        }
        // A healthy client is read from at least once per keep-alive interval (its ping answer),
        // and an HTTP/1.1 client sends nothing while its request runs.
        if self.http2_keepalive_interval_ms >= self.idle_timeout_ms
            || self.request_timeout_ms >= self.idle_timeout_ms
        {
            return invalid(
                "listener.idle_timeout_ms",
                "must exceed http2_keepalive_interval_ms and request_timeout_ms",
            );
        }
        Ok(())
    }

    /// The limits these settings give.
    pub fn limits(&self) -> Limits {
        Limits {
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            max_connections: self.max_connections,
            max_header_list_bytes: self.max_header_list_bytes,
            http2_keepalive_interval: Duration::from_millis(self.http2_keepalive_interval_ms),
            http2_keepalive_timeout: Duration::from_millis(self.http2_keepalive_timeout_ms),
        }
    }
}

/// The limits of one listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Nothing read for this long: the connection is closed.
    pub idle_timeout: Duration,
    /// An HTTP/1.1 request head must arrive within this.
    pub header_read_timeout: Duration,
    /// A gRPC call is cancelled after this; a webhook body must arrive within it.
    pub request_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Largest request header list (HTTP/2 accounting), bytes.
    pub max_header_list_bytes: u32,
    /// Interval of the server's HTTP/2 keep-alive pings.
    pub http2_keepalive_interval: Duration,
    /// A ping unanswered this long closes the connection.
    pub http2_keepalive_timeout: Duration,
}

/// The limits of the default `[listener]` settings.
impl Default for Limits {
    fn default() -> Limits {
        ListenerConfig::default().limits()
    }
}
