//! Bench trust material: a fresh administrator key and one approver key per tenant, the
//! tenant's trust statement (version 1, that approver, one approval for every amount) and signed
//! approval statements. The keys live only in this process; nothing is written to disk.

use opledger_domain::approval::{
    ApprovalStatement, Decision, KeyId, KeyKind, RegisteredKey, SigningKey, TrustParts,
    TrustStatement,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_domain::risk::RiskFlags;
use opledger_signer::config::TrustRootConfig;
use opledger_store::Store;
use std::sync::Arc;

/// The trust statement version the bench publishes (and approvals name).
const VERSION: u64 = 1;

/// A tenant's bench keys.
#[derive(Clone)]
pub struct TenantTrust {
    tenant: TenantId,
    admin_public_hex: String,
    approver: Arc<SigningKey>,
}

impl std::fmt::Debug for TenantTrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantTrust")
            .field("tenant", &self.tenant)
            .field("admin_public_hex", &self.admin_public_hex)
            .finish_non_exhaustive()
    }
}

fn fresh_key() -> SigningKey {
    SigningKey::from_bytes(&rand::random::<[u8; 32]>())
}

/// Publishes version 1 of `tenant`'s trust statement, registering a fresh approver key and
/// signed by a fresh administrator key.
pub async fn publish(store: &Store, tenant: TenantId) -> anyhow::Result<TenantTrust> {
    let admin = fresh_key();
    let approver = fresh_key();
    let parts = TrustParts {
        keys: vec![RegisteredKey::new(
            approver.verifying_key(),
            KeyKind::Approver,
        )],
        ..TrustParts::default()
    };
    let statement = TrustStatement::new(tenant, VERSION, parts)
        .map_err(|e| anyhow::anyhow!("trust statement: {e}"))?;
    let signature = statement.sign(&admin).to_bytes();
    store
        .publish_trust_statement(tenant, &statement.canonical_bytes(), &signature)
        .await
        .map_err(|e| anyhow::anyhow!("publish trust statement: {}", e.log_safe()))?;
    Ok(TenantTrust {
        tenant,
        admin_public_hex: hex::encode(admin.verifying_key().as_bytes()),
        approver: Arc::new(approver),
    })
}

impl TenantTrust {
    /// The signer's trust root for this tenant (its administrator key pinned).
    pub fn root(&self) -> TrustRootConfig {
        TrustRootConfig {
            tenant_id: self.tenant.to_string(),
            admin_public_keys: vec![self.admin_public_hex.clone()],
            min_version: VERSION,
        }
    }

    /// The approver's signed approval of `op` at `payload_hash`, acknowledging `acknowledged`.
    pub fn approval(
        &self,
        op: OperationId,
        payload_hash: PayloadHash,
        acknowledged: RiskFlags,
    ) -> anyhow::Result<(ApprovalStatement, Vec<u8>)> {
        let statement = ApprovalStatement {
            tenant_id: self.tenant,
            operation_id: op,
            payload_hash,
            decision: Decision::Approve,
            approver_key_id: KeyId::of(&self.approver.verifying_key()),
            policy_version: VERSION,
            acknowledged,
        };
        let signature = statement
            .sign(&self.approver)
            .map_err(|e| anyhow::anyhow!("sign approval: {e}"))?
            .to_bytes()
            .to_vec();
        Ok((statement, signature))
    }
}
