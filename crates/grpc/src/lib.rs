//! The gRPC edge shared by opledger services: API-key authentication, typed error statuses with
//! `google.rpc.ErrorInfo`, the one mapping of store errors to statuses, conversions of the shared
//! wire types, and the standard server furniture (health, reflection, logging, tracing, request
//! metrics, readiness that follows the database).
//!
//! Services use this crate at their edge only. It never decides business outcomes.

pub mod auth;
pub mod client;
pub mod convert;
pub mod edge;
pub mod listener;
pub mod metrics;
pub mod readiness;
mod serve_error;
pub mod server;
pub mod status;
mod store_error;

pub use auth::{Authenticator, Principal};
pub use serve_error::ServeError;
pub use status::{ErrorReason, error_status};
pub use store_error::{approval_refusal_status, store_status};

/// Distributed tracing (re-exported so services trace their steps through their gRPC edge).
pub use opledger_telemetry as telemetry;
