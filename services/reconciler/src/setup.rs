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
    let mut readers: HashMap<_, _> = config
        .chain
        .readers(timeout)
        .map_err(StartError::setup("evidence"))?
        .into_iter()
        .collect();
    let mut networks = HashMap::new();
    for (network, rpc) in config
        .chain
        .rpcs(timeout)
        .map_err(StartError::setup("rpc client"))?
    {
        if let Some(evidence) = readers.remove(&network) {
            networks.insert(network, reconcile::Network { rpc, evidence });
        }
    }
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
