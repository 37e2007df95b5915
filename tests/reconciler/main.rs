//! The reconciler against real PostgreSQL, the real signer and broadcaster, and a real anvil
//! node: evidence decides, absence of evidence never releases a hold.

mod alerts;
mod control_07;
mod dropped;
mod escalation;
mod evidence;
mod operator;
mod release_reorg;
