//! The webhook benchmark's load: distinct signed `deposit.confirmed` deliveries, posted by
//! concurrent HTTP/1.1 clients on keep-alive connections.

use crate::report::{Summary, summarize};
use opledger_webhook::secret::SigningSecret;
use opledger_webhook::verify::sign_v1;
use rand::RngCore;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::options::ACCOUNTS;

/// Distinct, realistic `deposit.confirmed` deliveries, signed when sent.
pub(super) struct Deliveries {
    secret: SigningSecret,
    /// Random per run, so event and deposit ids never repeat across runs on one database.
    salt: u64,
    next: AtomicU64,
}

/// One request: its `webhook-*` headers and body.
pub(super) struct Delivery {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
}

impl Deliveries {
    pub(super) fn new(secret: &SigningSecret) -> Deliveries {
        Deliveries {
            secret: secret.clone(),
            salt: rand::rng().next_u64(),
            next: AtomicU64::new(0),
        }
    }

    /// The next delivery: a new event id and deposit id (a transaction hash and log index), one
    /// of [`ACCOUNTS`] accounts, signed now.
    pub(super) fn next(&self) -> Delivery {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let id = format!("msg_{:016x}{n:016x}", self.salt);
        let amount = 1_000_000 + (n.wrapping_mul(7_919) % 9_000_000);
        let body = format!(
            "{{\"type\":\"deposit.confirmed\",\"timestamp\":\"2026-12-01T12:00:00Z\",\
             \"data\":{{\"deposit_id\":\"0x{:032x}{n:032x}:{:02}\",\"account\":\"customer-{:02}\",\
             \"asset\":\"USDC\",\"amount\":\"{amount}\"}}}}",
            self.salt,
            n % 100,
            n % ACCOUNTS
        );
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        let signature = sign_v1(&self.secret, &id, now, body.as_bytes());
        Delivery {
            id,
            timestamp: now.to_string(),
            signature,
            body,
        }
    }
}

/// One load phase: the accepted deliveries' latencies and what failed, by kind.
#[derive(Debug)]
pub(super) struct Load {
    pub(super) summary: Summary,
    pub(super) errors: BTreeMap<String, usize>,
}

/// `c` clients, each posting one delivery at a time on its keep-alive connection for
/// `duration`. Only a 200 whose body says `accepted` counts; anything else is an error.
pub(super) async fn load(
    client: &reqwest::Client,
    url: &str,
    deliveries: &Arc<Deliveries>,
    c: usize,
    duration: Duration,
) -> anyhow::Result<Load> {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..c {
        let (client, url, deliveries) = (client.clone(), url.to_owned(), deliveries.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors: BTreeMap<String, usize> = BTreeMap::new();
            while start.elapsed() < duration {
                let d = deliveries.next();
                let t = Instant::now();
                let sent = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("webhook-id", d.id)
                    .header("webhook-timestamp", d.timestamp)
                    .header("webhook-signature", d.signature)
                    .body(d.body)
                    .send()
                    .await;
                let kind = match sent {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        match response.bytes().await {
                            Ok(body) if status == 200 && is_accepted(&body) => {
                                latencies.push(t.elapsed());
                                continue;
                            }
                            Ok(body) => format!("HTTP {status} {}", answer_code(&body)),
                            Err(e) => format!("reading the answer: {e}"),
                        }
                    }
                    Err(e) => format!("request: {e}"),
                };
                *errors.entry(kind).or_default() += 1;
            }
            (latencies, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), BTreeMap::new());
    for task in tasks {
        let (latencies, e) = task.await?;
        all.extend(latencies);
        for (kind, n) in e {
            *errors.entry(kind).or_default() += n;
        }
    }
    let failed = errors.values().sum();
    Ok(Load {
        summary: summarize(all, failed, start.elapsed()),
        errors,
    })
}

/// The ingress's `status` code in an answer body.
fn answer_code(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("status")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "(no status)".to_owned())
}

fn is_accepted(body: &[u8]) -> bool {
    answer_code(body) == "accepted"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::options::BODY_LEN;

    #[test]
    fn every_delivery_body_has_the_stated_length_and_parses_as_a_deposit() {
        let deliveries = Deliveries::new(&SigningSecret::generate());
        for _ in 0..200 {
            let d = deliveries.next();
            assert_eq!(d.body.len(), BODY_LEN, "{}", d.body);
            assert_eq!(d.id.len(), 36);
            let parsed = opledger_webhook::event::parse(d.body.as_bytes());
            assert!(
                matches!(parsed, Ok(opledger_webhook::event::Parsed::Known(_))),
                "{}",
                d.body
            );
        }
    }
}
