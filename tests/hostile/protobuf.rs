//! The request messages of every served method, read from the descriptor set the services serve
//! by reflection (so a new method is covered without editing this suite), a decoding oracle (the
//! generated prost types: whether a body decodes is known before it is sent), and seeded
//! generators of bodies that are valid, almost valid or plainly not protobuf.

use anyhow::Context;
use opledger_proto::v1 as pb;
use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use std::collections::HashMap;

/// The health check every port serves beside its API.
pub const HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";
const HEALTH_REQUEST: &str = ".grpc.health.v1.HealthCheckRequest";

/// The wire shape of a field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A `string` (UTF-8 checked on decode).
    Text,
    /// `bytes`.
    Bytes,
    /// Any varint scalar: integers, bool, enum.
    Varint,
    /// `fixed32`, `sfixed32`, `float`.
    Fixed32,
    /// `fixed64`, `sfixed64`, `double`.
    Fixed64,
    /// A nested message of this full type name.
    Message(String),
}

impl Kind {
    fn wire_type(&self) -> u8 {
        match self {
            Kind::Varint => 0,
            Kind::Fixed64 => 1,
            Kind::Text | Kind::Bytes | Kind::Message(_) => 2,
            Kind::Fixed32 => 5,
        }
    }
}

/// One field of a message.
#[derive(Debug, Clone)]
pub struct Field {
    /// Its number.
    pub number: u32,
    /// Its shape.
    pub kind: Kind,
    /// `repeated` (numeric ones may also arrive packed).
    pub repeated: bool,
}

/// One method as the wire sees it.
#[derive(Debug, Clone)]
pub struct Method {
    /// The service's full name, `opledger.v1.OperationsService`.
    pub service: String,
    /// `/opledger.v1.OperationsService/CreateWithdrawal`.
    pub path: String,
    /// The input type's full name with its leading dot.
    pub input: String,
}

/// Every message type's fields, by full name with the leading dot.
#[derive(Debug, Default)]
pub struct Schema {
    messages: HashMap<String, Vec<Field>>,
}

/// The schema and every method of every `opledger.v1` service.
pub fn load() -> anyhow::Result<(Schema, Vec<Method>)> {
    let set = prost_types::FileDescriptorSet::decode(opledger_proto::FILE_DESCRIPTOR_SET)
        .context("the descriptor set of opledger-proto")?;
    let mut schema = Schema::default();
    let mut methods = Vec::new();
    for file in &set.file {
        let package = file.package();
        for message in &file.message_type {
            let fields = message
                .field
                .iter()
                .map(|f| Field {
                    number: u32::try_from(f.number()).unwrap_or(0),
                    kind: match f.r#type() {
                        Type::String => Kind::Text,
                        Type::Bytes => Kind::Bytes,
                        Type::Message | Type::Group => Kind::Message(f.type_name().to_owned()),
                        Type::Fixed32 | Type::Sfixed32 | Type::Float => Kind::Fixed32,
                        Type::Fixed64 | Type::Sfixed64 | Type::Double => Kind::Fixed64,
                        Type::Int32
                        | Type::Int64
                        | Type::Uint32
                        | Type::Uint64
                        | Type::Sint32
                        | Type::Sint64
                        | Type::Bool
                        | Type::Enum => Kind::Varint,
                    },
                    repeated: f.label() == Label::Repeated,
                })
                .collect();
            schema
                .messages
                .insert(format!(".{package}.{}", message.name()), fields);
        }
        if package != "opledger.v1" {
            continue;
        }
        for service in &file.service {
            let full = format!("{package}.{}", service.name());
            for method in &service.method {
                methods.push(Method {
                    service: full.clone(),
                    path: format!("/{full}/{}", method.name()),
                    input: method.input_type().to_owned(),
                });
            }
        }
    }
    schema.messages.insert(
        HEALTH_REQUEST.to_owned(),
        vec![Field {
            number: 1,
            kind: Kind::Text,
            repeated: false,
        }],
    );
    anyhow::ensure!(
        !methods.is_empty(),
        "no opledger.v1 method in the descriptor set"
    );
    for method in &methods {
        decodes(&method.input, &[])?;
    }
    Ok((schema, methods))
}

/// The health check as a method of the port's service.
pub fn health_method(service: &str) -> Method {
    Method {
        service: service.to_owned(),
        path: HEALTH_CHECK.to_owned(),
        input: HEALTH_REQUEST.to_owned(),
    }
}

/// Whether `bytes` decode as `input` (the oracle: the generated prost types the servers use).
pub fn decodes(input: &str, bytes: &[u8]) -> anyhow::Result<bool> {
    Ok(match input {
        ".opledger.v1.CreateWithdrawalRequest" => {
            pb::CreateWithdrawalRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.GetWithdrawalRequest" => pb::GetWithdrawalRequest::decode(bytes).is_ok(),
        ".opledger.v1.ListWithdrawalsRequest" => pb::ListWithdrawalsRequest::decode(bytes).is_ok(),
        ".opledger.v1.GetBalanceRequest" => pb::GetBalanceRequest::decode(bytes).is_ok(),
        ".opledger.v1.CreditAccountRequest" => pb::CreditAccountRequest::decode(bytes).is_ok(),
        ".opledger.v1.SignCreditRequest" => pb::SignCreditRequest::decode(bytes).is_ok(),
        ".opledger.v1.GetCreditRequest" => pb::GetCreditRequest::decode(bytes).is_ok(),
        ".opledger.v1.ListPendingCreditsRequest" => {
            pb::ListPendingCreditsRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.ListPendingApprovalsRequest" => {
            pb::ListPendingApprovalsRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.ApproveWithdrawalRequest" => {
            pb::ApproveWithdrawalRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.RejectWithdrawalRequest" => {
            pb::RejectWithdrawalRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.GetApprovalPolicyRequest" => {
            pb::GetApprovalPolicyRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.SignWithdrawalRequest" => pb::SignWithdrawalRequest::decode(bytes).is_ok(),
        ".opledger.v1.SignReplacementRequest" => pb::SignReplacementRequest::decode(bytes).is_ok(),
        ".opledger.v1.ListUnresolvedRequest" => pb::ListUnresolvedRequest::decode(bytes).is_ok(),
        ".opledger.v1.ResolveWithdrawalRequest" => {
            pb::ResolveWithdrawalRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.ListInboxIssuesRequest" => pb::ListInboxIssuesRequest::decode(bytes).is_ok(),
        ".opledger.v1.ReplayInboxItemRequest" => pb::ReplayInboxItemRequest::decode(bytes).is_ok(),
        ".opledger.v1.ResolveInboxItemRequest" => {
            pb::ResolveInboxItemRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.ListCustodianCandidatesRequest" => {
            pb::ListCustodianCandidatesRequest::decode(bytes).is_ok()
        }
        ".opledger.v1.BindCustodianCandidateRequest" => {
            pb::BindCustodianCandidateRequest::decode(bytes).is_ok()
        }
        HEALTH_REQUEST => tonic_health::pb::HealthCheckRequest::decode(bytes).is_ok(),
        other => anyhow::bail!("no decoding oracle for {other}: add the type to the hostile suite"),
    })
}

/// A varint.
pub fn varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
    out
}

fn tag(number: u32, wire_type: u8) -> Vec<u8> {
    varint((u64::from(number) << 3) | u64::from(wire_type))
}

fn length_delimited(number: u32, inner: &[u8]) -> Vec<u8> {
    let mut out = tag(number, 2);
    out.extend(varint(inner.len() as u64));
    out.extend_from_slice(inner);
    out
}

/// The kinds of generated bodies, in the order they are cycled through.
pub const KINDS: [&str; 14] = [
    "random_bytes",
    "truncated",
    "wrong_wire_type",
    "invalid_utf8",
    "overlong_varint",
    "huge_length",
    "field_zero",
    "bit_flip",
    "nested_truncated",
    "deep_groups",
    "end_group",
    "tag_out_of_range",
    "valid_with_unknown_fields",
    "valid",
];

const INVALID_UTF8: [&[u8]; 8] = [
    &[0xff, 0xfe],
    &[0xc0, 0x80],
    &[0xed, 0xa0, 0x80],
    &[0xf8, 0x88, 0x80, 0x80, 0x80],
    &[0x80],
    &[0xe2, 0x82],
    &[0xf4, 0x90, 0x80, 0x80],
    &[0x61, 0xff, 0x62],
];

impl Schema {
    fn fields(&self, message: &str) -> &[Field] {
        self.messages.get(message).map(Vec::as_slice).unwrap_or(&[])
    }

    /// A valid encoding of `message` with random field values.
    pub fn valid(&self, message: &str, rng: &mut StdRng, depth: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for field in self.fields(message) {
            if !rng.random_bool(0.7) {
                continue;
            }
            let times = if field.repeated {
                rng.random_range(0..4)
            } else {
                1
            };
            for _ in 0..times {
                out.extend(self.valid_value(field, rng, depth));
            }
        }
        out
    }

    fn valid_value(&self, field: &Field, rng: &mut StdRng, depth: u32) -> Vec<u8> {
        let n = field.number;
        match &field.kind {
            Kind::Text => {
                let len = rng.random_range(0..24);
                let text: String = (0..len)
                    .map(|_| char::from(rng.random_range(b' '..=b'~')))
                    .collect();
                length_delimited(n, text.as_bytes())
            }
            Kind::Bytes => {
                let len = rng.random_range(0..24);
                let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                length_delimited(n, &bytes)
            }
            Kind::Varint => {
                let mut out = tag(n, 0);
                let value = if rng.random_bool(0.5) {
                    rng.random_range(0..300)
                } else {
                    rng.random()
                };
                out.extend(varint(value));
                out
            }
            Kind::Fixed32 => {
                let mut out = tag(n, 5);
                out.extend(rng.random::<u32>().to_le_bytes());
                out
            }
            Kind::Fixed64 => {
                let mut out = tag(n, 1);
                out.extend(rng.random::<u64>().to_le_bytes());
                out
            }
            Kind::Message(inner) => {
                let body = if depth < 3 {
                    self.valid(inner, rng, depth + 1)
                } else {
                    Vec::new()
                };
                length_delimited(n, &body)
            }
        }
    }

    /// Paths (outermost field first) to every string field, through nested messages.
    fn text_paths(&self, message: &str, depth: u32) -> Vec<Vec<u32>> {
        let mut paths = Vec::new();
        for field in self.fields(message) {
            match &field.kind {
                Kind::Text => paths.push(vec![field.number]),
                Kind::Message(inner) if depth < 3 => {
                    for mut path in self.text_paths(inner, depth + 1) {
                        path.insert(0, field.number);
                        paths.push(path);
                    }
                }
                _ => {}
            }
        }
        paths
    }

    /// A body of the generator `kind` for `message`.
    pub fn body(&self, kind: &str, message: &str, rng: &mut StdRng) -> Vec<u8> {
        let valid = self.valid(message, rng, 0);
        let fields = self.fields(message);
        let mut out = if rng.random_bool(0.5) {
            valid.clone()
        } else {
            Vec::new()
        };
        match kind {
            "random_bytes" => {
                let len = rng.random_range(1..=64);
                return (0..len).map(|_| rng.random()).collect();
            }
            "truncated" => {
                let mut full = self.valid(message, rng, 0);
                full.extend(self.valid(message, rng, 0));
                if full.len() < 2 {
                    full = vec![0x0a, 0x05, b'a'];
                }
                let cut = rng.random_range(1..full.len());
                full.truncate(cut);
                return full;
            }
            "wrong_wire_type" => {
                let number = fields.choose(rng).map_or(1, |f| f.number);
                let field = fields.iter().find(|f| f.number == number);
                let expected = field.map_or(2, |f| f.kind.wire_type());
                let packable = field.is_some_and(|f| {
                    f.repeated && matches!(f.kind, Kind::Varint | Kind::Fixed32 | Kind::Fixed64)
                });
                let wrong: Vec<u8> = (0..8)
                    .filter(|wt| *wt != expected && !(packable && *wt == 2))
                    .collect();
                let wt = wrong.choose(rng).copied().unwrap_or(7);
                out.extend(tag(number, wt));
                match wt {
                    0 => out.push(0x01),
                    1 => out.extend([0x11; 8]),
                    2 => out.extend([0x02, b'h', b'i']),
                    3 => out.extend(tag(number, 4)),
                    5 => out.extend([0x22; 4]),
                    _ => out.push(0x00),
                }
            }
            "invalid_utf8" => {
                let paths = self.text_paths(message, 0);
                let Some(path) = paths.choose(rng) else {
                    return self.body("overlong_varint", message, rng);
                };
                let bad = INVALID_UTF8.choose(rng).copied().unwrap_or(&[0xff]);
                let mut inner = b"ok".to_vec();
                inner.extend_from_slice(bad);
                let mut encoded = Vec::new();
                for (i, number) in path.iter().rev().enumerate() {
                    encoded = if i == 0 {
                        length_delimited(*number, &inner)
                    } else {
                        length_delimited(*number, &encoded)
                    };
                }
                out.extend(encoded);
            }
            "overlong_varint" => {
                let number = fields
                    .iter()
                    .filter(|f| f.kind == Kind::Varint)
                    .collect::<Vec<_>>()
                    .choose(rng)
                    .map_or(15, |f| f.number);
                match rng.random_range(0..4) {
                    // Eleven bytes: longer than any varint.
                    0 => {
                        out.extend(tag(number, 0));
                        out.extend([0xff; 10]);
                        out.push(0x01);
                    }
                    // Ten bytes whose last one overflows 64 bits.
                    1 => {
                        out.extend(tag(number, 0));
                        out.extend([0xff; 9]);
                        out.push(rng.random_range(0x02..=0x7f));
                    }
                    // The tag itself is an endless varint.
                    2 => out.extend([0x80; 11]),
                    // A varint cut off by the end of the message.
                    _ => {
                        out.extend(tag(number, 0));
                        out.extend([0xff, 0xff, 0xff]);
                    }
                }
            }
            "huge_length" => {
                let number = fields
                    .iter()
                    .filter(|f| f.kind.wire_type() == 2)
                    .collect::<Vec<_>>()
                    .choose(rng)
                    .map_or(15, |f| f.number);
                out.extend(tag(number, 2));
                let declared = *[
                    u64::from(u32::MAX),
                    1 << 31,
                    u64::MAX >> 1,
                    u64::MAX,
                    rng.random_range(9..4096),
                ]
                .choose(rng)
                .unwrap_or(&u64::MAX);
                out.extend(varint(declared));
                out.extend(b"abcdefgh".iter().take(rng.random_range(0..=8)));
            }
            "field_zero" => out.extend(if rng.random_bool(0.5) {
                [0x00, 0x01]
            } else {
                [0x02, 0x00]
            }),
            "bit_flip" => {
                let mut flipped = if valid.is_empty() {
                    vec![0x0a, 0x02, b'o', b'k']
                } else {
                    valid
                };
                for _ in 0..rng.random_range(1..=3) {
                    let at = rng.random_range(0..flipped.len());
                    flipped[at] ^= 1 << rng.random_range(0..8);
                }
                return flipped;
            }
            "nested_truncated" => {
                let nested: Vec<&Field> = fields
                    .iter()
                    .filter(|f| matches!(f.kind, Kind::Message(_)))
                    .collect();
                match nested.choose(rng) {
                    Some(Field {
                        number,
                        kind: Kind::Message(inner),
                        ..
                    }) => {
                        let mut body = self.valid(inner, rng, 1);
                        body.extend(self.valid(inner, rng, 1));
                        if body.len() >= 2 {
                            body.truncate(rng.random_range(1..body.len()));
                        } else {
                            body = vec![0x0a, 0x09, b'x'];
                        }
                        out.extend(length_delimited(*number, &body));
                    }
                    // No nested message: a length-delimited field cut short.
                    _ => out.extend([0x0a, 0x09, b'x']),
                }
            }
            "deep_groups" => {
                // Nested unknown groups, deeper than any decoder's recursion limit.
                let depth = rng.random_range(101..400);
                for _ in 0..depth {
                    out.extend(tag(15, 3));
                }
                for _ in 0..depth {
                    out.extend(tag(15, 4));
                }
            }
            "end_group" => out.extend(tag(rng.random_range(1..20), 4)),
            "tag_out_of_range" => {
                out.extend(varint(((1_u64 << 29) + rng.random_range(0..1000)) << 3));
                out.push(0x01);
            }
            "valid_with_unknown_fields" => {
                out = valid;
                out.extend(tag(rng.random_range(1000..100_000), 0));
                out.extend(varint(rng.random()));
                out.extend(length_delimited(
                    rng.random_range(1000..100_000),
                    b"unknown but well formed",
                ));
            }
            _ => return valid,
        }
        out
    }
}
