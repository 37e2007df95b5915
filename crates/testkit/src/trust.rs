//! Test trust material: deterministic administrator and approver Ed25519 keys per tenant (derived
//! from the tenant id, so a test's signer can pin the administrator key without plumbing), trust
//! statements, and signed approval statements. Test-only: the seeds are public.

use opledger_domain::approval::{
    ApprovalStatement, CreditStatement, Decision, KeyId, KeyKind, RegisteredKey, SigningKey,
    TrustParts, TrustStatement,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_domain::risk::RiskFlags;
use opledger_store::Store;
use sha2::{Digest, Sha256};

/// Approver keys registered by [`publish_default`] (indexes 0 to this minus one).
pub const DEFAULT_APPROVERS: u8 = 4;
/// Operator keys (kind OPERATOR: they sign credit statements) registered by [`publish_default`].
pub const DEFAULT_OPERATORS: u8 = 2;

fn derived(label: &str, tenant: TenantId, index: u8) -> SigningKey {
    let seed: [u8; 32] =
        Sha256::digest(format!("opledger test {label} key {tenant} {index}")).into();
    SigningKey::from_bytes(&seed)
}

/// The tenant's administrator key (signs trust statements; its public half is pinned).
pub fn admin_key(tenant: TenantId) -> SigningKey {
    derived("admin", tenant, 0)
}

/// The administrator public key as the signer's configuration names it (64 hex digits).
pub fn admin_public_hex(tenant: TenantId) -> String {
    hex::encode(admin_key(tenant).verifying_key().as_bytes())
}

/// Approver key number `index` of the tenant.
pub fn approver_key(tenant: TenantId, index: u8) -> SigningKey {
    derived("approver", tenant, index)
}

/// A service (automated approver) key of the tenant.
pub fn service_key(tenant: TenantId, index: u8) -> SigningKey {
    derived("service", tenant, index)
}

/// Operator key number `index` of the tenant (signs credit statements).
pub fn operator_key(tenant: TenantId, index: u8) -> SigningKey {
    derived("operator", tenant, index)
}

/// The signature of `key` over the credit statement of exactly these fields under trust
/// statement `policy_version`.
pub fn signed_credit(
    tenant: TenantId,
    credit_id: &[u8; 32],
    account: &str,
    asset: &str,
    amount: u128,
    key: &SigningKey,
    policy_version: u64,
) -> anyhow::Result<Vec<u8>> {
    let statement = CreditStatement {
        tenant_id: tenant,
        credit_id: *credit_id,
        account: opledger_domain::payload::AccountName::parse(account)?,
        asset: opledger_domain::payload::AssetCode::parse(asset)?,
        amount: opledger_domain::amount::Amount::new(amount),
        operator_key_id: key_id(key),
        policy_version,
    };
    let signature = statement
        .sign(key)
        .map_err(|e| anyhow::anyhow!("credit statement: {e}"))?;
    Ok(signature.to_bytes().to_vec())
}

/// The key id of a signing key.
pub fn key_id(key: &SigningKey) -> KeyId {
    KeyId::of(&key.verifying_key())
}

/// Trust parts registering approver keys `0..DEFAULT_APPROVERS`, operator keys
/// `0..DEFAULT_OPERATORS` and no rules (one approver, one operator).
pub fn default_parts(tenant: TenantId) -> TrustParts {
    TrustParts {
        keys: (0..DEFAULT_APPROVERS)
            .map(|i| RegisteredKey::new(approver_key(tenant, i).verifying_key(), KeyKind::Approver))
            .chain((0..DEFAULT_OPERATORS).map(|i| {
                RegisteredKey::new(operator_key(tenant, i).verifying_key(), KeyKind::Operator)
            }))
            .collect(),
        ..TrustParts::default()
    }
}

/// Canonical bytes and the administrator's signature of a trust statement.
pub fn signed_trust(
    tenant: TenantId,
    version: u64,
    parts: TrustParts,
) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let statement = TrustStatement::new(tenant, version, parts)
        .map_err(|e| anyhow::anyhow!("trust statement: {e}"))?;
    let signature = statement.sign(&admin_key(tenant)).to_bytes().to_vec();
    Ok((statement.canonical_bytes(), signature))
}

/// Publishes version `version` of the tenant's trust statement, signed by its administrator key.
pub async fn publish(
    store: &Store,
    tenant: TenantId,
    version: u64,
    parts: TrustParts,
) -> anyhow::Result<()> {
    let (statement, signature) = signed_trust(tenant, version, parts)?;
    store
        .publish_trust_statement(tenant, &statement, &signature)
        .await
        .map_err(|e| anyhow::anyhow!("publish trust statement: {}", e.log_safe()))?;
    Ok(())
}

/// Publishes version 1 with [`default_parts`].
pub async fn publish_default(store: &Store, tenant: TenantId) -> anyhow::Result<()> {
    publish(store, tenant, 1, default_parts(tenant)).await
}

/// A signed decision acknowledging no risk flag: canonical statement bytes and the signature of
/// `key`.
pub fn signed_decision(
    tenant: TenantId,
    op: OperationId,
    payload_hash: PayloadHash,
    decision: Decision,
    key: &SigningKey,
    policy_version: u64,
) -> (Vec<u8>, Vec<u8>) {
    signed_acknowledging(
        tenant,
        op,
        payload_hash,
        decision,
        key,
        policy_version,
        RiskFlags::EMPTY,
    )
}

/// [`signed_decision`] whose statement acknowledges `acknowledged` (field 7).
pub fn signed_acknowledging(
    tenant: TenantId,
    op: OperationId,
    payload_hash: PayloadHash,
    decision: Decision,
    key: &SigningKey,
    policy_version: u64,
    acknowledged: RiskFlags,
) -> (Vec<u8>, Vec<u8>) {
    let statement = ApprovalStatement {
        tenant_id: tenant,
        operation_id: op,
        payload_hash,
        decision,
        approver_key_id: key_id(key),
        policy_version,
        acknowledged,
    };
    let signature = statement
        .sign(key)
        .map(|s| s.to_bytes().to_vec())
        // The statement names the signing key and a version >= 1, so signing cannot fail; an
        // empty signature would be refused by every verifier.
        .unwrap_or_default();
    (statement.canonical_bytes(), signature)
}

/// [`signed_acknowledging`] from the wire forms of a withdrawal's id and payload hash.
pub fn signed_decision_for(
    tenant: TenantId,
    withdrawal_id: &str,
    payload_hash_hex: &str,
    decision: Decision,
    key: &SigningKey,
    policy_version: u64,
    acknowledged: RiskFlags,
) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let op: OperationId = withdrawal_id
        .parse()
        .map_err(|_| anyhow::anyhow!("withdrawal id"))?;
    let hash =
        PayloadHash::from_hex(payload_hash_hex).map_err(|_| anyhow::anyhow!("payload hash"))?;
    Ok(signed_acknowledging(
        tenant,
        op,
        hash,
        decision,
        key,
        policy_version,
        acknowledged,
    ))
}
