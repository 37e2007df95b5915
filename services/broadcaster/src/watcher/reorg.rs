//! Reorganizations: re-checking the blocks of recent inclusions and of applied releases' proofs,
//! and reopening what the quorum agrees was reorganized away.

use super::{Watched, Watcher};
use opledger_chain::evidence::{B256, BlockRef, Pinned, no_evidence, reason_label};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_grpc::telemetry;
use opledger_store::StoreError;
use opledger_store::broadcast::{AppliedRelease, ReleaseReopened};
use tracing::Instrument as _;

impl Watcher {
    /// Re-checks, at or below the pinned block and within the window, the blocks of recent
    /// inclusions and of the proofs of applied releases; returns how many settlements and how
    /// many releases the quorum agrees were reorganized away (and reopened). No agreement: no
    /// conclusion.
    pub(super) async fn check_reorgs(
        &self,
        network: &str,
        watched: &Watched,
        pinned: &Pinned,
    ) -> (usize, usize) {
        let from = pinned.pinned.number.saturating_sub(watched.reorg_window);
        let to = pinned.pinned.number;
        let blocks = match self.store.recent_inclusion_blocks(network, from, to).await {
            Ok(blocks) => blocks,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read recent inclusions");
                Vec::new()
            }
        };
        let releases = match self.store.applied_releases(network, from, to).await {
            Ok(releases) => releases,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read applied releases");
                Vec::new()
            }
        };
        let mut all: Vec<(u64, String)> = blocks.clone();
        all.extend(
            releases
                .iter()
                .map(|r| (r.block_number, r.block_hash.clone())),
        );
        all.sort();
        all.dedup();
        let gone = gone_blocks(network, pinned, all).await;
        let settled_gone: Vec<(u64, String)> = blocks
            .into_iter()
            .filter(|block| gone.contains(block))
            .collect();
        let reopened = self.reopen_settlements(network, &settled_gone).await;
        let released_gone: Vec<AppliedRelease> = releases
            .into_iter()
            .filter(|r| gone.contains(&(r.block_number, r.block_hash.clone())))
            .collect();
        (reopened, self.reopen_releases(&released_gone).await)
    }

    /// Reopens the settlements recorded in `gone` blocks (CONFIRMED -> BROADCAST).
    async fn reopen_settlements(&self, network: &str, gone: &[(u64, String)]) -> usize {
        let inclusions = match self.store.inclusions_in(network, gone).await {
            Ok(inclusions) => inclusions,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read reorganized inclusions");
                return 0;
            }
        };
        let mut reopened = 0;
        for inclusion in inclusions {
            let span = self
                .reopen_span(inclusion.tenant_id, inclusion.op_id, inclusion.block_number)
                .await;
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

    /// Reopens the releases whose proofs are in blocks the quorum agrees are gone
    /// (VERIFIED_NOT_SENT -> UNKNOWN, the funds held again, escalated to the operations owner).
    async fn reopen_releases(&self, gone: &[AppliedRelease]) -> usize {
        let mut reopened = 0;
        for release in gone {
            let span = self
                .reopen_span(release.tenant_id, release.op_id, release.block_number)
                .await;
            let reopened_now = self
                .store
                .reopen_release(release, &self.worker_id, &self.owners.operations)
                .instrument(span.clone())
                .await;
            let _in_span = span.enter();
            match reopened_now {
                Ok(ReleaseReopened::Reopened) => {
                    tracing::error!(op_id = %release.op_id, "release's proof reorganized away; back to UNKNOWN, funds held again, escalated");
                    reopened += 1;
                }
                Ok(ReleaseReopened::ProofMarked) => {
                    tracing::warn!(op_id = %release.op_id, "a release's proof reorganized away; the release stands on another witnessed proof");
                }
                Ok(ReleaseReopened::Already) | Err(StoreError::Conflict { .. }) => {}
                Err(e) => {
                    tracing::warn!(op_id = %release.op_id, error = %e.log_safe(), "release reopen deferred")
                }
            }
        }
        reopened
    }

    /// The span of a reopening, parented on the operation's stored trace.
    async fn reopen_span(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        block_number: u64,
    ) -> tracing::Span {
        let span = tracing::info_span!(
            "watcher.reopen",
            opledger.service = "broadcaster",
            op_id = %op_id,
            block_number = block_number,
        );
        if telemetry::enabled() {
            let stored = self.store.trace_context(tenant_id, op_id);
            telemetry::parent_on(&span, stored.await.ok().flatten().as_deref());
        }
        span
    }
}

/// Of `blocks` (number, stored hash), those the quorum agrees are no longer canonical at the
/// pinned block. Above the pinned block the pass cannot tell (the store leaves those out); the
/// next pass will. The store only holds hashes the watcher or the witness parsed; one that does
/// not parse is left alone. No agreement on a block: no conclusion about it.
async fn gone_blocks(
    network: &str,
    pinned: &Pinned,
    blocks: Vec<(u64, String)>,
) -> std::collections::BTreeSet<(u64, String)> {
    let checked: Vec<((u64, String), BlockRef)> = blocks
        .into_iter()
        .filter(|(number, _)| *number <= pinned.pinned.number)
        .filter_map(|(number, hash)| {
            let parsed = hash.parse::<B256>().ok()?;
            Some((
                (number, hash),
                BlockRef {
                    number,
                    hash: parsed.0,
                },
            ))
        })
        .collect();
    let refs: Vec<BlockRef> = checked.iter().map(|(_, block)| *block).collect();
    let verdicts = pinned.canonical_all(&refs).await;
    let mut gone = std::collections::BTreeSet::new();
    for ((stored, _), verdict) in checked.into_iter().zip(verdicts) {
        match verdict {
            Ok(true) => {}
            Ok(false) => {
                gone.insert(stored);
            }
            Err(no) => no_evidence().record(network, reason_label(&no)),
        }
    }
    gone
}
