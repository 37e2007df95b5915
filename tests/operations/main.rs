//! The operations service against real PostgreSQL over real gRPC on loopback.

mod auth;
mod control_01;
mod control_03;
mod control_05;
mod control_11;
mod create;
mod credits;
mod executor;
mod ledger;
mod listener;
mod listing;
mod memo;
mod range;
