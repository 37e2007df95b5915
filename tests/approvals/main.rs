//! The approvals service against real PostgreSQL over real gRPC on loopback: signed approvals
//! bound to the payload hash and checked against the tenant's signed trust statement, per-tenant
//! policy, risk-flag acknowledgement, rejection releasing the hold.

mod approve;
mod policy;
mod reject;
mod signed;
