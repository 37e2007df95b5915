//! Who can execute a withdrawal: the hot wallets the signers registered (`signer_wallets`), read
//! by the operations service to refuse, at create, a withdrawal no signer could sign; and what a
//! create with a key already did, so that such a refusal never hides an earlier create.

use crate::operations::{Created, LOOKUP_BY_KEY_SQL, OperationRow};
use crate::{Result, Store, StoreError};
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::{NetworkId, WithdrawalPayload};

impl Store {
    /// True when a signer registered an ACTIVE hot wallet of `tenant_id` on `network` (a
    /// RETIRING one only finishes its own nonces and signs nothing new).
    pub async fn has_executor(&self, tenant_id: TenantId, network: &NetworkId) -> Result<bool> {
        let (found,): (bool,) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM signer_wallets \
             WHERE tenant_id = $1 AND network = $2 AND status = 'ACTIVE')",
        )
        .bind(tenant_id.as_uuid())
        .bind(network.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(found)
    }

    /// What a create of `payload` with `key` already did, without writing anything: the stored
    /// operation (`replayed = true`) when the key created this very payload,
    /// [`StoreError::KeyReused`] when it created another one, `None` when the key is free. The
    /// operations service asks before answering a create it refuses, so that a retry of a create
    /// accepted earlier (before a configuration change) is still answered as its replay.
    pub async fn created_with_key(
        &self,
        key: &IdempotencyKey,
        payload: &WithdrawalPayload,
    ) -> Result<Option<Created>> {
        let tenant_id = payload.tenant_id;
        let digest = key.digest();
        let row: Option<OperationRow> = sqlx::query_as(LOOKUP_BY_KEY_SQL)
            .bind(tenant_id.as_uuid())
            .bind(digest.as_slice())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let stored = row.into_operation(tenant_id)?;
        if stored.payload_hash == payload.hash() {
            Ok(Some(Created {
                operation: stored,
                replayed: true,
            }))
        } else {
            Err(StoreError::KeyReused {
                fields: stored.payload.differing_fields(payload),
            })
        }
    }
}
