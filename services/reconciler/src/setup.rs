//! The reconciler built from its configuration: its networks' clients and its signer client.

use crate::config::Config;
use crate::reconcile;
use crate::reconcile::Reconciler;
use opledger_server::StartError;
use opledger_store::roles::ReconcilerStore;
use std::collections::HashMap;
use std::time::Duration;

/// A reconciler for `config` over `store`.
pub fn reconciler(config: &Config, store: ReconcilerStore) -> Result<Reconciler, StartError> {
    let timeout = Duration::from_millis(config.rpc_timeout_ms);
    let networks: HashMap<_, _> = config
        .chain
        .networks(timeout)
        .map_err(StartError::setup("chain clients"))?
        .into_iter()
        .map(|n| {
            let network = reconcile::Network {
                rpc: n.rpc,
                evidence: n.evidence,
            };
            (n.network, network)
        })
        .collect();
    // Examinations are one at a time: one lock connection, and one spare.
    let locks = store.pass_locks(2);
    Ok(Reconciler::new(
        store,
        networks,
        config
            .signer
            .client()
            .map_err(StartError::setup("signer connection"))?,
        reconcile::Policy {
            cancel_after: Duration::from_secs(config.cancel_after_secs),
            escalation: reconcile::EscalationPolicy {
                owner: config.owner.clone(),
                security_owner: config.security_owner.clone(),
                after_secs: config.escalate_after_secs,
            },
        },
        config.worker_id.clone(),
    )
    .with_pass_locks(locks))
}
