//! What the adapters take and give: the request, the stored body, a submission's and a lookup's
//! outcome, candidates, and the errors. Every type whose fields carry an identifier (our reference,
//! an address, a hash, a provider id) implements `Debug` by hand and shows none of them.

use chrono::{DateTime, Utc};
use opledger_domain::custodian::{Lookup, ProviderStatus, SubmitAnswer};
use opledger_domain::evidence::{Address, Hash32};
use std::fmt;
use std::time::Duration;
use uuid::Uuid;

/// What `<redacted>` fields print as.
const REDACTED: &str = "<redacted>";

/// The stored, approved fields of one withdrawal the custodian executes.
#[derive(Clone, PartialEq, Eq)]
pub struct TransferRequest {
    /// Our reference: the operation id (sent lowercase and hyphenated).
    pub reference: Uuid,
    /// The destination account.
    pub destination: Address,
    /// The amount in base units (wei).
    pub amount: u128,
    /// Free text, sent only by the profiles whose contract carries one (Fireblocks' `note`).
    pub note: Option<String>,
}

impl fmt::Debug for TransferRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransferRequest")
            .field("reference", &REDACTED)
            .field("destination", &REDACTED)
            .field("amount", &self.amount)
            .field("note", &self.note.as_ref().map(|_| REDACTED))
            .finish()
    }
}

/// The body of a submission, built deterministically from a [`TransferRequest`]: persisted before
/// the first call, sent as stored, and re-derived later to check that what was approved is what
/// was requested.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestBody {
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Their SHA-256.
    pub sha256: [u8; 32],
}

impl fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBody")
            .field("len", &self.bytes.len())
            .field("sha256", &REDACTED)
            .finish()
    }
}

/// Why no body could be built for a request (nothing is sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A custodian is never asked for nothing.
    #[error("amount: must be positive")]
    ZeroAmount,
    /// The body could not be encoded (an asset's decimals out of range).
    #[error("the body could not be encoded")]
    Encoding,
}

/// What one submission returned: the answer, and what the provider said beside it.
#[derive(Clone, PartialEq, Eq)]
pub struct Submission {
    /// The classified answer.
    pub answer: SubmitAnswer,
    /// The provider's id for the request, when an accepted answer names one.
    pub provider_id: Option<String>,
    /// The provider's `Retry-After` (seconds form), when given.
    pub retry_after: Option<Duration>,
    /// The HTTP status, when an answer arrived.
    pub http_status: Option<u16>,
    /// The SHA-256 of the answer's body, when a whole body arrived.
    pub body_sha256: Option<[u8; 32]>,
}

impl fmt::Debug for Submission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submission")
            .field("answer", &self.answer)
            .field("provider_id", &self.provider_id.as_ref().map(|_| REDACTED))
            .field("retry_after", &self.retry_after)
            .field("http_status", &self.http_status)
            .finish_non_exhaustive()
    }
}

/// Why a submission was not made. Nothing left this process: the call may be made again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The stored body is not one this adapter builds (not its JSON, or a key it adds itself).
    #[error("body: not a request this adapter builds")]
    Body,
    /// The stored body carries another reference than the one given.
    #[error("body: carries another reference")]
    Reference,
    /// The request could not be signed (clock before 1970, a signing failure).
    #[error("the request could not be signed")]
    Signing,
    /// The HTTP request could not be built.
    #[error("the HTTP request could not be built")]
    Build,
}

/// Which fields of a provider's record differ from what we requested: a security event, never a
/// verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mismatch {
    /// The record's reference (`externalTxId`, `sequenceId`).
    pub reference: bool,
    /// Its destination.
    pub destination: bool,
    /// Its amount.
    pub amount: bool,
    /// Its asset (or coin).
    pub asset: bool,
    /// Its source account (the wallet).
    pub account: bool,
}

impl Mismatch {
    /// Whether any field differs.
    pub fn any(self) -> bool {
        self.reference || self.destination || self.amount || self.asset || self.account
    }
}

/// Why a lookup is [`Lookup::Failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupFailure {
    /// No answer in time.
    Timeout,
    /// The connection failed or the answer was cut.
    ConnectionLost,
    /// A 5xx.
    ServerError,
    /// A 429.
    RateLimited,
    /// An answer this adapter cannot read (another status, a body off the contract, an unknown
    /// status, an amount without an exact conversion, a 404 without the documented body).
    Unreadable,
    /// The provider refused our credentials (401, 403).
    Unauthorized,
    /// The record differs from what was requested.
    Mismatch(Mismatch),
    /// The profile has no lookup by our reference (`no_lookup`).
    Unsupported,
    /// The transaction an operator bound says nothing was broadcast, but another listed
    /// transaction with the same destination and amount could be this withdrawal's payment:
    /// nothing is concluded (`listed::paid_elsewhere`).
    Ambiguous,
    /// The transaction an operator bound says nothing was broadcast, but the provider's
    /// consistency window since our last send has not passed: its list may not show every
    /// transaction yet, ours among them. Nothing is concluded until it has.
    ListingLag,
    /// The followed transaction was recreated by the provider under a new id (Coinbase Prime's
    /// `TRANSACTION_RETRIED`): the payment, if any, is the new one's, which an operator binds.
    /// Nothing is concluded from the old one.
    Recreated,
    /// The request could not be signed or built: nothing was sent.
    NotSent,
}

/// The fields of a provider's record kept as evidence.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderRecord {
    /// The provider's id of the transaction (transfer).
    pub provider_id: String,
    /// Our reference as the record carries it.
    pub reference: String,
    /// The status as the provider wrote it.
    pub status_text: String,
    /// The sub-status, when the provider gives one.
    pub sub_status: Option<String>,
    /// The status mapped onto the decision vocabulary.
    pub status: ProviderStatus,
    /// The hash broadcast, if any.
    pub tx_hash: Option<Hash32>,
    /// Hashes the provider says it replaced.
    pub replaced_hashes: Vec<Hash32>,
    /// The destination the record pays.
    pub destination: Option<Address>,
    /// The amount it pays, in base units.
    pub amount: Option<u128>,
    /// Its asset (or coin).
    pub asset: String,
    /// The confirmations the provider counts, when given.
    pub confirmations: Option<u64>,
    /// When the provider created it, when given.
    pub created_at: Option<DateTime<Utc>>,
}

impl fmt::Debug for ProviderRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderRecord")
            .field("status_text", &self.status_text)
            .field("sub_status", &self.sub_status)
            .field("status", &self.status)
            .field("tx_hash", &self.tx_hash.map(|_| REDACTED))
            .field("replaced_hashes", &self.replaced_hashes.len())
            .field("amount", &self.amount)
            .field("asset", &self.asset)
            .field("confirmations", &self.confirmations)
            .finish_non_exhaustive()
    }
}

/// What one lookup by our reference returned.
#[derive(Clone, PartialEq, Eq)]
pub struct LookupOutcome {
    /// The decision input.
    pub lookup: Lookup,
    /// Why, when `lookup` is [`Lookup::Failed`].
    pub failure: Option<LookupFailure>,
    /// The record read, when one was (also beside a mismatch, when the whole record was read).
    pub record: Option<ProviderRecord>,
    /// The HTTP status, when an answer arrived.
    pub http_status: Option<u16>,
    /// The SHA-256 of the raw answer body, when a whole body arrived.
    pub body_sha256: Option<[u8; 32]>,
    /// The provider's `Retry-After` (seconds form), when given.
    pub retry_after: Option<Duration>,
}

impl LookupOutcome {
    /// A failure before or without an answer.
    pub fn failed(failure: LookupFailure) -> LookupOutcome {
        LookupOutcome {
            lookup: Lookup::Failed,
            failure: Some(failure),
            record: None,
            http_status: None,
            body_sha256: None,
            retry_after: None,
        }
    }

    /// The fields that differ, when the record is a security event.
    pub fn mismatch(&self) -> Option<Mismatch> {
        match self.failure {
            Some(LookupFailure::Mismatch(mismatch)) => Some(mismatch),
            _ => None,
        }
    }
}

impl fmt::Debug for LookupOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lookup = match self.lookup {
            Lookup::Found(record) => format!(
                "Found({}, hash: {})",
                record.status,
                record.tx_hash.is_some()
            ),
            Lookup::NotFound => "NotFound".to_owned(),
            Lookup::Failed => "Failed".to_owned(),
        };
        f.debug_struct("LookupOutcome")
            .field("lookup", &format_args!("{lookup}"))
            .field("failure", &self.failure)
            .field("record", &self.record)
            .field("http_status", &self.http_status)
            .field("retry_after", &self.retry_after)
            .finish_non_exhaustive()
    }
}

/// A provider transaction that may be ours: same destination and amount (for `no_lookup`, shown
/// to an operator, who confirms one or none).
#[derive(Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The provider's id.
    pub provider_id: String,
    /// The status as the provider wrote it.
    pub status_text: String,
    /// The status mapped onto the decision vocabulary (`None`: not a documented status).
    pub status: Option<ProviderStatus>,
    /// The hashes the provider lists for it.
    pub hashes: Vec<Hash32>,
    /// The destination.
    pub destination: Address,
    /// The amount, in base units.
    pub amount: u128,
    /// When the provider created it, when given.
    pub created_at: Option<DateTime<Utc>>,
    /// When it completed, when given.
    pub completed_at: Option<DateTime<Utc>>,
    /// The SHA-256 of the provider's answer it was read from (the list page, or the lookup), as
    /// received: what a decision on it rests on.
    pub answer_sha256: [u8; 32],
    /// The provider recreated it under a new id (Coinbase Prime's `TRANSACTION_RETRIED`): never
    /// the transaction to bind, the recreated one carries the execution.
    pub recreated: bool,
}

impl fmt::Debug for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidate")
            .field("status_text", &self.status_text)
            .field("status", &self.status)
            .field("hashes", &self.hashes.len())
            .field("amount", &self.amount)
            .field("created_at", &self.created_at)
            .field("completed_at", &self.completed_at)
            .finish_non_exhaustive()
    }
}

/// The time span whose provider transactions are candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// The first instant.
    pub start: DateTime<Utc>,
    /// The last instant (after `start`).
    pub end: DateTime<Utc>,
}

/// Why no candidate list could be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CandidatesError {
    /// The window ends before it starts.
    #[error("window: ends before it starts")]
    Window,
    /// The list (or the lookup standing for it) failed.
    #[error("the provider's list could not be read: {0:?}")]
    Failed(LookupFailure),
}

/// Why a webhook delivery is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// The signature header is missing, truncated or malformed.
    #[error("signature header: malformed")]
    Header,
    /// The signature names another algorithm than the provider's.
    #[error("signature header: algorithm not accepted")]
    Algorithm,
    /// The key id is not in the key set: refresh the key set once and verify again.
    #[error("signature header: unknown key id")]
    UnknownKey,
    /// The signature does not verify over the body.
    #[error("signature: does not verify")]
    Signature,
    /// The signature verifies but the body is not an event this crate reads.
    #[error("body: not a readable event")]
    Body,
}
