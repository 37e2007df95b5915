//! Group commit of signatures per sender.
//!
//! Every signature of one sender takes that sender's nonce row lock until its transaction commits,
//! so one sender's signatures are serialized on a durable commit each. Claims that are ready while
//! a sender's transaction is in flight queue in its lane; when it commits, the next transaction
//! persists all of them at once (consecutive nonces, one lock, one commit). A lane with one claim
//! waiting persists it exactly as a lone signature; a batch that cannot be kept whole (a lost
//! lease, a signing failure, a database error) is rolled back and each claim is then persisted on
//! its own, so every caller gets its own answer and no nonce is skipped.
//!
//! The lane's work runs in its own task: a caller that goes away does not cut a transaction short.

use opledger_domain::ids::{OperationId, TenantId};
use opledger_evm::signer::{self as evm, KeyProvider, SignError};
use opledger_evm::tx::TransferRequest;
use opledger_store::StoreError;
use opledger_store::roles::SignerStore;
use opledger_store::signing::{Attempt, AttemptKind, NewAttempt, Sender, SignClaim};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// At most this many signatures share one transaction.
const MAX_BATCH: usize = 64;

/// What persisting one claim produced: the stored attempt, or why signing failed (the claim is
/// still held), or a store failure.
pub type Persisted = Result<Result<Attempt, SignError>, StoreError>;

/// The lane's task ended without answering (it panicked); nothing is known to be persisted.
#[derive(Debug, Clone, Copy)]
pub struct LaneGone;

/// One claimed operation to sign with the next nonce of its sender.
#[derive(Debug)]
pub struct Job {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The owner of the claim's lease.
    pub owner: String,
    /// The transfer to sign (its nonce is set when the nonce is allocated).
    pub request: TransferRequest,
    /// The sender's key.
    pub key: Arc<dyn KeyProvider>,
    /// The sender's first nonce, for a sender the store has not seen.
    pub initial_nonce: u64,
}

/// A sender: network id and lowercase 0x address.
type LaneKey = (String, String);

/// The jobs waiting for one sender. A lane exists exactly while its task runs: the first job
/// creates it and starts the task, and the task removes it once nothing waits.
type Lane = Vec<(Job, oneshot::Sender<Persisted>)>;

/// The lanes of every sender of this signer.
#[derive(Debug, Clone)]
pub struct Lanes {
    store: SignerStore,
    lanes: Arc<Mutex<HashMap<LaneKey, Lane>>>,
}

impl Lanes {
    /// No lanes yet, over this store.
    pub fn new(store: SignerStore) -> Lanes {
        Lanes {
            store,
            lanes: Arc::default(),
        }
    }

    /// Persists `job` with the next nonce of (`network`, `sender`), together with whatever else
    /// is waiting for that sender.
    pub async fn persist(
        &self,
        network: &str,
        sender: &str,
        job: Job,
    ) -> Result<Persisted, LaneGone> {
        let (reply, answer) = oneshot::channel();
        let key = (network.to_owned(), sender.to_owned());
        let start = {
            let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
            let start = !lanes.contains_key(&key);
            lanes.entry(key.clone()).or_default().push((job, reply));
            start
        };
        if start {
            let lanes = self.clone();
            tokio::spawn(async move { lanes.drain(key).await });
        }
        answer.await.map_err(|_| LaneGone)
    }

    /// Persists the lane's waiting jobs, a batch per transaction, until none is left.
    async fn drain(&self, key: LaneKey) {
        let mut guard = Draining {
            lanes: &self.lanes,
            key: &key,
            finished: false,
        };
        loop {
            let batch: Vec<_> = {
                let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
                let Some(lane) = lanes.get_mut(&key) else {
                    guard.finished = true;
                    return;
                };
                if lane.is_empty() {
                    lanes.remove(&key);
                    guard.finished = true;
                    return;
                }
                let take = lane.len().min(MAX_BATCH);
                lane.drain(..take).collect()
            };
            self.persist_batch(&key, batch).await;
        }
    }

    async fn persist_batch(&self, key: &LaneKey, batch: Vec<(Job, oneshot::Sender<Persisted>)>) {
        let sender = |initial_nonce| Sender {
            network: &key.0,
            address: &key.1,
            initial_nonce,
        };
        if batch.len() > 1 {
            let claims: Vec<_> = batch
                .iter()
                .map(|(job, _)| SignClaim {
                    tenant_id: job.tenant_id,
                    op_id: job.op_id,
                    owner: &job.owner,
                })
                .collect();
            let persisted = self
                .store
                .persist_signed_batch(&sender(batch[0].0.initial_nonce), &claims, |i, nonce| {
                    sign_with_nonce(&batch[i].0, nonce)
                })
                .await;
            match persisted {
                Ok(Some(attempts)) => {
                    for ((_, reply), attempt) in batch.into_iter().zip(attempts) {
                        let _ = reply.send(Ok(Ok(attempt)));
                    }
                    return;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    size = claims.len(),
                    error = %e.log_safe(),
                    "batch of signatures rolled back; persisting one by one"
                ),
            }
        }
        for (job, reply) in batch {
            let persisted = self
                .store
                .persist_signed(
                    job.tenant_id,
                    job.op_id,
                    &job.owner,
                    &sender(job.initial_nonce),
                    |nonce| sign_with_nonce(&job, nonce),
                )
                .await;
            let _ = reply.send(persisted);
        }
    }
}

/// Removes a lane whose task ended abnormally (a panic): its waiting callers get
/// [`LaneGone`] instead of waiting forever, and the next signature starts a fresh lane.
struct Draining<'a> {
    lanes: &'a Mutex<HashMap<LaneKey, Lane>>,
    key: &'a LaneKey,
    finished: bool,
}

impl Drop for Draining<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
            lanes.remove(self.key);
        }
    }
}

/// Signs the job's transfer with `nonce` (the store checks the result carries it).
fn sign_with_nonce(job: &Job, nonce: u64) -> Result<NewAttempt, SignError> {
    let request = TransferRequest {
        nonce,
        ..job.request.clone()
    };
    let signed = evm::sign(&request, job.key.as_ref())?;
    opledger_failpoint::hit("sign.after_sign");
    Ok(new_attempt(
        AttemptKind::Original,
        request.chain_id,
        &signed,
    ))
}

/// The attempt row of a transaction the signer just signed.
pub(crate) fn new_attempt(
    kind: AttemptKind,
    chain_id: u64,
    signed: &evm::SignedTransaction,
) -> NewAttempt {
    NewAttempt {
        kind,
        chain_id,
        sender: format!("{:#x}", signed.from),
        nonce: signed.nonce,
        tx_hash: format!("{:#x}", signed.hash),
        raw_tx: signed.raw.clone(),
        gas_limit: signed.gas_limit,
        max_fee_per_gas: signed.max_fee_per_gas,
        max_priority_fee_per_gas: signed.max_priority_fee_per_gas,
    }
}
