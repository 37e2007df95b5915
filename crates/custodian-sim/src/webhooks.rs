//! Webhook deliveries: each event is signed when it is made, kept (`GET /sim/webhooks`, replays)
//! and posted by one queue per reference, in order, with retries, and with the faults of its
//! transfer (delay, duplicate, reorder, forged signature, replay).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::clock::Clock;
use crate::faults::Forgery;
use crate::hmac_sha;
use crate::keys::KeyRing;
use crate::profile::Profile;
use crate::record::WebhookPlan;
use crate::state::lock;

/// Attempts of one delivery (the first and the retries).
const ATTEMPTS: u32 = 4;
/// Backoff before the first retry (real time; doubled each time).
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// How a profile signs its webhooks.
#[derive(Debug)]
pub enum Signer {
    /// Fireblocks: a detached JWS by the key ring.
    Fireblocks(Arc<KeyRing>),
    /// BitGo: `x-signature-sha256`, hex HMAC of the body.
    Bitgo(String),
    /// Prime: `X-CB-SIGNATURE`, base64 HMAC of timestamp + body.
    Prime(String),
}

/// Where and how one profile's webhooks go.
#[derive(Debug)]
pub struct Target {
    /// The receiver; events are only kept when absent.
    pub url: Option<String>,
    /// The signer.
    pub signer: Signer,
}

/// An event to send.
#[derive(Debug)]
pub struct Outgoing {
    /// The profile.
    pub profile: Profile,
    /// Our reference.
    pub reference: String,
    /// The event id.
    pub event_id: String,
    /// The raw body.
    pub body: Vec<u8>,
    /// Whether the record reached a terminal state.
    pub terminal: bool,
    /// When it was made (double's clock, ms).
    pub created_ms: i64,
}

/// One attempt to deliver an event.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    /// Double's clock, ms.
    pub at_ms: i64,
    /// The receiver's status, if it answered.
    pub status: Option<u16>,
    /// Why no answer.
    pub error: Option<String>,
    /// Whether this was a replay.
    pub replay: bool,
}

/// An event as kept (`GET /sim/webhooks`).
#[derive(Debug, Clone, Serialize)]
pub struct EventLog {
    /// The event id.
    pub event_id: String,
    /// The profile.
    pub profile: Profile,
    /// Our reference.
    pub reference: String,
    /// The raw body.
    pub body: String,
    /// The signature headers.
    pub headers: Vec<(String, String)>,
    /// Made at (double's clock, ms).
    pub created_ms: i64,
    /// Signed by an untrusted key.
    pub forged: bool,
    /// Attempts so far.
    pub deliveries: Vec<Delivery>,
}

#[derive(Debug)]
struct Job {
    index: usize,
    terminal: bool,
    plan: WebhookPlan,
}

/// All webhook traffic.
#[derive(Debug)]
pub struct WebhookHub {
    http: reqwest::Client,
    clock: Arc<Clock>,
    targets: HashMap<Profile, Target>,
    log: Mutex<Vec<EventLog>>,
    queues: Mutex<HashMap<(Profile, String), mpsc::UnboundedSender<Job>>>,
}

impl WebhookHub {
    /// A hub for `targets`.
    pub fn new(clock: Arc<Clock>, targets: HashMap<Profile, Target>) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("building the webhook client")?;
        Ok(WebhookHub {
            http,
            clock,
            targets,
            log: Mutex::default(),
            queues: Mutex::default(),
        })
    }

    async fn headers(
        &self,
        target: &Target,
        out: &Outgoing,
        forged: Option<Forgery>,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let body = out.body.as_slice();
        Ok(match &target.signer {
            Signer::Fireblocks(keys) => {
                let signature = match forged {
                    Some(forgery) => keys.forge(body, forgery).await?,
                    None => keys.sign(body)?,
                };
                vec![("Fireblocks-Webhook-Signature".to_owned(), signature)]
            }
            Signer::Bitgo(secret) => {
                let key = forged_key(secret, forged);
                let tag = hex::encode(hmac_sha::sign(key.as_bytes(), &[body]));
                vec![
                    ("x-signature-sha256".to_owned(), tag),
                    ("idempotency-key".to_owned(), out.event_id.clone()),
                ]
            }
            Signer::Prime(secret) => {
                let key = forged_key(secret, forged);
                let timestamp = (out.created_ms / 1000).to_string();
                let tag = hmac_sha::sign(key.as_bytes(), &[timestamp.as_bytes(), body]);
                vec![
                    ("X-CB-TIMESTAMP".to_owned(), timestamp),
                    ("X-CB-SIGNATURE".to_owned(), STANDARD.encode(tag)),
                ]
            }
        })
    }

    /// Signs, keeps and queues an event.
    pub async fn emit(self: &Arc<Self>, out: Outgoing, plan: &WebhookPlan) {
        let Some(target) = self.targets.get(&out.profile) else {
            return;
        };
        let headers = match self.headers(target, &out, plan.forged).await {
            Ok(headers) => headers,
            Err(e) => {
                tracing::warn!("signing a webhook failed: {e:#}");
                return;
            }
        };
        let index = {
            let mut log = lock(&self.log);
            log.push(EventLog {
                event_id: out.event_id.clone(),
                profile: out.profile,
                reference: out.reference.clone(),
                body: String::from_utf8_lossy(&out.body).into_owned(),
                headers,
                created_ms: out.created_ms,
                forged: plan.forged.is_some(),
                deliveries: Vec::new(),
            });
            log.len() - 1
        };
        if target.url.is_none() {
            return;
        }
        let job = Job {
            index,
            terminal: out.terminal,
            plan: plan.clone(),
        };
        let mut queues = lock(&self.queues);
        let sender = queues
            .entry((out.profile, out.reference))
            .or_insert_with(|| {
                let (sender, receiver) = mpsc::unbounded_channel();
                tokio::spawn(self.clone().worker(receiver));
                sender
            });
        let _ = sender.send(job);
    }

    async fn worker(self: Arc<Self>, mut jobs: mpsc::UnboundedReceiver<Job>) {
        let mut held: Option<Job> = None;
        let mut first: Option<usize> = None;
        let mut replayed = false;
        while let Some(job) = jobs.recv().await {
            first.get_or_insert(job.index);
            let (terminal, replay_after) = (job.terminal, job.plan.replay_after_ms);
            // The replay is due `after` the terminal event was made (double's clock), however
            // late this worker gets to it: a clock moved meanwhile makes it due at once.
            let made = lock(&self.log).get(job.index).map(|e| e.created_ms);
            if job.plan.reorder && held.is_none() && !job.terminal {
                held = Some(job);
                continue;
            }
            self.deliver(&job).await;
            if let Some(earlier) = held.take() {
                self.deliver(&earlier).await;
            }
            if let (true, false, Some(after), Some(first)) =
                (terminal, replayed, replay_after, first)
            {
                replayed = true;
                let hub = self.clone();
                tokio::spawn(async move {
                    let at = made
                        .unwrap_or_else(|| hub.clock.now_ms())
                        .saturating_add(after);
                    hub.clock.sleep_until(at).await;
                    hub.post(first, true).await;
                });
            }
        }
    }

    async fn deliver(&self, job: &Job) {
        let created = lock(&self.log).get(job.index).map(|e| e.created_ms);
        if let Some(created) = created {
            self.clock
                .sleep_until(created.saturating_add(job.plan.delay_ms))
                .await;
        }
        self.post(job.index, false).await;
        if job.plan.duplicate {
            self.post(job.index, false).await;
        }
    }

    /// Posts event `index` until a 2xx or [`ATTEMPTS`] attempts.
    async fn post(&self, index: usize, replay: bool) {
        let Some((profile, body, headers)) = lock(&self.log)
            .get(index)
            .map(|e| (e.profile, e.body.clone(), e.headers.clone()))
        else {
            return;
        };
        let Some(url) = self.targets.get(&profile).and_then(|t| t.url.clone()) else {
            return;
        };
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            let mut request = self
                .http
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone());
            for (name, value) in &headers {
                request = request.header(name, value);
            }
            let (status, error) = match request.send().await {
                Ok(answer) => (Some(answer.status().as_u16()), None),
                Err(e) => (None, Some(e.to_string())),
            };
            let delivery = Delivery {
                at_ms: self.clock.now_ms(),
                status,
                error,
                replay,
            };
            if let Some(event) = lock(&self.log).get_mut(index) {
                event.deliveries.push(delivery);
            }
            if status.is_some_and(|s| (200..300).contains(&s)) || attempt == ATTEMPTS {
                return;
            }
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }

    /// Sends a kept event again, unchanged (same body, same headers). False when unknown.
    pub fn replay(self: &Arc<Self>, event_id: &str) -> bool {
        let index = lock(&self.log).iter().position(|e| e.event_id == event_id);
        match index {
            Some(index) => {
                let hub = self.clone();
                tokio::spawn(async move { hub.post(index, true).await });
                true
            }
            None => false,
        }
    }

    /// Every event kept.
    pub fn events(&self) -> Vec<EventLog> {
        lock(&self.log).clone()
    }
}

/// The HMAC key of a (possibly forged) signature.
fn forged_key(secret: &str, forged: Option<Forgery>) -> String {
    match forged {
        Some(_) => format!("forged:{secret}"),
        None => secret.to_owned(),
    }
}
