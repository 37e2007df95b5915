//! Fireblocks v1 bodies: the create request we build, and the answers and records we read.

use crate::amount::{from_whole_units, to_whole_units};
use crate::classify::{BadRequest, RecordRead};
use crate::codec::{
    address_text, is_reference, parse_address, parse_optional_hash, reference_text,
};
use crate::types::{LookupFailure, Mismatch, ProviderRecord, RequestError, TransferRequest};
use chrono::{DateTime, Utc};
use opledger_domain::custodian::ProviderStatus;
use serde::{Deserialize, Serialize};

/// The error code of a create whose `externalTxId` is already used.
pub const CODE_EXTERNAL_TX_ID_EXISTS: i64 = 1438;
/// The error code of an `Idempotency-Key` whose first answer was an internal error.
pub const CODE_IDEMPOTENCY_KEY_ERROR: i64 = 1439;
/// The error code of a lookup that finds nothing.
pub const CODE_NOT_FOUND: i64 = 1401;

/// What the account's settings put in every create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// `assetId`.
    pub asset_id: String,
    /// `source.id`.
    pub vault_account_id: String,
    /// The asset's decimals.
    pub decimals: u8,
}

#[derive(Serialize)]
struct Create<'a> {
    #[serde(rename = "assetId")]
    asset_id: &'a str,
    operation: &'static str,
    source: Source<'a>,
    destination: Destination,
    amount: String,
    #[serde(rename = "externalTxId")]
    external_tx_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
}

#[derive(Serialize)]
struct Source<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
}

#[derive(Serialize)]
struct Destination {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "oneTimeAddress")]
    one_time_address: OneTimeAddress,
}

#[derive(Serialize)]
struct OneTimeAddress {
    address: String,
}

/// The create body of `request`: the contract's keys in its order, no whitespace.
pub fn create_body(request: &TransferRequest, account: &Account) -> Result<Vec<u8>, RequestError> {
    if request.amount == 0 {
        return Err(RequestError::ZeroAmount);
    }
    let amount =
        to_whole_units(request.amount, account.decimals).map_err(|_| RequestError::Encoding)?;
    let body = Create {
        asset_id: &account.asset_id,
        operation: "TRANSFER",
        source: Source {
            kind: "VAULT_ACCOUNT",
            id: &account.vault_account_id,
        },
        destination: Destination {
            kind: "ONE_TIME_ADDRESS",
            one_time_address: OneTimeAddress {
                address: address_text(&request.destination),
            },
        },
        amount,
        external_tx_id: reference_text(request.reference),
        note: request.note.as_deref(),
    };
    serde_json::to_vec(&body).map_err(|_| RequestError::Encoding)
}

#[derive(Deserialize)]
struct StoredCreate {
    #[serde(rename = "externalTxId")]
    external_tx_id: String,
}

/// The `externalTxId` of a stored create body, `None` when it is not one.
pub fn stored_reference(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<StoredCreate>(body)
        .ok()
        .map(|create| create.external_tx_id)
}

#[derive(Deserialize)]
struct Accepted {
    id: String,
    status: String,
}

/// The provider id of an accepted create (`{"id":..,"status":..}` with a documented status).
pub fn read_accepted(body: &[u8]) -> Option<String> {
    let accepted: Accepted = serde_json::from_slice(body).ok()?;
    (!accepted.id.is_empty() && accepted.status.parse::<ProviderStatus>().is_ok())
        .then_some(accepted.id)
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "message")]
    _message: String,
    code: i64,
}

fn error_code(body: &[u8]) -> Option<i64> {
    serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|error| error.code)
}

/// What a 400 says: 1438 and 1439 name our reference as used, any other code is a refusal.
pub fn read_bad_request(body: &[u8]) -> Option<BadRequest> {
    error_code(body).map(|code| match code {
        CODE_EXTERNAL_TX_ID_EXISTS | CODE_IDEMPOTENCY_KEY_ERROR => BadRequest::Duplicate,
        _ => BadRequest::Refusal,
    })
}

/// Whether a 404's body is the documented "Transaction not found" (code 1401).
pub fn is_not_found(body: &[u8]) -> bool {
    error_code(body) == Some(CODE_NOT_FOUND)
}

/// The fields of a `TransactionResponse` read (others ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct TxResponse {
    /// `id`.
    pub id: String,
    /// `externalTxId`.
    #[serde(rename = "externalTxId", default)]
    pub external_tx_id: Option<String>,
    /// `status`.
    pub status: String,
    /// `subStatus`.
    #[serde(rename = "subStatus", default)]
    pub sub_status: Option<String>,
    /// `txHash`.
    #[serde(rename = "txHash", default)]
    pub tx_hash: Option<String>,
    /// `replacedTxHash`.
    #[serde(rename = "replacedTxHash", default)]
    pub replaced_tx_hash: Option<String>,
    /// `numOfConfirmations`.
    #[serde(rename = "numOfConfirmations", default)]
    pub confirmations: Option<u64>,
    /// `assetId`.
    #[serde(rename = "assetId", default)]
    pub asset_id: Option<String>,
    /// `destinationAddress`.
    #[serde(rename = "destinationAddress", default)]
    pub destination_address: Option<String>,
    /// `amountInfo`.
    #[serde(rename = "amountInfo", default)]
    pub amount_info: Option<AmountInfo>,
    /// `createdAt`, unix milliseconds.
    #[serde(rename = "createdAt", default)]
    pub created_at: Option<i64>,
}

/// `amountInfo`.
#[derive(Debug, Clone, Deserialize)]
pub struct AmountInfo {
    /// `amount`, whole units.
    pub amount: String,
}

/// A unix-milliseconds time.
pub fn millis(value: Option<i64>) -> Option<DateTime<Utc>> {
    value.and_then(DateTime::from_timestamp_millis)
}

/// A lookup's 200 body checked against `expected`: a record that differs is a mismatch (a
/// security event); one that cannot be read whole is unreadable.
pub fn read_record(body: &[u8], expected: &TransferRequest, account: &Account) -> RecordRead {
    let Ok(tx) = serde_json::from_slice::<TxResponse>(body) else {
        return RecordRead::Failed(LookupFailure::Unreadable, None);
    };
    let destination = tx.destination_address.as_deref().and_then(parse_address);
    let amount = tx
        .amount_info
        .as_ref()
        .and_then(|info| from_whole_units(&info.amount, account.decimals).ok());
    let mismatch = Mismatch {
        reference: !tx
            .external_tx_id
            .as_deref()
            .is_some_and(|text| is_reference(text, expected.reference)),
        destination: destination.is_some_and(|d| d != expected.destination),
        amount: amount.is_some_and(|a| a != expected.amount),
        asset: tx.asset_id.as_deref() != Some(account.asset_id.as_str()),
        account: false,
    };
    let record = record_of(&tx, destination, amount);
    if mismatch.any() {
        return RecordRead::Failed(LookupFailure::Mismatch(mismatch), record);
    }
    match record {
        Some(record) if destination.is_some() && amount.is_some() => RecordRead::Found(record),
        _ => RecordRead::Failed(LookupFailure::Unreadable, None),
    }
}

/// The record's evidence fields, `None` when its status or a hash is not readable.
fn record_of(
    tx: &TxResponse,
    destination: Option<[u8; 20]>,
    amount: Option<u128>,
) -> Option<ProviderRecord> {
    let status = tx.status.parse::<ProviderStatus>().ok()?;
    let tx_hash = parse_optional_hash(tx.tx_hash.as_deref()).ok()?;
    let replaced = parse_optional_hash(tx.replaced_tx_hash.as_deref()).ok()?;
    Some(ProviderRecord {
        provider_id: tx.id.clone(),
        reference: tx.external_tx_id.clone().unwrap_or_default(),
        status_text: tx.status.clone(),
        sub_status: tx.sub_status.clone().filter(|s| !s.is_empty()),
        status,
        tx_hash,
        replaced_hashes: replaced.into_iter().collect(),
        destination,
        amount,
        asset: tx.asset_id.clone().unwrap_or_default(),
        confirmations: tx.confirmations,
        created_at: millis(tx.created_at),
    })
}
