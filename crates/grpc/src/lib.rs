//! The gRPC edge shared by opledger services: API-key authentication, typed error statuses with
//! `google.rpc.ErrorInfo`, and the standard server furniture (health, reflection, logging).
//!
//! Services use this crate at their edge only. It never decides business outcomes.

pub mod auth;
pub mod server;
pub mod status;

pub use auth::{Authenticator, Principal};
pub use status::{ErrorReason, error_status};
