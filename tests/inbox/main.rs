//! The webhook inbox against real PostgreSQL over real HTTP and gRPC on loopback: verification,
//! every input class of the acknowledgement table, the processor's idempotent effects, dead
//! letters and their operator API, retention, a custodian's status update as a hint that never
//! settles, a custodian's own status webhooks (Fireblocks, BitGo, Prime from the conformance
//! double) as wake-ups of the executor's lookup, and the evidence for controls 8 and 10
//! (including a real inbox process killed around its commit).

mod admin;
mod batching;
mod control_08;
mod control_10;
mod custodian;
mod deposits;
mod hints;
mod ingress;
mod listener;
mod operator;
mod processor;
mod screenings;
