//! One pass of the executor: the networks whose evidence has no agreement are held back from
//! the queue, the bound of each network's requests is read once, and the due withdrawals are
//! handled a few at a time.

use super::{Bounds, Executor};
use opledger_domain::state::OperationState as S;
use opledger_store::custodian::CustodianDue;
use std::collections::BTreeSet;
use std::sync::PoisonError;

impl Executor {
    /// One pass over up to `batch` due withdrawals, `concurrency` at a time; returns how many it
    /// handled. A failure is logged and the withdrawal is left for a later pass.
    pub async fn pass(&self, batch: u32, concurrency: usize) -> usize {
        use futures::StreamExt;
        let held_back = self.still_held_back().await;
        let due = match self
            .store
            .custodian_due(self.follow_every, batch, &held_back)
            .await
        {
            Ok(due) => due,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "custodian queue unavailable");
                return 0;
            }
        };
        let bounds = &self.bounds(&due).await;
        let count = due.len();
        futures::stream::iter(due)
            .for_each_concurrent(concurrency.max(1), |due| async move {
                let op = due.operation.op_id;
                if let Err(e) = self.handle(due, bounds).await {
                    tracing::warn!(%op, error = %e.log_safe(), "custodian step failed");
                }
            })
            .await;
        count
    }

    /// The held-back networks whose evidence still has no agreement (each asked once); the
    /// others are released to the queue.
    async fn still_held_back(&self) -> Vec<String> {
        let held: Vec<String> = self
            .held_back
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        let mut still = Vec::new();
        for network in held {
            if self.chains.bound(&network).await.is_err() {
                still.push(network);
            } else {
                tracing::info!(%network, "evidence agrees again: custodian withdrawals are sent again");
            }
        }
        *self
            .held_back
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = still.iter().cloned().collect();
        still
    }

    /// The bound of a request stored now on each network of the APPROVED withdrawals in `due`,
    /// read once per network; a network without agreement is held back from the next passes.
    async fn bounds(&self, due: &[CustodianDue]) -> Bounds {
        let networks: BTreeSet<&str> = due
            .iter()
            .filter(|d| d.operation.state == S::Approved)
            .map(|d| d.operation.payload.network.as_str())
            .collect();
        let mut bounds = Bounds::new();
        for network in networks {
            match self.chains.bound(network).await {
                Ok(bound) => {
                    bounds.insert(network.to_owned(), bound);
                }
                Err(e) => {
                    tracing::error!(%network, error = %e, "no evidence of the chain now: its custodian withdrawals are not sent until it agrees");
                    self.held_back
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(network.to_owned());
                }
            }
        }
        bounds
    }
}
