//! Coinbase Prime bodies: the withdrawal we build, the answers and listed transactions we read,
//! what each transaction status says, and the request signature.

use crate::amount::{from_whole_units, to_whole_units};
use crate::classify::BadRequest;
use crate::codec::{address_text, parse_address, parse_hash, reference_text};
use crate::types::{Candidate, LookupFailure, RequestError, TransferRequest};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use opledger_domain::custodian::ProviderStatus;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The portfolio wallet every withdrawal and list names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The portfolio id.
    pub portfolio_id: String,
    /// The wallet id.
    pub wallet_id: String,
    /// The currency symbol.
    pub currency_symbol: String,
    /// The asset's decimals.
    pub decimals: u8,
}

/// The decision status of a Prime transaction status; `None` for an undocumented one (a
/// candidate with one shows its text only). A status maps to a not-sent class only when the
/// provider documents that nothing was broadcast.
///
/// | Prime `status`             | [`ProviderStatus`]      | class     | why                                  |
/// |----------------------------|-------------------------|-----------|--------------------------------------|
/// | `TRANSACTION_CREATED`      | `SUBMITTED`             | in flight |                                      |
/// | `TRANSACTION_REQUESTED`    | `PENDING_AUTHORIZATION` | in flight | waiting for the portfolio's approvals |
/// | `TRANSACTION_APPROVED`     | `QUEUED`                | in flight |                                      |
/// | `TRANSACTION_PLANNED`      | `PENDING_SIGNATURE`     | in flight |                                      |
/// | `TRANSACTION_PROCESSING`   | `BROADCASTING`          | in flight | may be signed and on the network     |
/// | `TRANSACTION_BROADCASTING` | `BROADCASTING`          | in flight |                                      |
/// | `TRANSACTION_DONE`         | `COMPLETED`             | completed |                                      |
/// | `TRANSACTION_FAILED`       | `FAILED`                | failed    | with a hash the chain decides        |
/// | `TRANSACTION_REJECTED`     | `REJECTED`              | not sent  | refused before broadcast             |
/// | `TRANSACTION_CANCELLED`    | `CANCELLED`             | not sent  | cancelled before broadcast           |
/// | `TRANSACTION_EXPIRED`      | `CANCELLED`             | not sent  | expired before broadcast             |
/// | `TRANSACTION_RETRIED`      | `BROADCASTING`          | in flight | recreated under a new id: this one may have been broadcast, never "not sent" |
/// | anything else              | —                       | shown as text only |                             |
///
/// A not-sent status with a hash listed is still the chain's to decide (the domain's
/// `after_record`); no Prime status is ever a verdict without an operator.
pub fn map_status(status: &str) -> Option<ProviderStatus> {
    Some(match status {
        "TRANSACTION_CREATED" => ProviderStatus::Submitted,
        "TRANSACTION_REQUESTED" => ProviderStatus::PendingAuthorization,
        "TRANSACTION_APPROVED" => ProviderStatus::Queued,
        "TRANSACTION_PLANNED" => ProviderStatus::PendingSignature,
        "TRANSACTION_PROCESSING" | "TRANSACTION_BROADCASTING" | "TRANSACTION_RETRIED" => {
            ProviderStatus::Broadcasting
        }
        "TRANSACTION_DONE" => ProviderStatus::Completed,
        "TRANSACTION_FAILED" => ProviderStatus::Failed,
        "TRANSACTION_REJECTED" => ProviderStatus::Rejected,
        "TRANSACTION_CANCELLED" | "TRANSACTION_EXPIRED" => ProviderStatus::Cancelled,
        _ => return None,
    })
}

/// `X-CB-ACCESS-SIGNATURE`: base64 (standard, padded) of HMAC-SHA256(`secret`, `timestamp` +
/// `method` + `path_and_query` + `body`).
pub fn signature(
    secret: &[u8],
    timestamp: &str,
    method: &str,
    path_and_query: &str,
    body: &[u8],
) -> Option<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    mac.update(timestamp.as_bytes());
    mac.update(method.as_bytes());
    mac.update(path_and_query.as_bytes());
    mac.update(body);
    Some(STANDARD.encode(mac.finalize().into_bytes()))
}

/// The withdrawal body, stored and sent: the contract's keys in its order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Withdrawal {
    amount: String,
    destination_type: String,
    idempotency_key: String,
    currency_symbol: String,
    blockchain_address: BlockchainAddress,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockchainAddress {
    address: String,
}

impl Withdrawal {
    /// Its `idempotency_key`.
    pub fn idempotency_key(&self) -> &str {
        &self.idempotency_key
    }
}

/// The withdrawal body of `request`.
pub fn withdrawal_body(
    request: &TransferRequest,
    account: &Account,
) -> Result<Vec<u8>, RequestError> {
    if request.amount == 0 {
        return Err(RequestError::ZeroAmount);
    }
    let body = Withdrawal {
        amount: to_whole_units(request.amount, account.decimals)
            .map_err(|_| RequestError::Encoding)?,
        destination_type: "DESTINATION_BLOCKCHAIN".to_owned(),
        idempotency_key: reference_text(request.reference),
        currency_symbol: account.currency_symbol.clone(),
        blockchain_address: BlockchainAddress {
            address: address_text(&request.destination),
        },
    };
    serde_json::to_vec(&body).map_err(|_| RequestError::Encoding)
}

/// A stored withdrawal body, `None` when it is not one ours.
pub fn stored(body: &[u8]) -> Option<Withdrawal> {
    serde_json::from_slice(body).ok()
}

#[derive(Deserialize)]
struct Accepted {
    activity_id: String,
    symbol: String,
    amount: String,
    destination_type: String,
    blockchain_destination: BlockchainAddress,
    #[serde(default)]
    transaction_id: Option<String>,
}

/// What an accepted withdrawal's answer names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedIds {
    /// The activity (the approval workflow) the withdrawal created.
    pub activity_id: String,
    /// The transaction it created, when the answer names one usable in a path
    /// ([`crate::codec::is_plain_id`]): the one the executor follows by its id.
    pub transaction_id: Option<String>,
}

/// The ids of an accepted withdrawal whose echo (symbol, amount, destination) is what `sent`
/// asked; `None` otherwise.
pub fn read_accepted(body: &[u8], sent: &Withdrawal, decimals: u8) -> Option<AcceptedIds> {
    let accepted: Accepted = serde_json::from_slice(body).ok()?;
    let amount = from_whole_units(&accepted.amount, decimals).ok()?;
    let asked = from_whole_units(&sent.amount, decimals).ok()?;
    let same = !accepted.activity_id.is_empty()
        && accepted.symbol.eq_ignore_ascii_case(&sent.currency_symbol)
        && amount == asked
        && accepted.destination_type == sent.destination_type
        && parse_address(&accepted.blockchain_destination.address).is_some()
        && parse_address(&accepted.blockchain_destination.address)
            == parse_address(&sent.blockchain_address.address);
    same.then(|| AcceptedIds {
        activity_id: accepted.activity_id,
        transaction_id: accepted
            .transaction_id
            .filter(|id| crate::codec::is_plain_id(id)),
    })
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "message")]
    _message: String,
}

/// What a 400 says: a readable `{"message":..}` is a refusal (a replayed first answer included).
pub fn read_bad_request(body: &[u8]) -> Option<BadRequest> {
    serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|_| BadRequest::Refusal)
}

/// One page of the transaction list.
#[derive(Deserialize)]
struct Page {
    transactions: Vec<Listed>,
    #[serde(default)]
    pagination: Option<Pagination>,
}

#[derive(Deserialize)]
struct Pagination {
    #[serde(default)]
    next_cursor: Option<String>,
    #[serde(default)]
    has_next: bool,
}

#[derive(Deserialize)]
struct Listed {
    id: String,
    #[serde(default)]
    wallet_id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    status: String,
    #[serde(default)]
    symbol: Option<String>,
    #[serde(default)]
    amount: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    completed_at: Option<String>,
    #[serde(default)]
    blockchain_ids: Vec<String>,
    #[serde(default)]
    destination_address: Option<String>,
}

/// An RFC 3339 time that may be absent or empty.
fn time(text: Option<&str>) -> Result<Option<DateTime<Utc>>, LookupFailure> {
    match text {
        None | Some("") => Ok(None),
        Some(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| LookupFailure::Unreadable),
    }
}

/// What one listed (or read) transaction is for `request`: `Ok(None)` when it is not a
/// withdrawal of the account's wallet and currency paying `request`'s destination and amount (a
/// row without a `wallet_id` may be another wallet's of the portfolio, never a candidate);
/// unreadable when it is one of the wallet and currency whose amount, destination, hashes or
/// times cannot be read (it might be ours).
fn candidate(
    listed: Listed,
    request: &TransferRequest,
    account: &Account,
    answer_sha256: [u8; 32],
) -> Result<Option<Candidate>, LookupFailure> {
    let unreadable = LookupFailure::Unreadable;
    let relevant = listed.kind == "WITHDRAWAL"
        && listed
            .symbol
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case(&account.currency_symbol))
        && listed
            .wallet_id
            .as_deref()
            .is_some_and(|w| w == account.wallet_id);
    if !relevant {
        return Ok(None);
    }
    let amount = listed
        .amount
        .as_deref()
        .and_then(|a| from_whole_units(a, account.decimals).ok())
        .ok_or(unreadable)?;
    let destination = listed
        .destination_address
        .as_deref()
        .and_then(parse_address)
        .ok_or(unreadable)?;
    if amount != request.amount || destination != request.destination {
        return Ok(None);
    }
    let hashes = listed
        .blockchain_ids
        .iter()
        .filter(|id| !id.is_empty())
        .map(|id| parse_hash(id).ok_or(unreadable))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Candidate {
        status: map_status(&listed.status),
        recreated: listed.status == "TRANSACTION_RETRIED",
        provider_id: listed.id,
        status_text: listed.status,
        hashes,
        destination,
        amount,
        created_at: time(listed.created_at.as_deref())?,
        completed_at: time(listed.completed_at.as_deref())?,
        answer_sha256,
    }))
}

/// The candidates of one list page ([`candidate`] of each row) and the next page's cursor.
pub fn read_page(
    body: &[u8],
    request: &TransferRequest,
    account: &Account,
) -> Result<(Vec<Candidate>, Option<String>), LookupFailure> {
    let unreadable = LookupFailure::Unreadable;
    let page: Page = serde_json::from_slice(body).map_err(|_| unreadable)?;
    let answer_sha256 = crate::codec::sha256(body);
    let mut candidates = Vec::new();
    for listed in page.transactions {
        candidates.extend(candidate(listed, request, account, answer_sha256)?);
    }
    let next = match page.pagination {
        Some(Pagination {
            has_next: true,
            next_cursor,
        }) => Some(next_cursor.filter(|c| !c.is_empty()).ok_or(unreadable)?),
        _ => None,
    };
    Ok((candidates, next))
}

/// The answer of "Get Transaction by Transaction ID".
#[derive(Deserialize)]
struct One {
    transaction: Listed,
}

/// Transaction `provider_id` as read by its id: the candidate it is for `request`. A readable
/// transaction of another id, wallet, currency, type, destination or amount is a mismatch (the
/// id was the provider's answer to this request): never a record of it.
pub fn read_transaction(
    body: &[u8],
    request: &TransferRequest,
    account: &Account,
    provider_id: &str,
) -> Result<Candidate, LookupFailure> {
    let one: One = serde_json::from_slice(body).map_err(|_| LookupFailure::Unreadable)?;
    let listed = one.transaction;
    let kind = listed.kind == "WITHDRAWAL";
    let account_differs = listed.wallet_id.as_deref() != Some(&account.wallet_id);
    let asset_differs = !kind
        || !listed
            .symbol
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case(&account.currency_symbol));
    let amount = listed
        .amount
        .as_deref()
        .map(|a| from_whole_units(a, account.decimals));
    let destination = listed.destination_address.as_deref().map(parse_address);
    let mismatch = crate::types::Mismatch {
        reference: listed.id != provider_id,
        destination: destination.is_some_and(|d| d.is_some_and(|d| d != request.destination)),
        amount: amount
            .as_ref()
            .is_some_and(|a| a.as_ref().is_ok_and(|a| *a != request.amount)),
        asset: asset_differs,
        account: account_differs,
    };
    if mismatch.any() {
        return Err(LookupFailure::Mismatch(mismatch));
    }
    let digest = crate::codec::sha256(body);
    candidate(listed, request, account, digest)?.ok_or(LookupFailure::Unreadable)
}
