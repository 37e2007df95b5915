//! Pure logic of the inbound webhook ingress: the three steps a provider's
//! request goes through before anything about it is stored.
//!
//! 1. [`verify`](mod@verify) checks the request against the
//!    [Standard Webhooks](https://www.standardwebhooks.com/) rules over the
//!    raw body bytes: `webhook-id`, `webhook-timestamp` within a tolerance,
//!    and at least one `v1` (HMAC-SHA256) or `v1a` (Ed25519) entry of
//!    `webhook-signature` made by one of the configured keys ([`secret`]).
//! 2. [`event`] turns a verified body into a typed [`event::Event`] (deposit
//!    confirmed, custodian transfer status, KYT result), or says precisely why
//!    it cannot, so the ingress can store and acknowledge it without acting.
//! 3. [`seal`](mod@seal) encrypts the raw body at rest with XChaCha20-Poly1305 under a
//!    rotating key, bound to its row by associated data.
//!
//! [`provider`] holds the verification schemes of endpoints whose provider signs in its own way
//! (custodians: BitGo and Coinbase Prime HMACs here; Fireblocks' JWS in `opledger-custodian`).
//!
//! [`screening`] judges stored KYT results as signed facts: a result counts only when its `v1a`
//! signature verifies with a `KYT` key of the tenant's signed trust statement (the signer's and the
//! approvals service's decision).
//!
//! This crate must never do I/O, read a clock, know about HTTP, protobuf, a
//! database or an async runtime: the ingress passes the header values it got,
//! the body bytes and the current unix time. Randomness is used only to mint
//! keys and nonces. Secrets are zeroized on drop and print as `<redacted>`;
//! no error message carries a secret, a signature, a header value or any part
//! of a body.

pub mod event;
pub mod provider;
pub mod screening;
pub mod seal;
pub mod secret;
pub mod verify;

pub use event::{
    DepositChain, DepositConfirmed, Event, ExternalRef, InvalidExternalRef, KytResult, KytVerdict,
    MalformedBody, Parsed, TransferState, TransferStatus, Unhandled, UnhandledReason, parse,
};
pub use provider::{CUSTODIAN_STATUS, EndpointScheme, ProviderDelivery, ProviderError};
pub use screening::{Screening, ScreeningRefusal, StoredScreening, judge as judge_screenings};
pub use seal::{BodyKey, BodyKeyError, OpenError, SealError, Sealed, open, row_aad, seal};
pub use secret::{Ed25519PublicKey, Ed25519SigningKey, KeyError, SigningSecret, VerificationKey};
pub use verify::{
    DEFAULT_TOLERANCE_SECS, HeaderName, Headers, Scheme, Verified, VerifyError, sign_v1, sign_v1a,
    signed_content, verify,
};
