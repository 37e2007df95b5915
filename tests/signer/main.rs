//! The signer against real PostgreSQL (as its own restricted role), real gRPC on loopback and a
//! real anvil node.

mod batching;
mod callers;
mod control_02;
mod control_04;
mod control_06;
mod custodian;
mod executed;
mod held_bytes;
mod isolation;
mod rotation;
mod signing;
mod tls;
