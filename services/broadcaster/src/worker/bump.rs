//! Fee bumps of stuck BROADCAST transfers ([`Broadcaster::bump_stuck`]): the signer persists
//! each replacement and only its stored bytes are submitted.

use super::Broadcaster;
use opledger_chain::{Rpc, SubmitClass};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::OperationState;
use opledger_proto::v1 as pb;
use std::time::Duration;
use tracing::Instrument as _;

impl Broadcaster {
    /// Fee-bumps BROADCAST transfers on `network` whose latest attempt is older than
    /// `older_than_secs`: the signer persists the replacement (same nonce, recipient and amount,
    /// fees up, never above the payload's fee cap) and only its stored bytes are submitted. Returns
    /// the submission classes; an operation at its fee cap is left as it is.
    pub async fn bump_stuck(
        &self,
        network: &str,
        older_than_secs: u64,
        limit: u32,
    ) -> Vec<SubmitClass> {
        let Some(rpc) = self.rpcs.get(network) else {
            return Vec::new();
        };
        let stuck = match self.store.stuck(network, older_than_secs, limit).await {
            Ok(stuck) => stuck,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read stuck operations");
                return Vec::new();
            }
        };
        let mut classes = Vec::new();
        let older_than = Duration::from_secs(older_than_secs);
        for (tenant_id, op_id) in stuck {
            let Some(locks) = &self.pass_locks else {
                classes.extend(self.bump(rpc, tenant_id, op_id).await);
                continue;
            };
            // Another broadcaster may be bumping it, or have just bumped it: decide under the
            // operation's pass lock, on the state and latest attempt found there.
            let lock = match locks.try_lock(tenant_id, op_id).await {
                Ok(Some(lock)) => lock,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(%op_id, error = %e.log_safe(), "cannot lock the fee bump");
                    continue;
                }
            };
            if lock.state == OperationState::Broadcast
                && lock.latest_attempt_age.is_some_and(|age| age >= older_than)
            {
                classes.extend(self.bump(rpc, tenant_id, op_id).await);
            }
            lock.release().await;
        }
        classes
    }

    /// Gets one fee bump signed and submits its stored bytes; its submission's class.
    async fn bump(
        &self,
        rpc: &Rpc,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Option<SubmitClass> {
        let span = tracing::info_span!(
            "broadcaster.bump",
            opledger.service = "broadcaster",
            %op_id
        );
        self.join_trace(&span, tenant_id, op_id).await;
        let bumped = self
            .signer
            .replace(tenant_id, op_id, pb::AttemptKind::FeeBump)
            .instrument(span.clone());
        if let Err(status) = bumped.await {
            let reason = opledger_grpc::status::reason_of(&status).unwrap_or_default();
            tracing::info!(%op_id, reason, "no fee bump");
            return None;
        }
        let latest = match self.store.attempts(tenant_id, op_id).await {
            Ok(mut attempts) => attempts.pop(),
            Err(e) => {
                tracing::warn!(%op_id, error = %e.log_safe(), "cannot read the bump");
                return None;
            }
        };
        let latest = latest?;
        let Some(class) = self.submit(rpc, &latest).await else {
            tracing::info!(%op_id, "fee bump held back by the signed-bytes gate: not submitted yet");
            return None;
        };
        span.in_scope(|| tracing::info!(%op_id, attempt = latest.attempt, class = class.as_str(), "fee bump submitted"));
        Some(class)
    }
}
