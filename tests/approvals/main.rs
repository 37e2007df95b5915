//! The approvals service against real PostgreSQL over real gRPC on loopback: approvals bound to
//! the payload hash, per-tenant policy, risk-flag acknowledgement, rejection releasing the hold.

mod approve;
mod policy;
mod reject;
