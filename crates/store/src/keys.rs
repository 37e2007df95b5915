//! Tenants and API keys.
//!
//! A key is `olk_<key id>_<secret>`: 16 hex digits naming the key, then 64 hex digits of secret.
//! Only the SHA-256 of the secret is stored; the whole key is shown once, at creation.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::TenantId;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// What an API key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Creates and reads its tenant's withdrawals.
    Client,
    /// Approves or rejects withdrawals.
    Approver,
    /// Operates the system: credits, resolutions.
    Operator,
    /// Another opledger service or a trusted internal system.
    Service,
}

impl Role {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Approver => "approver",
            Role::Operator => "operator",
            Role::Service => "service",
        }
    }

    /// Parses a stored or typed name.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "client" => Some(Role::Client),
            "approver" => Some(Role::Approver),
            "operator" => Some(Role::Operator),
            "service" => Some(Role::Service),
            _ => None,
        }
    }
}

/// A freshly created key; the only time the secret exists in clear.
#[derive(Debug)]
pub struct IssuedKey {
    /// The public key id.
    pub key_id: String,
    /// The full bearer token, zeroized on drop.
    pub token: Zeroizing<String>,
}

/// A presented bearer token split into its parts. The secret is zeroized on drop.
#[derive(Debug)]
pub struct PresentedKey {
    key_id: String,
    secret: Zeroizing<String>,
}

impl PresentedKey {
    /// Splits `olk_<16 hex>_<64 hex>`; `None` for anything else.
    pub fn parse(token: &str) -> Option<PresentedKey> {
        let rest = token.strip_prefix("olk_")?;
        let (key_id, secret) = rest.split_once('_')?;
        let hex16 = key_id.len() == 16 && key_id.bytes().all(|b| b.is_ascii_hexdigit());
        let hex64 = secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit());
        (hex16 && hex64).then(|| PresentedKey {
            key_id: key_id.to_ascii_lowercase(),
            secret: Zeroizing::new(secret.to_ascii_lowercase()),
        })
    }

    /// The public key id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// SHA-256 of the secret, as stored.
    pub fn secret_hash(&self) -> [u8; 32] {
        Sha256::digest(self.secret.as_bytes()).into()
    }
}

/// A stored key, as needed to authenticate a caller.
#[derive(Debug, Clone)]
pub struct KeyRecord {
    /// The public key id.
    pub key_id: String,
    /// The key's tenant.
    pub tenant_id: TenantId,
    /// The key's role.
    pub role: Role,
    secret_hash: [u8; 32],
}

impl KeyRecord {
    /// Constant-time check of a presented secret against the stored hash.
    pub fn matches(&self, presented: &PresentedKey) -> bool {
        presented.key_id == self.key_id
            && bool::from(self.secret_hash.ct_eq(&presented.secret_hash()))
    }
}

impl Store {
    /// Creates a tenant named `name` (lowercase letters, digits, `-`, `_`).
    pub async fn create_tenant(&self, name: &str) -> Result<TenantId> {
        let tenant_id = TenantId::new();
        sqlx::query("INSERT INTO tenants (tenant_id, name) VALUES ($1, $2)")
            .bind(tenant_id.as_uuid())
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(tenant_id)
    }

    /// The tenant with this name.
    pub async fn tenant_by_name(&self, name: &str) -> Result<Option<TenantId>> {
        let row: Option<(uuid::Uuid,)> =
            sqlx::query_as("SELECT tenant_id FROM tenants WHERE name = $1")
                .bind(name)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|(id,)| TenantId::from_uuid(id)))
    }

    /// Issues a new API key for a tenant and role; the token is returned once and never stored.
    pub async fn create_api_key(
        &self,
        tenant_id: TenantId,
        role: Role,
        label: &str,
    ) -> Result<IssuedKey> {
        let mut id_bytes = [0_u8; 8];
        let mut secret_bytes = Zeroizing::new([0_u8; 32]);
        rand::rng().fill_bytes(&mut id_bytes);
        rand::rng().fill_bytes(secret_bytes.as_mut());
        let key_id = hex::encode(id_bytes);
        let secret = Zeroizing::new(hex::encode(secret_bytes.as_ref()));
        let hash: [u8; 32] = Sha256::digest(secret.as_bytes()).into();
        sqlx::query(
            "INSERT INTO api_keys (key_id, tenant_id, role, secret_hash, label) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&key_id)
        .bind(tenant_id.as_uuid())
        .bind(role.as_str())
        .bind(hash.as_slice())
        .bind(label)
        .execute(&self.pool)
        .await?;
        let token = Zeroizing::new(format!("olk_{key_id}_{}", secret.as_str()));
        Ok(IssuedKey { key_id, token })
    }

    /// Revokes a key; later calls with it are refused once caches expire.
    pub async fn revoke_api_key(&self, key_id: &str) -> Result<()> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL",
        )
        .bind(key_id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound { what: "api key" })
        }
    }

    /// The active (not revoked) key with this id.
    pub async fn active_key(&self, key_id: &str) -> Result<Option<KeyRecord>> {
        let row: Option<(String, uuid::Uuid, String, Vec<u8>)> = sqlx::query_as(
            "SELECT key_id, tenant_id, role, secret_hash FROM api_keys \
             WHERE key_id = $1 AND revoked_at IS NULL",
        )
        .bind(key_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(key_id, tenant, role, hash)| {
            Ok(KeyRecord {
                key_id,
                tenant_id: TenantId::from_uuid(tenant),
                role: Role::parse(&role).ok_or(StoreError::Corrupt {
                    what: "api key role",
                })?,
                secret_hash: hash
                    .as_slice()
                    .try_into()
                    .map_err(|_| StoreError::Corrupt {
                        what: "api key hash",
                    })?,
            })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presented_keys_parse_strictly() {
        let good = format!("olk_{}_{}", "a".repeat(16), "b".repeat(64));
        assert!(PresentedKey::parse(&good).is_some());
        assert!(PresentedKey::parse(&good[1..]).is_none());
        assert!(PresentedKey::parse(&format!("{good}0")).is_none());
        assert!(PresentedKey::parse("olk__").is_none());
        assert!(
            PresentedKey::parse(&format!("olk_{}_{}", "g".repeat(16), "b".repeat(64))).is_none()
        );
    }
}
