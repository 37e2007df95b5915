//! The chain watcher: when a network's head moves, it looks up the receipts of every attempt of
//! every BROADCAST operation and confirms (settling the hold in the same transaction) those whose
//! inclusion has the configured number of confirmations. No receipt, or no answer, concludes
//! nothing: the operation stays BROADCAST with its hold.

use futures::StreamExt;
use opledger_chain::Rpc;
use opledger_domain::state::{Actor, OperationState};
use opledger_grpc::telemetry;
use opledger_store::broadcast::{InFlight, Inclusion};
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;
use tracing::Instrument as _;

/// Receipt lookups and confirmations in flight at once per pass.
const WATCH_CONCURRENCY: usize = 16;

/// One network the watcher follows.
#[derive(Debug, Clone)]
pub struct Watched {
    /// Its JSON-RPC endpoint.
    pub rpc: Rpc,
    /// Blocks an inclusion needs (1 = the including block itself).
    pub confirmations: u64,
    /// How many blocks below the head confirmed inclusions are re-checked for reorganizations.
    pub reorg_window: u64,
}

/// Watches BROADCAST operations on every configured network.
#[derive(Debug)]
pub struct Watcher {
    store: Store,
    networks: HashMap<String, Watched>,
    worker_id: String,
    last_head: Mutex<HashMap<String, (u64, String)>>,
}

/// What a watcher pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Networks whose head moved since the last pass.
    pub new_heads: usize,
    /// Operations moved to CONFIRMED.
    pub confirmed: usize,
    /// Operations moved to FAILED_TERMINAL because their included attempt reverted.
    pub reverted: usize,
    /// CONFIRMED operations whose inclusion a reorganization removed (back to BROADCAST).
    pub reopened: usize,
}

impl Watcher {
    /// A watcher of `networks`.
    pub fn new(store: Store, networks: HashMap<String, Watched>, worker_id: String) -> Watcher {
        Watcher {
            store,
            networks,
            worker_id,
            last_head: Mutex::new(HashMap::new()),
        }
    }

    /// One pass: for each network whose head moved, checks its BROADCAST operations.
    pub async fn tick(&self, limit: u32) -> Pass {
        let mut pass = Pass::default();
        for (network, watched) in &self.networks {
            let Some((head, head_hash)) = watched.rpc.head().await else {
                continue;
            };
            let current = (head, head_hash);
            let moved = match self.last_head.lock() {
                Ok(mut last) => {
                    last.insert(network.clone(), current.clone()).as_ref() != Some(&current)
                }
                Err(_) => true,
            };
            if !moved {
                continue;
            }
            pass.new_heads += 1;
            pass.reopened += self.check_reorgs(network, watched, head).await;
            let in_flight = match self.store.in_flight(network, limit).await {
                Ok(in_flight) => in_flight,
                Err(e) => {
                    tracing::warn!(error = %e.log_safe(), "cannot read in-flight operations");
                    continue;
                }
            };
            // Receipts are looked up and confirmations recorded concurrently: one slow lookup or
            // commit must not hold back the rest of the block's confirmations.
            let outcomes: Vec<_> = futures::stream::iter(in_flight)
                .map(|op| async move { (op.op_id, self.check(&op, watched, head).await) })
                .buffer_unordered(WATCH_CONCURRENCY)
                .collect()
                .await;
            for (op_id, outcome) in outcomes {
                match outcome {
                    Ok(Some(OperationState::Confirmed)) => pass.confirmed += 1,
                    Ok(Some(_)) => pass.reverted += 1,
                    Ok(None) => {}
                    Err(e) => tracing::warn!(%op_id, error = %e.log_safe(), "watch deferred"),
                }
            }
        }
        pass
    }

    /// Re-checks recent inclusions; returns how many were reorganized away (and reopened).
    async fn check_reorgs(&self, network: &str, watched: &Watched, head: u64) -> usize {
        let inclusions = match self
            .store
            .recent_inclusions(network, head.saturating_sub(watched.reorg_window))
            .await
        {
            Ok(inclusions) => inclusions,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read recent inclusions");
                return 0;
            }
        };
        let mut reopened = 0;
        for inclusion in inclusions {
            let canonical = match watched.rpc.block_hash(inclusion.block_number).await {
                Ok(canonical) => canonical,
                // No answer: no conclusion.
                Err(()) => continue,
            };
            if canonical.as_deref() == Some(inclusion.block_hash.as_str()) {
                continue;
            }
            let span = tracing::info_span!(
                "watcher.reopen",
                opledger.service = "broadcaster",
                op_id = %inclusion.op_id,
                block_number = inclusion.block_number,
            );
            if telemetry::enabled() {
                let stored = self
                    .store
                    .trace_context(inclusion.tenant_id, inclusion.op_id);
                telemetry::parent_on(&span, stored.await.ok().flatten().as_deref());
            }
            let reopened_now = self
                .store
                .reopen(&inclusion, &self.worker_id)
                .instrument(span.clone())
                .await;
            let _in_span = span.enter();
            match reopened_now {
                Ok(()) => {
                    tracing::warn!(op_id = %inclusion.op_id, "confirmed inclusion reorganized away; back to BROADCAST");
                    reopened += 1;
                }
                Err(e) => {
                    tracing::warn!(op_id = %inclusion.op_id, error = %e.log_safe(), "reopen deferred")
                }
            }
        }
        reopened
    }

    /// Receipts of the attempts, latest first; the first included one decides.
    async fn check(
        &self,
        op: &InFlight,
        watched: &Watched,
        head: u64,
    ) -> Result<Option<OperationState>, StoreError> {
        for hash in &op.tx_hashes {
            let receipt = match watched.rpc.receipt(hash).await {
                Ok(Some(receipt)) => receipt,
                Ok(None) => continue,
                // No answer: conclude nothing about this operation in this pass.
                Err(()) => return Ok(None),
            };
            if head.saturating_sub(receipt.block_number) + 1 < watched.confirmations {
                return Ok(None);
            }
            let (to, reason) = if receipt.succeeded {
                (
                    OperationState::Confirmed,
                    "included with the required confirmations",
                )
            } else {
                (
                    OperationState::FailedTerminal,
                    "included but reverted: needs an owner",
                )
            };
            let request = TransitionRequest::new(
                op.tenant_id,
                op.op_id,
                OperationState::Broadcast,
                to,
                Actor::ChainWatcher,
                &self.worker_id,
                reason,
            );
            // The step that concludes (CONFIRMED or FAILED_TERMINAL) joins the operation's trace.
            let span = tracing::info_span!(
                "watcher.record_inclusion",
                opledger.service = "broadcaster",
                op_id = %op.op_id,
                to_state = to.as_str(),
                block_number = receipt.block_number,
            );
            if telemetry::enabled() {
                let stored = self.store.trace_context(op.tenant_id, op.op_id).await;
                telemetry::parent_on(&span, stored.ok().flatten().as_deref());
            }
            let recorded = async {
                if receipt.succeeded {
                    let inclusion = Inclusion {
                        tenant_id: op.tenant_id,
                        op_id: op.op_id,
                        tx_hash: hash.clone(),
                        block_number: receipt.block_number,
                        block_hash: receipt.block_hash.clone(),
                    };
                    self.store.confirm(&request, &inclusion).await
                } else {
                    self.store.transition(&request).await.map(|_| ())
                }
            }
            .instrument(span.clone())
            .await;
            let _in_span = span.enter();
            return match recorded {
                Ok(_) => {
                    tracing::info!(op_id = %op.op_id, state = to.as_str(), "inclusion recorded");
                    Ok(Some(to))
                }
                Err(StoreError::Conflict { .. }) => Ok(None),
                Err(e) => Err(e),
            };
        }
        Ok(None)
    }
}
