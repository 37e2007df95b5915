//! Metadata floods on every port: 1,000 entries or one 20 KiB value (a header list beyond the
//! 16 KiB limit but below HTTP/2's 64 KiB) are RESOURCE_EXHAUSTED with `METADATA_TOO_LARGE`;
//! metadata under the limit passes; beyond 64 KiB a reset or an HTTP 431 is allowed too.

use crate::harness::{Suite, Tally, is_typed, rng_for};
use crate::protobuf::{self, HEALTH_CHECK};
use crate::wire::{Answer, Call, RawClient};
use rand::seq::IndexedRandom;

/// `count` entries `x-hostile-NNNN: v`, about 47 bytes each in HTTP/2's header list accounting.
fn entries(count: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|i| (format!("x-hostile-{i:04}"), "v".to_owned()))
        .collect()
}

fn is_too_large(answer: &Answer) -> bool {
    answer.class == "RESOURCE_EXHAUSTED" && answer.reason == "METADATA_TOO_LARGE"
}

#[tokio::test]
async fn hostile_grpc_metadata_limits() -> anyhow::Result<()> {
    const TEST: &str = "hostile_grpc_metadata_limits";
    let (mut rng, seed) = rng_for(TEST)?;
    let suite = Suite::start().await?;
    let (_, methods) = protobuf::load()?;
    let mut tally = Tally::new(TEST, seed);
    for port in suite.ports() {
        let client = RawClient::new(port.addr);
        // One API method of the port, drawn by the seed, and its health check.
        let api: Vec<&str> = methods
            .iter()
            .filter(|m| m.service == port.service)
            .map(|m| m.path.as_str())
            .collect();
        let mut paths: Vec<&str> = api.choose(&mut rng).into_iter().copied().collect();
        paths.push(HEALTH_CHECK);
        for path in &paths {
            let big = "a".repeat(20 * 1024);
            let cases: [(&str, Vec<(String, String)>); 4] = [
                ("1000_entries", entries(1000)),
                ("one_20KiB_value", vec![("x-hostile-big".to_owned(), big)]),
                ("50_entries_under_the_limit", entries(50)),
                ("2000_entries_beyond_64KiB", entries(2000)),
            ];
            for (name, metadata) in cases {
                let case = format!("{} {path} {name}", port.label);
                let answer = client
                    .call(&Call::unary(path, &[]).with_metadata(metadata))
                    .await;
                tally.record(&case, &answer.class);
                let ok = match name {
                    "1000_entries" | "one_20KiB_value" => is_too_large(&answer),
                    "50_entries_under_the_limit" => {
                        is_typed(&answer.class) && answer.class != "RESOURCE_EXHAUSTED"
                    }
                    _ => {
                        is_too_large(&answer)
                            || ["reset", "closed", "http_431"].contains(&answer.class.as_str())
                    }
                };
                tally.check(ok, &case, || format!("answered {}", answer.describe()));
            }
        }
        suite
            .check_alive(&mut tally, &format!("metadata floods to {}", port.label))
            .await;
    }
    tally.finish()
}
