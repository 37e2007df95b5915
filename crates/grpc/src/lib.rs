//! The gRPC edge shared by opledger services: API-key authentication, typed error statuses with
//! `google.rpc.ErrorInfo`, the one mapping of store errors to statuses, conversions of the shared
//! wire types, the clients of the signer, the listener limits and the layers every server stacks
//! (request metrics, typed answers to malformed requests). Serving itself (health, reflection,
//! readiness that follows the database) is `opledger-server`'s.
//!
//! Services use this crate at their edge only. It never decides business outcomes.

pub mod auth;
pub mod client;
pub mod convert;
pub mod edge;
pub mod listener;
pub mod metrics;
pub mod status;
mod store_error;

pub use auth::{Authenticator, Principal};
pub use status::{ErrorReason, error_status};
pub use store_error::{approval_refusal_status, store_status};

/// Distributed tracing (re-exported so services trace their steps through their gRPC edge).
pub use opledger_telemetry as telemetry;
