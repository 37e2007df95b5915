//! A tenant's trust root and the verification of a withdrawal's approvals against it, shared by
//! every executor of withdrawals (the signer, the custodian executor) so that each verifies
//! exactly the same way. No I/O: the caller reads the evidence from the store, records what this
//! crate decides (a newly accepted trust statement version, a security event for a refusal) and
//! names its own security events.
//!
//! Per tenant, [`TrustRoots`] holds the administrator keys pinned in the caller's own
//! configuration (`[[trust_roots]]`: [`TrustRootConfig`], checked by [`check_trust_roots`]) and
//! the newest trust statement it has accepted. A withdrawal's [`Evidence`] verifies
//! ([`TrustRoots::verify`]) only when every stored decision verifies against a trust statement
//! signed by a pinned key, no older than the root's minimum, the version the caller recorded as
//! accepted or one already accepted in this process, and the tenant's policy is met
//! (`opledger_domain::approval::evaluate`) by approvals whose signed statements acknowledge every
//! risk flag of the withdrawal; and, for an asset the statement requires a KYT pass for, when a
//! screening pass signed by a KYT key of the statement is recorded and no signed failure is
//! (`opledger_webhook::screening::judge`). A signed failure refuses any asset. Anything short is
//! an [`Unverified`].
//!
//! The payload hash is the caller's first check ([`Evidence::payload_hash_approved`]): recomputed
//! from the stored fields, it must equal the stored hash and the hash every decision names.

mod checks;
mod config;
mod evidence;
mod roots;
mod unverified;

pub use config::{TrustRootConfig, check_trust_roots};
pub use evidence::Evidence;
/// The refusal [`Unverified::KytMisplaced`] carries, named here so callers need not name its crate.
pub use opledger_webhook::screening::ScreeningRefusal;
pub use roots::{Approval, TrustRoots};
pub use unverified::Unverified;

#[cfg(test)]
mod tests;
