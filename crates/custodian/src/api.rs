//! The one trait every provider profile is used through, as `Arc<dyn Custodian>`, and the one
//! each profile implements ([`Adapter`]): the same calls as plain async functions, which every
//! [`Custodian`] boxes.

use crate::classify::lookup_candidates;
use crate::types::{
    Candidate, CandidatesError, LookupOutcome, RequestBody, RequestError, Submission, SubmitError,
    TimeWindow, TransferRequest,
};
use opledger_domain::custodian::Profile;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use uuid::Uuid;

/// A boxed future that can move between threads (the trait's async methods return one, so the
/// trait stays object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A custodian account: builds the request body, submits it, looks it up by our reference, and
/// lists candidates. Every call is one HTTP request (no retry, no redirect); what to do next is
/// the domain's pure decision (`opledger_domain::custodian`) on what these calls return.
pub trait Custodian: fmt::Debug + Send + Sync {
    /// The account's profile.
    fn profile(&self) -> Profile;

    /// How long after our last request a "not found" still means "not indexed yet".
    fn consistency_window(&self) -> Duration;

    /// The body of the submission of `request`, built deterministically (the same request always
    /// gives the same bytes), with its SHA-256. Persist both before the first call; derive it again
    /// later and compare, so that what was approved is what was requested. The bytes are the
    /// ones sent, except for BitGo: its wallet passphrase (a secret) is never part of the stored
    /// body and is added as the last key when sent.
    fn request(&self, request: &TransferRequest) -> Result<RequestBody, RequestError>;

    /// Sends `body` (the stored bytes from [`Custodian::request`]) under `reference` and classifies
    /// the answer: anything not clearly understood is ambiguous, never refused. An error means
    /// nothing left this process.
    ///
    /// | What happened                                        | Answer                    |
    /// |------------------------------------------------------|---------------------------|
    /// | no answer in time                                    | `Ambiguous(Timeout)`      |
    /// | connection refused, reset or cut; body cut           | `Ambiguous(ConnectionLost)` |
    /// | 200 with the contract's body                         | `Accepted` (+ provider id) |
    /// | 200 with an unreadable or off-contract body          | `Ambiguous(Unreadable)`   |
    /// | 400 naming our reference as used (Fireblocks 1438, 1439; BitGo `DuplicateSequenceIdError`) | `Ambiguous(Duplicate)` |
    /// | 400 with a readable provider error naming another refusal | `Refused`            |
    /// | 400 with any other body                              | `Ambiguous(Unreadable)`   |
    /// | 401, 403                                             | `Refused`                 |
    /// | 409                                                  | `Ambiguous(Duplicate)`    |
    /// | 429                                                  | `Ambiguous(RateLimited)`  |
    /// | 5xx                                                  | `Ambiguous(ServerError)`  |
    /// | anything else (1xx, other 2xx, 3xx, 404, other 4xx), a body over 4 MiB | `Ambiguous(Unreadable)` |
    fn submit<'a>(
        &'a self,
        reference: Uuid,
        body: &'a [u8],
    ) -> BoxFuture<'a, Result<Submission, SubmitError>>;

    /// The provider's record of `expected.reference`, checked against `expected` (a record that
    /// differs is a failure with a mismatch, never a verdict). `no_lookup` accounts answer
    /// [`crate::LookupFailure::Unsupported`].
    ///
    /// | What happened                                        | Lookup, failure           |
    /// |------------------------------------------------------|---------------------------|
    /// | 200 with a record matching the request               | `Found`                   |
    /// | 200 with a record that differs (reference, destination, amount, asset, account) | `Failed`, `Mismatch` |
    /// | 200 unreadable (unknown status, inexact amount, ...)  | `Failed`, `Unreadable`   |
    /// | 404 with the provider's documented not-found body    | `NotFound`                |
    /// | 404 with any other body, any other status            | `Failed`, `Unreadable`    |
    /// | 401, 403                                             | `Failed`, `Unauthorized`  |
    /// | 429 / 5xx / timeout / connection                     | `Failed`, `RateLimited` / `ServerError` / `Timeout` / `ConnectionLost` |
    fn lookup<'a>(&'a self, expected: &'a TransferRequest) -> BoxFuture<'a, LookupOutcome>;

    /// Provider transactions in `window` that may be `request`'s: for `no_lookup`, those of the
    /// list with the same destination and amount; for the others, the record their lookup finds
    /// (or none).
    fn candidates<'a>(
        &'a self,
        request: &'a TransferRequest,
        window: TimeWindow,
    ) -> BoxFuture<'a, Result<Vec<Candidate>, CandidatesError>>;

    /// The provider transaction `provider_id` (the one its answer to `request` named, or an
    /// operator bound), read by its id and checked against `request`: `Ok(None)` when the
    /// provider documents it as not found; a transaction that differs is a failure with a
    /// mismatch. Profiles with a lookup by our reference answer
    /// [`crate::LookupFailure::Unsupported`] (their lookup is the authority).
    fn transaction<'a>(
        &'a self,
        request: &'a TransferRequest,
        provider_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Candidate>, CandidatesError>>;
}

/// What a provider profile implements: the calls of [`Custodian`] as plain async functions.
/// Every `Adapter` is a [`Custodian`], its futures boxed, so that each profile writes only what
/// is its own.
pub(crate) trait Adapter: fmt::Debug + Send + Sync {
    /// [`Custodian::profile`].
    fn profile(&self) -> Profile;

    /// [`Custodian::consistency_window`].
    fn consistency_window(&self) -> Duration;

    /// [`Custodian::request`].
    fn request(&self, request: &TransferRequest) -> Result<RequestBody, RequestError>;

    /// [`Custodian::submit`].
    fn submit(
        &self,
        reference: Uuid,
        body: &[u8],
    ) -> impl Future<Output = Result<Submission, SubmitError>> + Send;

    /// [`Custodian::lookup`].
    fn lookup(&self, expected: &TransferRequest) -> impl Future<Output = LookupOutcome> + Send;

    /// [`Custodian::candidates`]. By default, a profile with a lookup's: the record its lookup
    /// finds (or none), the window only checked.
    fn candidates(
        &self,
        request: &TransferRequest,
        window: TimeWindow,
    ) -> impl Future<Output = Result<Vec<Candidate>, CandidatesError>> + Send {
        async move {
            if window.end < window.start {
                return Err(CandidatesError::Window);
            }
            lookup_candidates(Adapter::lookup(self, request).await)
        }
    }

    /// [`Custodian::transaction`]. By default, unsupported.
    fn transaction(
        &self,
        _request: &TransferRequest,
        _provider_id: &str,
    ) -> impl Future<Output = Result<Option<Candidate>, CandidatesError>> + Send {
        async { Err(CandidatesError::Failed(crate::LookupFailure::Unsupported)) }
    }
}

impl<A: Adapter> Custodian for A {
    fn profile(&self) -> Profile {
        Adapter::profile(self)
    }

    fn consistency_window(&self) -> Duration {
        Adapter::consistency_window(self)
    }

    fn request(&self, request: &TransferRequest) -> Result<RequestBody, RequestError> {
        Adapter::request(self, request)
    }

    fn submit<'a>(
        &'a self,
        reference: Uuid,
        body: &'a [u8],
    ) -> BoxFuture<'a, Result<Submission, SubmitError>> {
        Box::pin(Adapter::submit(self, reference, body))
    }

    fn lookup<'a>(&'a self, expected: &'a TransferRequest) -> BoxFuture<'a, LookupOutcome> {
        Box::pin(Adapter::lookup(self, expected))
    }

    fn candidates<'a>(
        &'a self,
        request: &'a TransferRequest,
        window: TimeWindow,
    ) -> BoxFuture<'a, Result<Vec<Candidate>, CandidatesError>> {
        Box::pin(Adapter::candidates(self, request, window))
    }

    fn transaction<'a>(
        &'a self,
        request: &'a TransferRequest,
        provider_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Candidate>, CandidatesError>> {
        Box::pin(Adapter::transaction(self, request, provider_id))
    }
}
