//! The signing procedure: verify, claim, sign, persist, answer. No step trusts a value it did not
//! recompute from the stored fields.
//!
//! [`Signer::sign_withdrawal`] runs, in this order: the payload hash recomputed from the stored
//! fields (`verify`), the approvals and screenings against the pinned trust root (`verify`), the
//! transfer planned within the fee cap (`plan`), the claim (`claim`), both checks again under the
//! claim, and the attempt persisted with its nonce (`withdrawal`). Fee bumps and cancels are
//! `replacement`.

mod claim;
mod error;
mod plan;
mod replacement;
mod signer;
mod verify;
mod withdrawal;

pub use error::{Ending, Refusal, SignerError, unverified_kind};
pub use signer::{Signed, Signer};
