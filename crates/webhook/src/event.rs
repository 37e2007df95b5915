//! Typed events parsed from a verified webhook body.
//!
//! Only a body whose signature was verified should reach [`parse`]; parsing
//! then decides between three outcomes, so the ingress always knows what to
//! answer and whether to act:
//!
//! - `Err(`[`MalformedBody`]`)`: the body is not a JSON object at all (not
//!   UTF-8 JSON, not an object, or nested deeper than [`MAX_DEPTH`]). The
//!   ingress answers 400.
//! - [`Parsed::Known`]: one of the three event types below, with every field
//!   validated into a domain type.
//! - [`Parsed::Unhandled`]: a JSON object the ingress stores and acknowledges
//!   but does not act on, either because its `type` is missing or unknown
//!   ([`UnhandledReason::UnknownType`]) or because a known type's fields do
//!   not match the schema ([`UnhandledReason::Schema`]).
//!
//! # Envelope
//!
//! The Standard Webhooks payload shape:
//!
//! ```json
//! {
//!   "type": "deposit.confirmed",
//!   "timestamp": "2025-01-31T12:00:00Z",
//!   "data": { ... }
//! }
//! ```
//!
//! - `type` (string, required): the event type, matched exactly.
//! - `timestamp` (string, optional): an RFC 3339 date-time
//!   (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`); only its shape is checked,
//!   the value is not used (the signed `webhook-timestamp` header is what
//!   counts).
//! - `data` (object, required for the known types): the fields below, all of
//!   them strings. A missing field, a field of another JSON type, an unknown
//!   field or a repeated field is a schema error.
//!
//! Other top-level members are ignored. A repeated `type` makes the type
//! unknown; a repeated `timestamp` or `data` is a schema error.
//!
//! # `deposit.confirmed`
//!
//! A deposit watcher saw a deposit reach finality.
//!
//! | field        | format                                                        |
//! |--------------|---------------------------------------------------------------|
//! | `deposit_id` | 1 to 128 visible ASCII characters (`!` to `~`, no space)      |
//! | `account`    | account name: `[a-z0-9][a-z0-9_-]{0,62}`                      |
//! | `asset`      | asset code: `[A-Z0-9]{1,16}`                                  |
//! | `amount`     | canonical decimal integer of minimal units, greater than zero |
//! | `network`    | optional: network id, `[a-z0-9][a-z0-9_-]{0,62}`              |
//! | `tx_hash`    | optional: `0x` followed by 64 hex digits (either case)        |
//! | `log_index`  | optional: decimal integer (0 to 2^31 - 1), a token transfer's log |
//! | `recipient`  | optional: `0x` followed by 40 hex digits (either case)        |
//!
//! `network`, `tx_hash` and `recipient` are the deposit's chain evidence: all three or none
//! (`log_index` only with them, for a token transfer; absent for the native coin). A deposit with
//! chain evidence is credited once the witness has found exactly that transfer on the chain at
//! final depth, to an address registered to the account; one without stays pending until
//! operators' signed statements witness it.
//!
//! ```json
//! {"type": "deposit.confirmed",
//!  "data": {"deposit_id": "dep_01J", "account": "treasury", "asset": "USDC", "amount": "2500000",
//!           "network": "mainnet", "tx_hash": "0x8f3c...64 hex digits...", "log_index": "3",
//!           "recipient": "0x5a0b...40 hex digits..."}}
//! ```
//!
//! # `transfer.status`
//!
//! A custodian reports progress of one of our withdrawals.
//!
//! | field          | format                                                    |
//! |----------------|-----------------------------------------------------------|
//! | `operation_id` | hyphenated UUID (36 characters, either case)              |
//! | `status`       | `"broadcast"` or `"confirmed"`                            |
//! | `tx_hash`      | `0x` followed by 64 hex digits (either case)              |
//!
//! ```json
//! {"type": "transfer.status",
//!  "data": {"operation_id": "0190a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", "status": "confirmed",
//!           "tx_hash": "0x8f3c...64 hex digits..."}}
//! ```
//!
//! # `kyt.result`
//!
//! A KYT screening vendor returns its verdict on one of our withdrawals.
//!
//! | field          | format                                                   |
//! |----------------|----------------------------------------------------------|
//! | `operation_id` | hyphenated UUID (36 characters, either case)             |
//! | `result`       | `"pass"` or `"fail"`                                     |
//! | `provider_ref` | 1 to 128 visible ASCII characters (`!` to `~`, no space) |
//!
//! ```json
//! {"type": "kyt.result",
//!  "data": {"operation_id": "0190a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", "result": "pass",
//!           "provider_ref": "chk-7731"}}
//! ```
//!
//! # What errors say
//!
//! A schema detail names the field and the rule it broke, never the value
//! received; an unknown field is named only when its name is a plain
//! identifier of at most 64 characters.

mod deposit;
mod fields;
mod kyt;
mod shape;
mod transfer;

pub use deposit::{DepositChain, DepositConfirmed};
pub use fields::{ExternalRef, InvalidExternalRef, MAX_EXTERNAL_REF_LEN};
pub use kyt::{KytResult, KytVerdict};
pub use transfer::{TransferState, TransferStatus};

use fields::{Lookup, Members};
use serde_json::Value;
use serde_json::value::RawValue;
use shape::is_rfc3339_date_time;
pub(crate) use shape::nested_deeper_than;

/// Type of [`DepositConfirmed`] events.
pub const DEPOSIT_CONFIRMED: &str = "deposit.confirmed";
/// Type of [`TransferStatus`] events.
pub const TRANSFER_STATUS: &str = "transfer.status";
/// Type of [`KytResult`] events.
pub const KYT_RESULT: &str = "kyt.result";
/// Deepest accepted nesting of JSON objects and arrays in a body.
pub const MAX_DEPTH: usize = 32;
/// Longest `type` kept in [`Unhandled::event_type`], in characters.
pub const MAX_EVENT_TYPE_CHARS: usize = 64;

/// The body is not a JSON object at all. Never carries any part of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MalformedBody {
    /// Not UTF-8, or not valid JSON.
    #[error("body is not valid utf-8 json")]
    NotJson,
    /// Valid JSON, but not an object.
    #[error("body is json but not an object")]
    NotAnObject,
    /// Objects and arrays nested deeper than [`MAX_DEPTH`].
    #[error("body is nested too deeply")]
    TooDeep,
}

impl MalformedBody {
    /// Stable machine-readable code: `not_json`, `not_an_object` or
    /// `too_deep`.
    pub fn code(&self) -> &'static str {
        match self {
            MalformedBody::NotJson => "not_json",
            MalformedBody::NotAnObject => "not_an_object",
            MalformedBody::TooDeep => "too_deep",
        }
    }
}

/// An event of a known type, fully validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `deposit.confirmed`.
    DepositConfirmed(DepositConfirmed),
    /// `transfer.status`.
    TransferStatus(TransferStatus),
    /// `kyt.result`.
    KytResult(KytResult),
}

impl Event {
    /// The wire `type` of the event.
    pub fn event_type(&self) -> &'static str {
        match self {
            Event::DepositConfirmed(_) => DEPOSIT_CONFIRMED,
            Event::TransferStatus(_) => TRANSFER_STATUS,
            Event::KytResult(_) => KYT_RESULT,
        }
    }
}

/// Why a JSON object body is stored but not acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnhandledReason {
    /// `type` is missing, not a string, repeated, or not a known type.
    UnknownType,
    /// The type is known but the body does not match its schema.
    Schema {
        /// The field and the rule it broke, e.g. `data.amount: must be
        /// greater than zero`. Never contains the received value.
        detail: String,
    },
}

impl UnhandledReason {
    /// Stable machine-readable code: `unknown_type` or `schema`.
    pub fn code(&self) -> &'static str {
        match self {
            UnhandledReason::UnknownType => "unknown_type",
            UnhandledReason::Schema { .. } => "schema",
        }
    }
}

/// A JSON object body that is stored and acknowledged but not acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhandled {
    /// The body's `type` when it is a string, cut to its first
    /// [`MAX_EVENT_TYPE_CHARS`] characters, control characters replaced by U+FFFD.
    pub event_type: Option<String>,
    /// Why it is not acted on.
    pub reason: UnhandledReason,
}

/// Result of parsing a body that is a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A known, valid event.
    Known(Event),
    /// A body to store without acting on it.
    Unhandled(Unhandled),
}

/// Parses a verified body. See the [module documentation](self) for the
/// accepted schemas and the meaning of each outcome. Never panics.
pub fn parse(body: &[u8]) -> Result<Parsed, MalformedBody> {
    if nested_deeper_than(body, MAX_DEPTH) {
        return Err(MalformedBody::TooDeep);
    }
    let text = std::str::from_utf8(body).map_err(|_| MalformedBody::NotJson)?;
    let top: Members<Box<RawValue>> = serde_json::from_str(text).map_err(|err| {
        // Our visitor accepts any object, so a data error means valid JSON
        // of another kind; anything else is a syntax error.
        match err.classify() {
            serde_json::error::Category::Data => MalformedBody::NotAnObject,
            _ => MalformedBody::NotJson,
        }
    })?;
    Ok(parse_object(&top))
}

fn unhandled(event_type: Option<&str>, reason: UnhandledReason) -> Parsed {
    // Control characters (a NUL above all, which no PostgreSQL text column can hold) are kept as
    // U+FFFD: the raw body, sealed, keeps the original.
    let kept = |t: &str| {
        t.chars()
            .take(MAX_EVENT_TYPE_CHARS)
            .map(|c| if c.is_control() { '\u{fffd}' } else { c })
            .collect()
    };
    Parsed::Unhandled(Unhandled {
        event_type: event_type.map(kept),
        reason,
    })
}

fn parse_object(top: &Members<Box<RawValue>>) -> Parsed {
    let event_type = match top.lookup("type") {
        Lookup::One(raw) => serde_json::from_str::<String>(raw.get()).ok(),
        Lookup::Missing | Lookup::Repeated => None,
    };
    let Some(event_type) = event_type else {
        return unhandled(None, UnhandledReason::UnknownType);
    };
    let extract: fn(&Members<Value>) -> Result<Event, String> = match event_type.as_str() {
        DEPOSIT_CONFIRMED => |data| deposit::deposit_confirmed(data).map(Event::DepositConfirmed),
        TRANSFER_STATUS => |data| transfer::transfer_status(data).map(Event::TransferStatus),
        KYT_RESULT => |data| kyt::kyt_result(data).map(Event::KytResult),
        _ => return unhandled(Some(&event_type), UnhandledReason::UnknownType),
    };
    match known_event(top, extract) {
        Ok(event) => Parsed::Known(event),
        Err(detail) => unhandled(Some(&event_type), UnhandledReason::Schema { detail }),
    }
}

fn known_event(
    top: &Members<Box<RawValue>>,
    extract: fn(&Members<Value>) -> Result<Event, String>,
) -> Result<Event, String> {
    match top.lookup("timestamp") {
        Lookup::Missing => {}
        Lookup::Repeated => return Err("timestamp: repeated".into()),
        Lookup::One(raw) => {
            let valid = serde_json::from_str::<String>(raw.get())
                .is_ok_and(|text| is_rfc3339_date_time(&text));
            if !valid {
                return Err("timestamp: must be an RFC 3339 date-time string".into());
            }
        }
    }
    let data = match top.lookup("data") {
        Lookup::Missing => return Err("data: missing".into()),
        Lookup::Repeated => return Err("data: repeated".into()),
        Lookup::One(raw) => serde_json::from_str::<Members<Value>>(raw.get())
            .map_err(|_| String::from("data: must be an object"))?,
    };
    extract(&data)
}

#[cfg(test)]
mod tests;
