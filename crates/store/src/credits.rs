//! Credits that need two principals (migration 29): proposals by the inbox (deposits) and the
//! operations API (operator credits, with operators' signed statements), attestations and
//! refusals by the witness.
//!
//! A proposal is not spendable: it shows as the balance's `pending` until the witness attests it
//! through `opledger_attest_credit`, which records the attestation and applies the credit in one
//! transaction, once. Proposals, statements, attestations and refusals are append-only; each is
//! insertable only by its own role. Identifiers (transaction hashes, recipients) are stored as
//! `0x` and lowercase hex and never appear in errors.
//!
//! Its parts: `types` (credits as the store hands them out), `records` (reading a credit with its
//! statements), `propose` (proposals and operators' statements) and `witnessing` (the witness's
//! queue, attestations, refusals and the deposit addresses it checks).

mod propose;
mod records;
mod types;
mod witnessing;

pub use propose::propose_in;
pub use types::{
    CreditKind, CreditRecord, CreditState, DepositEvidence, NewProposal, OperatorSignature,
    Proposed,
};
pub use witnessing::{CreditCursor, CreditToWitness};
