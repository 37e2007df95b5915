//! The broadcaster against real PostgreSQL, the real signer over gRPC and a real anvil node.

mod control_06;
mod e2e;
mod fairness;
mod gate;
mod rotation;
mod submit;
mod tls;
mod watch;
