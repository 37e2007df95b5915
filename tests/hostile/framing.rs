//! gRPC framing faults on every method and the health check of every port: a length prefix longer
//! than the data, a partial prefix, no message at all, a compressed flag without `grpc-encoding`
//! and compression flags that do not exist are INVALID_ARGUMENT with `MALFORMED_REQUEST`; a
//! declared length beyond the message limit, two messages in a unary call, unsupported encodings
//! and a valid message split into one-byte frames get typed answers.

use crate::harness::{Suite, Tally, is_typed, rng_for};
use crate::protobuf::{self, Method};
use crate::wire::{Call, RawClient, frame, message_frame};
use bytes::Bytes;
use rand::Rng;

/// What a fault must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// INVALID_ARGUMENT with `MALFORMED_REQUEST`.
    Malformed,
    /// One of these gRPC classes.
    OneOf(&'static [&'static str]),
    /// Any gRPC status but a malformed-request one (the request is valid).
    NotMalformed,
    /// Any gRPC status (never INTERNAL or UNKNOWN, as everywhere).
    Typed,
}

#[tokio::test]
async fn hostile_grpc_framing_faults() -> anyhow::Result<()> {
    const TEST: &str = "hostile_grpc_framing_faults";
    let (mut rng, seed) = rng_for(TEST)?;
    let suite = Suite::start().await?;
    let (schema, methods) = protobuf::load()?;
    let mut tally = Tally::new(TEST, seed);
    for port in suite.ports() {
        let client = RawClient::new(port.addr);
        let mut targets: Vec<Method> = methods
            .iter()
            .filter(|m| m.service == port.service)
            .cloned()
            .collect();
        targets.push(protobuf::health_method(port.service));
        let mut cases: Vec<(String, Expect, Call)> = Vec::new();
        for method in &targets {
            let path = method.path.as_str();
            let body = schema.body("valid", &method.input, &mut rng);
            let len = u32::try_from(body.len())?;
            let mut add = |name: String, expect: Expect, call: Call| {
                cases.push((format!("{path} {name}"), expect, call));
            };
            let extra = rng.random_range(1..=64);
            add(
                format!("prefix_longer_than_data+{extra}"),
                Expect::Malformed,
                Call::frames(path, vec![frame(0, len + extra, &body)]),
            );
            let partial = rng.random_range(1..=4);
            add(
                format!("partial_prefix_{partial}_bytes"),
                Expect::Malformed,
                Call::frames(path, vec![frame(0, len, &body).slice(..partial)]),
            );
            add(
                "valid_frame_then_partial_prefix".into(),
                Expect::Malformed,
                Call::frames(
                    path,
                    vec![message_frame(&body), Bytes::from_static(&[0, 0, 0])],
                ),
            );
            add(
                "headers_end_stream_no_data".into(),
                Expect::Malformed,
                Call::headers_only(path),
            );
            add(
                "empty_data_end_stream".into(),
                Expect::Malformed,
                Call::frames(path, Vec::new()),
            );
            add(
                "compressed_flag_without_grpc_encoding".into(),
                Expect::Malformed,
                Call::frames(path, vec![frame(1, len, &body)]),
            );
            for flag in [2, 255, rng.random_range(3..=254)] {
                add(
                    format!("compression_flag_{flag}"),
                    Expect::Malformed,
                    Call::frames(path, vec![frame(flag, len, &body)]),
                );
            }
            add(
                "declared_length_u32_max".into(),
                Expect::OneOf(&["INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "OUT_OF_RANGE"]),
                Call::frames(path, vec![frame(0, u32::MAX, &body)]),
            );
            add(
                "two_messages_in_a_unary_call".into(),
                Expect::Typed,
                Call::frames(path, vec![message_frame(&body), message_frame(&body)]),
            );
            add(
                "gzip_flag_with_garbage".into(),
                Expect::Typed,
                Call::frames(path, vec![frame(1, 4, b"\x00\xff\x13\x37")])
                    .with_metadata(vec![("grpc-encoding".into(), "gzip".into())]),
            );
            add(
                "unknown_grpc_encoding".into(),
                Expect::Typed,
                Call::frames(path, vec![frame(1, len, &body)])
                    .with_metadata(vec![("grpc-encoding".into(), "x-hostile".into())]),
            );
            let whole = message_frame(&body);
            add(
                "valid_message_in_one_byte_frames".into(),
                Expect::NotMalformed,
                Call::frames(path, (0..whole.len()).map(|i| whole.slice(i..=i)).collect()),
            );
        }
        let calls: Vec<Call> = cases.iter().map(|(_, _, call)| call.clone()).collect();
        let answers = client.call_all(&calls, 8).await;
        for ((case, expect, _), answer) in cases.iter().zip(&answers) {
            let case = format!("{} {case}", port.label);
            tally.record(&case, &answer.class);
            let ok = match expect {
                Expect::Malformed => answer.is_malformed_request(),
                Expect::OneOf(classes) => classes.contains(&answer.class.as_str()),
                Expect::NotMalformed => is_typed(&answer.class) && !answer.is_malformed_request(),
                Expect::Typed => is_typed(&answer.class),
            };
            tally.check(ok, &case, || {
                format!("expected {expect:?}, answered {}", answer.describe())
            });
        }
        suite
            .check_alive(&mut tally, &format!("framing faults to {}", port.label))
            .await;
    }
    tally.finish()
}
