//! The store against real PostgreSQL: the transition function, the compare-and-swap, hold
//! resolution, and immutability enforced by the database itself.

mod claims;
mod custodian;
mod distribution;
mod freeze;
mod handles;
mod immutability;
mod pass;
mod rejections;
mod release_reorg;
mod roles;
mod transitions;
mod witness;
