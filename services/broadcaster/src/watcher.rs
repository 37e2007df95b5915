//! The chain watcher: when a network's head moves, it looks up the receipts of every attempt of
//! every BROADCAST operation and confirms (settling the hold in the same transaction) those whose
//! inclusion has the configured number of confirmations. No receipt, or no answer, concludes
//! nothing: the operation stays BROADCAST with its hold.

use futures::StreamExt;
use opledger_chain::{Receipt, Rpc};
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
            // Receipts are looked up concurrently; the block's confirmations are then recorded
            // together in one transaction.
            let findings: Vec<_> = futures::stream::iter(in_flight)
                .map(|op| async move { self.inspect(op, watched, head).await })
                .buffer_unordered(WATCH_CONCURRENCY)
                .filter_map(|found| async move { found })
                .collect()
                .await;
            let (included, reverted): (Vec<_>, Vec<_>) =
                findings.into_iter().partition(|f| f.receipt.succeeded);
            pass.confirmed += self.confirm_all(&included).await;
            for finding in &reverted {
                match self.fail_reverted(finding).await {
                    Ok(true) => pass.reverted += 1,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(op_id = %finding.op.op_id, error = %e.log_safe(), "watch deferred")
                    }
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
        // One lookup per block, however many inclusions it holds.
        let mut canonical_hashes: HashMap<u64, Result<Option<String>, ()>> = HashMap::new();
        let mut reopened = 0;
        for inclusion in inclusions {
            let canonical = match canonical_hashes.get(&inclusion.block_number) {
                Some(known) => known.clone(),
                None => {
                    let looked_up = watched.rpc.block_hash(inclusion.block_number).await;
                    canonical_hashes.insert(inclusion.block_number, looked_up.clone());
                    looked_up
                }
            };
            let canonical = match canonical {
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

    /// Receipts of the attempts, latest first: the first included one with the required
    /// confirmations, if any. No receipt, too few confirmations or no answer: `None`.
    async fn inspect(&self, op: InFlight, watched: &Watched, head: u64) -> Option<Finding> {
        for hash in &op.tx_hashes {
            let receipt = match watched.rpc.receipt(hash).await {
                Ok(Some(receipt)) => receipt,
                Ok(None) => continue,
                // No answer: conclude nothing about this operation in this pass.
                Err(()) => return None,
            };
            if head.saturating_sub(receipt.block_number) + 1 < watched.confirmations {
                return None;
            }
            let hash = hash.clone();
            return Some(Finding { op, hash, receipt });
        }
        None
    }

    /// BROADCAST -> CONFIRMED for every finding, holds settled and inclusions recorded, in one
    /// transaction; returns how many moved. Should the batch fail as a whole, each is recorded on
    /// its own, so one bad item cannot hold back the others.
    async fn confirm_all(&self, findings: &[Finding]) -> usize {
        const REASON: &str = "included with the required confirmations";
        if findings.is_empty() {
            return 0;
        }
        let request = |f: &Finding| {
            TransitionRequest::new(
                f.op.tenant_id,
                f.op.op_id,
                OperationState::Broadcast,
                OperationState::Confirmed,
                Actor::ChainWatcher,
                &self.worker_id,
                REASON,
            )
        };
        let items: Vec<_> = findings
            .iter()
            .map(|f| (request(f), f.inclusion()))
            .collect();
        let moved = match self.store.confirm_many(&items).await {
            Ok(moved) => moved,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), size = items.len(), "batch of confirmations rolled back; recording one by one");
                let mut moved = Vec::with_capacity(items.len());
                for (request, inclusion) in &items {
                    moved.push(match self.store.confirm(request, inclusion).await {
                        Ok(()) => true,
                        Err(StoreError::Conflict { .. }) => false,
                        Err(e) => {
                            tracing::warn!(op_id = %request.op_id, error = %e.log_safe(), "watch deferred");
                            false
                        }
                    });
                }
                moved
            }
        };
        for (finding, _) in findings.iter().zip(&moved).filter(|(_, m)| **m) {
            // The step that concludes joins the operation's trace.
            let span = self
                .inclusion_span(finding, OperationState::Confirmed)
                .await;
            span.in_scope(|| tracing::info!(op_id = %finding.op.op_id, state = "CONFIRMED", "inclusion recorded"));
        }
        moved.iter().filter(|m| **m).count()
    }

    /// BROADCAST -> FAILED_TERMINAL for an included attempt that reverted; false when another
    /// worker moved the operation first.
    async fn fail_reverted(&self, finding: &Finding) -> Result<bool, StoreError> {
        let to = OperationState::FailedTerminal;
        let request = TransitionRequest::new(
            finding.op.tenant_id,
            finding.op.op_id,
            OperationState::Broadcast,
            to,
            Actor::ChainWatcher,
            &self.worker_id,
            "included but reverted: needs an owner",
        );
        let span = self.inclusion_span(finding, to).await;
        let recorded = self
            .store
            .transition(&request)
            .instrument(span.clone())
            .await;
        let _in_span = span.enter();
        match recorded {
            Ok(_) => {
                tracing::info!(op_id = %finding.op.op_id, state = to.as_str(), "inclusion recorded");
                Ok(true)
            }
            Err(StoreError::Conflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The span of recording an inclusion, in the operation's trace (when tracing is on).
    async fn inclusion_span(&self, finding: &Finding, to: OperationState) -> tracing::Span {
        let span = tracing::info_span!(
            "watcher.record_inclusion",
            opledger.service = "broadcaster",
            op_id = %finding.op.op_id,
            to_state = to.as_str(),
            block_number = finding.receipt.block_number,
        );
        if telemetry::enabled() {
            let stored = self
                .store
                .trace_context(finding.op.tenant_id, finding.op.op_id)
                .await;
            telemetry::parent_on(&span, stored.ok().flatten().as_deref());
        }
        span
    }
}

/// An in-flight operation with an included attempt that has the required confirmations.
#[derive(Debug)]
struct Finding {
    op: InFlight,
    hash: String,
    receipt: Receipt,
}

impl Finding {
    fn inclusion(&self) -> Inclusion {
        Inclusion {
            tenant_id: self.op.tenant_id,
            op_id: self.op.op_id,
            tx_hash: self.hash.clone(),
            block_number: self.receipt.block_number,
            block_hash: self.receipt.block_hash.clone(),
        }
    }
}
