//! BitGo bodies: the send we build, the answers and transfers we read, and what each transfer
//! state says.

use crate::amount::parse_base_units;
use crate::classify::{BadRequest, RecordRead};
use crate::codec::{
    address_text, is_reference, parse_address, parse_optional_hash, reference_text,
};
use crate::types::{LookupFailure, Mismatch, ProviderRecord, RequestError, TransferRequest};
use opledger_domain::custodian::ProviderStatus;
use opledger_domain::evidence::Address;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// The wallet every send and lookup names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The coin.
    pub coin: String,
    /// The wallet id.
    pub wallet_id: String,
}

/// The decision status of a BitGo transfer state; `None` for an undocumented one (a lookup record
/// with one is unreadable). A state maps to a not-sent class only when the provider documents
/// that nothing was broadcast.
///
/// | BitGo `state`     | [`ProviderStatus`]      | class     | why                                              |
/// |-------------------|-------------------------|-----------|--------------------------------------------------|
/// | `initialized`     | `SUBMITTED`             | in flight | created, not yet signed                          |
/// | `pendingApproval` | `PENDING_AUTHORIZATION` | in flight | waiting for the wallet's approvers               |
/// | `signed`          | `BROADCASTING`          | in flight | signed; may be on the network already            |
/// | `unconfirmed`     | `CONFIRMING`            | in flight | broadcast, not yet confirmed                     |
/// | `confirmed`       | `COMPLETED`             | completed |                                                  |
/// | `failed`          | `FAILED`                | failed    | with a `txid` the chain decides                  |
/// | `rejected`        | `REJECTED`              | not sent  | an approver rejected it: documented as never signed |
/// | `removed`         | `BROADCASTING`          | in flight | dropped from the mempool: it was broadcast and may still be mined or rebroadcast, never "not sent" |
/// | `replaced`        | `BROADCASTING`          | in flight | another transaction replaced it: one of the two may be mined |
/// | anything else     | —                       | unreadable record (lookup failed) |                       |
pub fn map_state(state: &str) -> Option<ProviderStatus> {
    Some(match state {
        "initialized" => ProviderStatus::Submitted,
        "pendingApproval" => ProviderStatus::PendingAuthorization,
        "signed" | "removed" | "replaced" => ProviderStatus::Broadcasting,
        "unconfirmed" => ProviderStatus::Confirming,
        "confirmed" => ProviderStatus::Completed,
        "failed" => ProviderStatus::Failed,
        "rejected" => ProviderStatus::Rejected,
        _ => return None,
    })
}

/// The stored part of a send: the contract's keys in its order, without `walletPassphrase`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Send {
    address: String,
    amount: String,
    #[serde(rename = "sequenceId")]
    sequence_id: String,
}

/// The stored body of `request`'s send: `{"address":..,"amount":<wei>,"sequenceId":..}`. The
/// wallet passphrase is added when sent ([`with_passphrase`]), never stored.
pub fn send_body(request: &TransferRequest) -> Result<Vec<u8>, RequestError> {
    if request.amount == 0 {
        return Err(RequestError::ZeroAmount);
    }
    let send = Send {
        address: address_text(&request.destination),
        amount: request.amount.to_string(),
        sequence_id: reference_text(request.reference),
    };
    serde_json::to_vec(&send).map_err(|_| RequestError::Encoding)
}

/// The `sequenceId` of a stored send body, `None` when it is not one ours.
pub fn stored_reference(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<Send>(body)
        .ok()
        .map(|send| send.sequence_id)
}

/// The bytes sent: the stored body with `"walletPassphrase":<passphrase>` as its last key.
/// `None` when the stored body is not one of ours.
pub fn with_passphrase(stored: &[u8], passphrase: &str) -> Option<Zeroizing<Vec<u8>>> {
    stored_reference(stored)?;
    let open = stored.strip_suffix(b"}")?;
    let quoted = Zeroizing::new(serde_json::to_string(passphrase).ok()?);
    let mut sent = Zeroizing::new(Vec::with_capacity(stored.len() + quoted.len() + 24));
    sent.extend_from_slice(open);
    sent.extend_from_slice(b",\"walletPassphrase\":");
    sent.extend_from_slice(quoted.as_bytes());
    sent.push(b'}');
    Some(sent)
}

#[derive(Deserialize)]
struct Accepted {
    transfer: AcceptedTransfer,
}

#[derive(Deserialize)]
struct AcceptedTransfer {
    id: String,
    #[serde(rename = "sequenceId", default)]
    sequence_id: Option<String>,
}

/// The transfer id of an accepted send; `None` when the body is off the contract or names
/// another `sequenceId`.
pub fn read_accepted(body: &[u8], reference: &str) -> Option<String> {
    let accepted: Accepted = serde_json::from_slice(body).ok()?;
    let transfer = accepted.transfer;
    let ours = transfer
        .sequence_id
        .as_deref()
        .is_none_or(|id| id.eq_ignore_ascii_case(reference));
    (ours && !transfer.id.is_empty()).then_some(transfer.id)
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(rename = "error")]
    _error: String,
    name: String,
}

fn error_name(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<ErrorBody>(body)
        .ok()
        .map(|error| error.name)
}

/// What a 400 says: `DuplicateSequenceIdError` names our reference as used, any other name is a
/// refusal.
pub fn read_bad_request(body: &[u8]) -> Option<BadRequest> {
    error_name(body).map(|name| match name.as_str() {
        "DuplicateSequenceIdError" => BadRequest::Duplicate,
        _ => BadRequest::Refusal,
    })
}

/// Whether a 404's body is the documented `{"error":..,"name":"NotFound"}`.
pub fn is_not_found(body: &[u8]) -> bool {
    error_name(body).as_deref() == Some("NotFound")
}

/// The fields of a transfer read.
#[derive(Deserialize)]
struct Transfer {
    id: String,
    #[serde(default)]
    coin: Option<String>,
    #[serde(default)]
    wallet: Option<String>,
    #[serde(rename = "sequenceId", default)]
    sequence_id: Option<String>,
    state: String,
    #[serde(default)]
    txid: Option<String>,
    #[serde(default)]
    entries: Vec<Entry>,
    #[serde(default)]
    confirmations: Option<u64>,
}

#[derive(Deserialize)]
struct Entry {
    address: String,
    #[serde(rename = "valueString")]
    value_string: String,
}

/// What a transfer pays: its first payee and the total of its positive entries, and whether any
/// positive entry pays another address than `destination`. `None` when an entry is unreadable or
/// none is positive.
fn payments(entries: &[Entry], destination: &Address) -> Option<(Address, u128, bool)> {
    let mut payee = None;
    let mut total: u128 = 0;
    let mut elsewhere = false;
    for entry in entries {
        let (negative, value) = parse_base_units(&entry.value_string)?;
        if negative || value == 0 {
            continue;
        }
        let address = parse_address(&entry.address)?;
        payee.get_or_insert(address);
        elsewhere |= address != *destination;
        total = total.checked_add(value)?;
    }
    payee.map(|payee| (payee, total, elsewhere))
}

/// A lookup's 200 body (a transfer) checked against `expected` and the wallet.
pub fn read_record(body: &[u8], expected: &TransferRequest, account: &Account) -> RecordRead {
    let unreadable = RecordRead::Failed(LookupFailure::Unreadable, None);
    let Ok(transfer) = serde_json::from_slice::<Transfer>(body) else {
        return unreadable;
    };
    let paid = payments(&transfer.entries, &expected.destination);
    let mismatch = Mismatch {
        reference: !transfer
            .sequence_id
            .as_deref()
            .is_some_and(|id| is_reference(id, expected.reference)),
        destination: paid.is_some_and(|(_, _, elsewhere)| elsewhere),
        amount: paid.is_some_and(|(_, total, _)| total != expected.amount),
        asset: transfer.coin.as_deref() != Some(account.coin.as_str()),
        account: transfer.wallet.as_deref() != Some(account.wallet_id.as_str()),
    };
    let status = map_state(&transfer.state);
    let tx_hash = parse_optional_hash(transfer.txid.as_deref());
    let record = match (status, tx_hash) {
        (Some(status), Ok(tx_hash)) => Some(ProviderRecord {
            provider_id: transfer.id,
            reference: transfer.sequence_id.unwrap_or_default(),
            status_text: transfer.state,
            sub_status: None,
            status,
            tx_hash,
            replaced_hashes: Vec::new(),
            destination: paid.map(|(payee, _, _)| payee),
            amount: paid.map(|(_, total, _)| total),
            asset: transfer.coin.unwrap_or_default(),
            confirmations: transfer.confirmations,
            created_at: None,
        }),
        _ => None,
    };
    if mismatch.any() {
        return RecordRead::Failed(LookupFailure::Mismatch(mismatch), record);
    }
    match record {
        Some(record) if paid.is_some() => RecordRead::Found(record),
        _ => unreadable,
    }
}
