//! Malformed protobuf bodies in well-formed gRPC frames, for every method of every served service
//! and the health check on every port: a body that does not decode is INVALID_ARGUMENT with
//! `MALFORMED_REQUEST` (before any authentication), one that decodes gets a typed answer, an
//! unknown path is UNIMPLEMENTED, and nothing is ever INTERNAL, UNKNOWN or a hang.

use crate::harness::{Suite, Tally, is_typed, rng_for};
use crate::protobuf::{self, KINDS, Method};
use crate::wire::{Call, RawClient};
use rand::Rng;

/// Bodies per method: every generator kind a few times.
const PER_METHOD: usize = 56;

/// How many calls are in flight on one connection.
const CONCURRENCY: usize = 8;

/// The reflection service every port serves (a streaming library service: typed answers only).
const REFLECTION: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

#[tokio::test]
async fn hostile_grpc_malformed_protobuf() -> anyhow::Result<()> {
    const TEST: &str = "hostile_grpc_malformed_protobuf";
    let (mut rng, seed) = rng_for(TEST)?;
    let suite = Suite::start().await?;
    let (schema, methods) = protobuf::load()?;
    let mut tally = Tally::new(TEST, seed);
    for method in &methods {
        tally.check(
            suite.port_of(&method.service).is_some(),
            &method.path,
            || "no port of the hostile world serves this service".to_owned(),
        );
    }
    for port in suite.ports() {
        let client = RawClient::new(port.addr);
        let mut targets: Vec<Method> = methods
            .iter()
            .filter(|m| m.service == port.service)
            .cloned()
            .collect();
        targets.push(protobuf::health_method(port.service));
        let mut cases = Vec::new();
        for method in &targets {
            for i in 0..PER_METHOD {
                let kind = KINDS[i % KINDS.len()];
                let body = schema.body(kind, &method.input, &mut rng);
                let decodes = protobuf::decodes(&method.input, &body)?;
                cases.push((
                    format!(
                        "{} {} #{i} {kind} {}",
                        port.label,
                        method.path,
                        hex::encode(&body[..body.len().min(48)])
                    ),
                    decodes,
                    Call::unary(&method.path, &body),
                ));
            }
        }
        let calls: Vec<Call> = cases.iter().map(|(_, _, call)| call.clone()).collect();
        let answers = client.call_all(&calls, CONCURRENCY).await;
        for ((case, decodes, _), answer) in cases.iter().zip(&answers) {
            tally.record(case, &answer.class);
            if *decodes {
                tally.check(is_typed(&answer.class), case, || {
                    format!("a decodable body answered {}", answer.describe())
                });
            } else {
                tally.check(answer.is_malformed_request(), case, || {
                    format!(
                        "an undecodable body answered {}, not INVALID_ARGUMENT MALFORMED_REQUEST",
                        answer.describe()
                    )
                });
            }
        }

        // Paths nothing serves on this port, some carrying garbage.
        let mut unknown: Vec<String> = methods
            .iter()
            .filter(|m| m.service != port.service)
            .map(|m| m.path.clone())
            .take(3)
            .collect();
        unknown.extend([
            format!("/{}/NoSuchMethod", port.service),
            "/opledger.v1.NoSuchService/Create".to_owned(),
            "/grpc.health.v1.Health/NoSuchCheck".to_owned(),
            "/".to_owned(),
            format!("/{}", "x".repeat(2000)),
        ]);
        for path in unknown {
            let body: Vec<u8> = (0..rng.random_range(0..32)).map(|_| rng.random()).collect();
            let answer = client.call(&Call::unary(&path, &body)).await;
            let case = format!("{} unknown path {:.60}", port.label, path);
            tally.record(&case, &answer.class);
            tally.check(answer.class == "UNIMPLEMENTED", &case, || {
                format!("answered {}", answer.describe())
            });
        }

        // The reflection stream with bodies that are not reflection requests.
        for kind in ["random_bytes", "truncated", "huge_length", "invalid_utf8"] {
            let body = schema.body(
                kind,
                ".grpc.reflection.v1.ServerReflectionRequest",
                &mut rng,
            );
            let answer = client.call(&Call::unary(REFLECTION, &body)).await;
            let case = format!("{} reflection {kind}", port.label);
            tally.record(&case, &answer.class);
            tally.check(is_typed(&answer.class), &case, || {
                format!("answered {}", answer.describe())
            });
        }
        suite
            .check_alive(&mut tally, &format!("malformed bodies to {}", port.label))
            .await;
    }
    tally.finish()
}
