//! Custodian adapters: one trait ([`Custodian`]), three provider profiles, request signing and
//! webhook verification. The wire contract is `docs/custodian-wire.md`.
//!
//! - `lookup_by_reference` ([`Fireblocks`]): Fireblocks v1 as documented; RS256 request tokens;
//!   webhooks v2 verified against the provider's JWKS ([`verify_fireblocks_webhook`]).
//! - `one_send_per_reference` ([`BitGo`]): sendcoins with `sequenceId`, transfer lookup by it;
//!   HMAC webhooks ([`verify_bitgo_webhook`]).
//! - `no_lookup` ([`Prime`]): Coinbase Prime withdrawals with `idempotency_key`, HMAC-signed
//!   requests, no lookup: candidates from the transaction list for an operator.
//!
//! The adapters decide nothing: they build the exact request, send it once, and classify what came
//! back into the domain's vocabulary (`opledger_domain::custodian`), conservatively (what is not
//! clearly understood is ambiguous, never refused; see the tables in `classify`). Identifiers
//! (references, addresses, hashes, provider ids) and secrets never appear in `Debug` output or
//! error messages.

#![warn(missing_docs)]

mod amount;
mod api;
mod bitgo;
mod classify;
mod codec;
mod config;
mod fireblocks;
mod listed;
mod prime;
mod route;
mod secret;
mod setup;
#[cfg(test)]
mod testutil;
mod transport;
mod types;

pub use amount::{AmountError, MAX_DECIMALS, from_whole_units, to_whole_units};
pub use api::{BoxFuture, Custodian};
pub use bitgo::BitGo;
pub use bitgo::webhook::{BitGoEvent, verify_bitgo_webhook};
pub use bitgo::wire::map_state as map_bitgo_state;
pub use config::{AccountConfig, BitGoConfig, FireblocksConfig, PrimeConfig, SetupError};
pub use fireblocks::Fireblocks;
pub use fireblocks::jwt::{Claims as FireblocksClaims, FireblocksSigner, TOKEN_LIFETIME_SECS};
pub use fireblocks::webhook::{
    FireblocksEvent, FireblocksEventKind, FireblocksTransaction, Jwks, JwksError, JwksFetcher,
    verify_fireblocks_webhook,
};
pub use listed::{list_bound, paid_elsewhere, read_bound, window_since};
pub use prime::Prime;
pub use prime::wire::{map_status as map_prime_status, signature as prime_signature};
pub use route::{AccountRoute, account_name, check_routes};
pub use setup::build;
pub use types::{
    Candidate, CandidatesError, LookupFailure, LookupOutcome, Mismatch, ProviderRecord,
    RequestBody, RequestError, Submission, SubmitError, TimeWindow, TransferRequest, WebhookError,
};
