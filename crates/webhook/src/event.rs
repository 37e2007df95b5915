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

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use opledger_domain::{AccountName, Amount, AssetCode, OperationId};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

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
/// Longest [`ExternalRef`], in bytes.
pub const MAX_EXTERNAL_REF_LEN: usize = 128;

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

/// A provider's own reference (deposit id, screening reference):
/// 1 to [`MAX_EXTERNAL_REF_LEN`] visible ASCII characters (`!` to `~`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExternalRef(String);

/// Error returned when text is not a valid [`ExternalRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("external reference must be 1 to 128 visible ascii characters")]
pub struct InvalidExternalRef;

impl ExternalRef {
    /// Validates a reference.
    pub fn parse(text: &str) -> Result<Self, InvalidExternalRef> {
        let ok = !text.is_empty()
            && text.len() <= MAX_EXTERNAL_REF_LEN
            && text.bytes().all(|b| b.is_ascii_graphic());
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(InvalidExternalRef)
        }
    }

    /// The validated value.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ExternalRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `deposit.confirmed`: a deposit reached finality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositConfirmed {
    deposit_id: ExternalRef,
    account: AccountName,
    asset: AssetCode,
    amount: Amount,
    chain: Option<DepositChain>,
}

/// A deposit's chain evidence as the provider reported it. `Debug` shows neither the transaction
/// nor the recipient.
#[derive(Clone, PartialEq, Eq)]
pub struct DepositChain {
    /// The network id.
    pub network: opledger_domain::payload::NetworkId,
    /// The transaction.
    pub tx_hash: [u8; 32],
    /// The token transfer's log in the receipt; `None` for the native coin.
    pub log_index: Option<u32>,
    /// The address that received it.
    pub recipient: [u8; 20],
}

impl fmt::Debug for DepositChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DepositChain")
            .field("network", &self.network)
            .field("log_index", &self.log_index)
            .finish_non_exhaustive()
    }
}

impl DepositConfirmed {
    /// The watcher's id of the deposit.
    pub fn deposit_id(&self) -> &ExternalRef {
        &self.deposit_id
    }

    /// The credited account.
    pub fn account(&self) -> &AccountName {
        &self.account
    }

    /// The deposited asset.
    pub fn asset(&self) -> &AssetCode {
        &self.asset
    }

    /// The deposited amount in minimal units, always greater than zero.
    pub fn amount(&self) -> Amount {
        self.amount
    }

    /// The deposit's chain evidence, when the provider sent it.
    pub fn chain(&self) -> Option<&DepositChain> {
        self.chain.as_ref()
    }
}

/// Progress reported by a custodian for a withdrawal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferState {
    /// The transaction was sent to the network.
    Broadcast,
    /// The transaction reached the custodian's confirmation threshold.
    Confirmed,
}

impl TransferState {
    /// Wire form: `"broadcast"` or `"confirmed"`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferState::Broadcast => "broadcast",
            TransferState::Confirmed => "confirmed",
        }
    }
}

/// `transfer.status`: a custodian's status update for one of our withdrawals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferStatus {
    operation_id: OperationId,
    status: TransferState,
    tx_hash: [u8; 32],
}

impl TransferStatus {
    /// The withdrawal the update is about.
    pub fn operation_id(&self) -> OperationId {
        self.operation_id
    }

    /// The reported progress.
    pub fn status(&self) -> TransferState {
        self.status
    }

    /// The transaction hash.
    pub fn tx_hash(&self) -> &[u8; 32] {
        &self.tx_hash
    }

    /// The transaction hash as lowercase `0x` + 64 hex digits.
    pub fn tx_hash_hex(&self) -> String {
        format!("0x{}", hex::encode(self.tx_hash))
    }
}

/// Verdict of a KYT screening.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KytVerdict {
    /// The withdrawal may proceed.
    Pass,
    /// The withdrawal must not proceed.
    Fail,
}

impl KytVerdict {
    /// Wire form: `"pass"` or `"fail"`.
    pub fn as_str(self) -> &'static str {
        match self {
            KytVerdict::Pass => "pass",
            KytVerdict::Fail => "fail",
        }
    }
}

/// `kyt.result`: a screening vendor's verdict on one of our withdrawals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KytResult {
    operation_id: OperationId,
    result: KytVerdict,
    provider_ref: ExternalRef,
}

impl KytResult {
    /// The screened withdrawal.
    pub fn operation_id(&self) -> OperationId {
        self.operation_id
    }

    /// The verdict.
    pub fn result(&self) -> KytVerdict {
        self.result
    }

    /// The vendor's reference of the screening.
    pub fn provider_ref(&self) -> &ExternalRef {
        &self.provider_ref
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

/// True when objects and arrays nest deeper than `max` (brackets inside
/// strings do not count). Invalid JSON may give any answer: it is refused
/// either way.
fn nested_deeper_than(body: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The members of a JSON object in order, repeated names included (serde's
/// maps would keep only one of them silently).
struct Members<V>(Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Members<V> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for MembersVisitor<V> {
            type Value = Members<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, V>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }

        deserializer.deserialize_map(MembersVisitor(PhantomData))
    }
}

/// What a member name resolves to.
enum Lookup<'a, V> {
    Missing,
    One(&'a V),
    Repeated,
}

impl<V> Members<V> {
    fn lookup(&self, name: &str) -> Lookup<'_, V> {
        let mut found = Lookup::Missing;
        for (key, value) in &self.0 {
            if key == name {
                found = match found {
                    Lookup::Missing => Lookup::One(value),
                    _ => return Lookup::Repeated,
                };
            }
        }
        found
    }
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
        DEPOSIT_CONFIRMED => deposit_confirmed,
        TRANSFER_STATUS => transfer_status,
        KYT_RESULT => kyt_result,
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

/// Names an unexpected member without echoing arbitrary text: plain
/// identifiers are shown, anything else is not.
fn describe_key(key: &str) -> String {
    let plain = !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if plain {
        format!("`{key}`")
    } else {
        String::from("(name not shown)")
    }
}

/// Refuses members outside `allowed` and repeated members.
fn check_members(data: &Members<Value>, allowed: &[&'static str]) -> Result<(), String> {
    for (index, (key, _)) in data.0.iter().enumerate() {
        if !allowed.contains(&key.as_str()) {
            return Err(format!("data: unknown field {}", describe_key(key)));
        }
        if data.0[..index].iter().any(|(earlier, _)| earlier == key) {
            return Err(format!("data.{key}: repeated"));
        }
    }
    Ok(())
}

/// The string value of a member that [`check_members`] allowed.
fn string_field<'a>(data: &'a Members<Value>, name: &'static str) -> Result<&'a str, String> {
    match data.lookup(name) {
        Lookup::One(Value::String(text)) => Ok(text),
        Lookup::One(_) => Err(format!("data.{name}: must be a string")),
        Lookup::Missing => Err(format!("data.{name}: missing")),
        Lookup::Repeated => Err(format!("data.{name}: repeated")),
    }
}

fn rule(name: &str, rule: &str) -> String {
    format!("data.{name}: {rule}")
}

fn external_ref(data: &Members<Value>, name: &'static str) -> Result<ExternalRef, String> {
    ExternalRef::parse(string_field(data, name)?)
        .map_err(|_| rule(name, "must be 1 to 128 visible ascii characters"))
}

fn operation_id(data: &Members<Value>) -> Result<OperationId, String> {
    let text = string_field(data, "operation_id")?;
    // The uuid crate also reads braced, urn and unhyphenated forms; only the
    // 36-character hyphenated form is accepted on the wire.
    if text.len() != 36 {
        return Err(rule("operation_id", "must be a hyphenated uuid"));
    }
    OperationId::from_str(text).map_err(|_| rule("operation_id", "must be a hyphenated uuid"))
}

fn deposit_confirmed(data: &Members<Value>) -> Result<Event, String> {
    check_members(
        data,
        &[
            "deposit_id",
            "account",
            "asset",
            "amount",
            "network",
            "tx_hash",
            "log_index",
            "recipient",
        ],
    )?;
    let deposit_id = external_ref(data, "deposit_id")?;
    let account = AccountName::parse(string_field(data, "account")?)
        .map_err(|_| rule("account", "must match [a-z0-9][a-z0-9_-]{0,62}"))?;
    let asset = AssetCode::parse(string_field(data, "asset")?)
        .map_err(|_| rule("asset", "must match [A-Z0-9]{1,16}"))?;
    let amount = Amount::parse(string_field(data, "amount")?).map_err(|_| {
        rule(
            "amount",
            "must be a canonical decimal integer of minimal units",
        )
    })?;
    if amount.is_zero() {
        return Err(rule("amount", "must be greater than zero"));
    }
    let chain = deposit_chain(data)?;
    Ok(Event::DepositConfirmed(DepositConfirmed {
        deposit_id,
        account,
        asset,
        amount,
        chain,
    }))
}

fn optional_string<'a>(
    data: &'a Members<Value>,
    name: &'static str,
) -> Result<Option<&'a str>, String> {
    match data.lookup(name) {
        Lookup::Missing => Ok(None),
        _ => string_field(data, name).map(Some),
    }
}

fn deposit_chain(data: &Members<Value>) -> Result<Option<DepositChain>, String> {
    let network = optional_string(data, "network")?;
    let tx_hash = optional_string(data, "tx_hash")?;
    let recipient = optional_string(data, "recipient")?;
    let log_index = optional_string(data, "log_index")?;
    let (Some(network), Some(tx_hash), Some(recipient)) = (network, tx_hash, recipient) else {
        if network.is_some() || tx_hash.is_some() || recipient.is_some() || log_index.is_some() {
            return Err(rule(
                "network",
                "network, tx_hash and recipient come together (log_index only with them)",
            ));
        }
        return Ok(None);
    };
    let network = opledger_domain::payload::NetworkId::parse(network)
        .map_err(|_| rule("network", "must match [a-z0-9][a-z0-9_-]{0,62}"))?;
    let tx_hash = parse_tx_hash(tx_hash)
        .ok_or_else(|| rule("tx_hash", "must be 0x followed by 64 hex digits"))?;
    let recipient = recipient
        .strip_prefix("0x")
        .and_then(|digits| {
            let mut out = [0_u8; 20];
            hex::decode_to_slice(digits, &mut out).ok().map(|()| out)
        })
        .ok_or_else(|| rule("recipient", "must be 0x followed by 40 hex digits"))?;
    let log_index = log_index
        .map(|text| {
            let canonical = !text.is_empty()
                && text.bytes().all(|b| b.is_ascii_digit())
                && (text == "0" || !text.starts_with('0'));
            text.parse::<u32>()
                .ok()
                .filter(|n| canonical && *n <= i32::MAX as u32)
                .ok_or_else(|| {
                    rule(
                        "log_index",
                        "must be a decimal integer from 0 to 2147483647",
                    )
                })
        })
        .transpose()?;
    Ok(Some(DepositChain {
        network,
        tx_hash,
        log_index,
        recipient,
    }))
}

fn transfer_status(data: &Members<Value>) -> Result<Event, String> {
    check_members(data, &["operation_id", "status", "tx_hash"])?;
    let operation_id = operation_id(data)?;
    let status = match string_field(data, "status")? {
        "broadcast" => TransferState::Broadcast,
        "confirmed" => TransferState::Confirmed,
        _ => return Err(rule("status", "must be \"broadcast\" or \"confirmed\"")),
    };
    let tx_hash = parse_tx_hash(string_field(data, "tx_hash")?)
        .ok_or_else(|| rule("tx_hash", "must be 0x followed by 64 hex digits"))?;
    Ok(Event::TransferStatus(TransferStatus {
        operation_id,
        status,
        tx_hash,
    }))
}

fn parse_tx_hash(text: &str) -> Option<[u8; 32]> {
    let digits = text.strip_prefix("0x")?;
    let mut hash = [0u8; 32];
    hex::decode_to_slice(digits, &mut hash).ok()?;
    Some(hash)
}

fn kyt_result(data: &Members<Value>) -> Result<Event, String> {
    check_members(data, &["operation_id", "result", "provider_ref"])?;
    let operation_id = operation_id(data)?;
    let result = match string_field(data, "result")? {
        "pass" => KytVerdict::Pass,
        "fail" => KytVerdict::Fail,
        _ => return Err(rule("result", "must be \"pass\" or \"fail\"")),
    };
    let provider_ref = external_ref(data, "provider_ref")?;
    Ok(Event::KytResult(KytResult {
        operation_id,
        result,
        provider_ref,
    }))
}

/// Checks the shape `YYYY-MM-DD(T|t)HH:MM:SS[.fraction](Z|z|±HH:MM)` with
/// field ranges (month 1-12, day 1-31, hour 0-23, minute 0-59, second 0-60).
/// Does not check the number of days in the month.
fn is_rfc3339_date_time(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() < 20 || b.len() > 64 {
        return false;
    }
    let number = |from: usize, len: usize| -> Option<u32> {
        let digits = b.get(from..from + len)?;
        digits.iter().try_fold(0u32, |acc, &d| {
            d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
        })
    };
    let at = |index: usize, allowed: &[u8]| b.get(index).is_some_and(|c| allowed.contains(c));
    let in_range =
        |value: Option<u32>, min: u32, max: u32| value.is_some_and(|v| (min..=max).contains(&v));
    let date_time = number(0, 4).is_some()
        && at(4, b"-")
        && in_range(number(5, 2), 1, 12)
        && at(7, b"-")
        && in_range(number(8, 2), 1, 31)
        && at(10, b"Tt")
        && in_range(number(11, 2), 0, 23)
        && at(13, b":")
        && in_range(number(14, 2), 0, 59)
        && at(16, b":")
        && in_range(number(17, 2), 0, 60);
    if !date_time {
        return false;
    }
    let mut rest = &b[19..];
    if let Some(fraction) = rest.strip_prefix(b".") {
        let digits = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = &fraction[digits..];
    }
    match rest {
        [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => {
            let two = |a: u8, b: u8| {
                (a.is_ascii_digit() && b.is_ascii_digit())
                    .then(|| u32::from(a - b'0') * 10 + u32::from(b - b'0'))
            };
            in_range(two(*h1, *h2), 0, 23) && in_range(two(*m1, *m2), 0, 59)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
