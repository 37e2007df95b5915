//! Reading the members of a parsed JSON object: the order-keeping [`Members`], the field readers
//! each event kind uses, and the provider reference type [`ExternalRef`].

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use opledger_domain::OperationId;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// Longest [`ExternalRef`], in bytes.
pub const MAX_EXTERNAL_REF_LEN: usize = 128;

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

/// The members of a JSON object in order, repeated names included (serde's
/// maps would keep only one of them silently).
pub(super) struct Members<V>(Vec<(String, V)>);

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
pub(super) enum Lookup<'a, V> {
    Missing,
    One(&'a V),
    Repeated,
}

impl<V> Members<V> {
    pub(super) fn lookup(&self, name: &str) -> Lookup<'_, V> {
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
pub(super) fn check_members(data: &Members<Value>, allowed: &[&'static str]) -> Result<(), String> {
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
pub(super) fn string_field<'a>(
    data: &'a Members<Value>,
    name: &'static str,
) -> Result<&'a str, String> {
    match data.lookup(name) {
        Lookup::One(Value::String(text)) => Ok(text),
        Lookup::One(_) => Err(format!("data.{name}: must be a string")),
        Lookup::Missing => Err(format!("data.{name}: missing")),
        Lookup::Repeated => Err(format!("data.{name}: repeated")),
    }
}

pub(super) fn rule(name: &str, rule: &str) -> String {
    format!("data.{name}: {rule}")
}

pub(super) fn external_ref(
    data: &Members<Value>,
    name: &'static str,
) -> Result<ExternalRef, String> {
    ExternalRef::parse(string_field(data, name)?)
        .map_err(|_| rule(name, "must be 1 to 128 visible ascii characters"))
}

pub(super) fn operation_id(data: &Members<Value>) -> Result<OperationId, String> {
    let text = string_field(data, "operation_id")?;
    // The uuid crate also reads braced, urn and unhyphenated forms; only the
    // 36-character hyphenated form is accepted on the wire.
    if text.len() != 36 {
        return Err(rule("operation_id", "must be a hyphenated uuid"));
    }
    OperationId::from_str(text).map_err(|_| rule("operation_id", "must be a hyphenated uuid"))
}

pub(super) fn optional_string<'a>(
    data: &'a Members<Value>,
    name: &'static str,
) -> Result<Option<&'a str>, String> {
    match data.lookup(name) {
        Lookup::Missing => Ok(None),
        _ => string_field(data, name).map(Some),
    }
}

pub(super) fn parse_tx_hash(text: &str) -> Option<[u8; 32]> {
    let digits = text.strip_prefix("0x")?;
    let mut hash = [0u8; 32];
    hex::decode_to_slice(digits, &mut hash).ok()?;
    Some(hash)
}
