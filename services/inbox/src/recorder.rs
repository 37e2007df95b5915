//! Group commit of verified deliveries.
//!
//! Every verified delivery must be committed before its 2xx. Deliveries that are ready while
//! earlier ones are being committed wait in one queue; each of at most [`IN_FLIGHT`] recording
//! tasks takes everything waiting (up to [`MAX_BATCH`]) and records it with one statement, so one
//! commit acknowledges them all. A lone delivery is recorded exactly as on its own. A batch that
//! fails as a whole is recorded again one delivery at a time, so each request gets its own answer
//! (a row a failed batch did commit is then found as a duplicate: still acknowledged once stored).
//!
//! The recording runs in its own task: a sender that hangs up does not cut a commit short.

use opledger_domain::ids::OperationId;
use opledger_store::StoreError;
use opledger_store::inbox::{Delivery, DeliveryClass, Endpoint, Recorded, SealedBody};
use opledger_store::roles::InboxStore;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// At most this many deliveries share one statement.
const MAX_BATCH: usize = 64;
/// At most this many statements record deliveries at once.
const IN_FLIGHT: usize = 2;

/// What a delivery is, owned.
#[derive(Debug, Clone)]
pub(crate) enum Class {
    /// A known type the endpoint may send.
    Event {
        event_type: &'static str,
        op_id: Option<OperationId>,
    },
    /// Stored, never applied.
    Unhandled {
        event_type: Option<String>,
        reason: &'static str,
    },
}

/// A verified, sealed delivery waiting to be recorded.
#[derive(Debug)]
pub(crate) struct Pending {
    pub endpoint: Arc<Endpoint>,
    pub event_id: String,
    pub body_hash: [u8; 32],
    pub sent_at: chrono::DateTime<chrono::Utc>,
    pub body: SealedBody,
    pub class: Class,
    /// The `v1a` signature that verified it (kept for third parties such as the signer).
    pub signature: Option<[u8; 64]>,
}

impl Pending {
    fn delivery(&self) -> Delivery<'_> {
        Delivery {
            endpoint: &self.endpoint,
            event_id: &self.event_id,
            body_hash: self.body_hash,
            sent_at: self.sent_at,
            body: &self.body,
            class: match &self.class {
                Class::Event { event_type, op_id } => DeliveryClass::Event {
                    event_type,
                    op_id: *op_id,
                },
                Class::Unhandled { event_type, reason } => DeliveryClass::Unhandled {
                    event_type: event_type.as_deref(),
                    reason,
                },
            },
            signature: self.signature.as_ref(),
        }
    }
}

/// Why a delivery was not recorded: it must not be acknowledged.
#[derive(Debug)]
pub(crate) enum NotRecorded {
    /// The store failed.
    Store(StoreError),
    /// The recording task ended without an answer.
    Interrupted,
}

impl NotRecorded {
    /// A description free of identifiers.
    pub fn log_safe(&self) -> String {
        match self {
            NotRecorded::Store(e) => e.log_safe(),
            NotRecorded::Interrupted => "recording interrupted".to_owned(),
        }
    }
}

type Reply = oneshot::Sender<Result<Recorded, StoreError>>;

#[derive(Debug, Default)]
struct Queue {
    waiting: Vec<(Pending, Reply)>,
    running: usize,
}

/// The queue of deliveries to record, over one store.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    store: InboxStore,
    queue: Arc<Mutex<Queue>>,
}

impl Recorder {
    /// An empty queue over `store`.
    pub fn new(store: InboxStore) -> Recorder {
        Recorder {
            store,
            queue: Arc::default(),
        }
    }

    /// Records `pending`, with whatever else is waiting; returns once it is committed.
    pub async fn record(&self, pending: Pending) -> Result<Recorded, NotRecorded> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            queue.waiting.push((pending, reply));
            let start = queue.running < IN_FLIGHT;
            if start {
                queue.running += 1;
            }
            start
        };
        if start {
            let recorder = self.clone();
            tokio::spawn(async move { recorder.drain().await });
        }
        match answer.await {
            Ok(Ok(recorded)) => Ok(recorded),
            Ok(Err(e)) => Err(NotRecorded::Store(e)),
            Err(_) => Err(NotRecorded::Interrupted),
        }
    }

    /// Records what is waiting, a batch per statement, until nothing is.
    async fn drain(&self) {
        let mut guard = Draining {
            queue: &self.queue,
            finished: false,
        };
        loop {
            let batch: Vec<_> = {
                let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
                if queue.waiting.is_empty() {
                    queue.running -= 1;
                    guard.finished = true;
                    return;
                }
                let take = queue.waiting.len().min(MAX_BATCH);
                queue.waiting.drain(..take).collect()
            };
            self.record_batch(batch).await;
        }
    }

    async fn record_batch(&self, batch: Vec<(Pending, Reply)>) {
        if batch.len() > 1 {
            let deliveries: Vec<_> = batch.iter().map(|(p, _)| p.delivery()).collect();
            match self.store.record_deliveries(&deliveries).await {
                Ok(recorded) => {
                    for ((_, reply), recorded) in batch.into_iter().zip(recorded) {
                        let _ = reply.send(Ok(recorded));
                    }
                    return;
                }
                Err(e) => tracing::warn!(
                    size = deliveries.len(),
                    error = %e.log_safe(),
                    "batch of deliveries not recorded; recording one by one"
                ),
            }
        }
        for (pending, reply) in batch {
            let _ = reply.send(self.store.record_delivery(&pending.delivery()).await);
        }
    }
}

/// Gives a recording task's slot back should the task end abnormally (a panic), so the queue is
/// never left without a task while deliveries wait; the waiting ones are failed (503, the sender
/// retries) rather than left hanging.
struct Draining<'a> {
    queue: &'a Mutex<Queue>,
    finished: bool,
}

impl Drop for Draining<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            queue.running -= 1;
            if queue.running == 0 {
                queue.waiting.clear();
            }
        }
    }
}
