//! API-key authentication: `authorization: Bearer olk_<id>_<secret>` metadata to a [`Principal`].
//!
//! Verified keys are cached for a short time so authentication costs no database round trip on
//! the hot path; a revoked key stops working within that time. Failures never echo the token.

use crate::status::{ErrorReason, error_status};
use opledger_domain::ids::TenantId;
use opledger_store::keys::{KeyRecord, PresentedKey, Role};
use opledger_store::roles::KeysStore;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tonic::{Code, Request, Status};

/// Who is calling: the tenant and role of the presented key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The key's tenant: the only tenant this call can see or change.
    pub tenant_id: TenantId,
    /// The key's role.
    pub role: Role,
    /// The public key id, recorded as the actor in transition logs.
    pub key_id: String,
}

/// Resolves bearer tokens to principals.
#[derive(Debug)]
pub struct Authenticator {
    store: KeysStore,
    ttl: Duration,
    cache: Mutex<HashMap<String, (KeyRecord, Instant)>>,
}

impl Authenticator {
    /// An authenticator that caches verified keys for `ttl`, looking them up through `store` (a
    /// service's `keys()`, or a whole `Store`).
    pub fn new(store: impl Into<KeysStore>, ttl: Duration) -> Authenticator {
        Authenticator {
            store: store.into(),
            ttl,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Authenticates the request and checks that its role is one of `allowed`.
    pub async fn authorize<T>(
        &self,
        request: &Request<T>,
        allowed: &[Role],
    ) -> Result<Principal, Status> {
        let header = request.metadata().get("authorization").ok_or_else(|| {
            error_status(
                Code::Unauthenticated,
                ErrorReason::CredentialsMissing,
                "missing authorization metadata: send `authorization: Bearer <api key>`",
                &[],
            )
        })?;
        let invalid = || {
            error_status(
                Code::Unauthenticated,
                ErrorReason::CredentialsInvalid,
                "invalid api key",
                &[],
            )
        };
        let token = header
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(invalid)?;
        let presented = PresentedKey::parse(token.trim()).ok_or_else(invalid)?;
        let record = self.lookup(&presented).await?.ok_or_else(invalid)?;
        if !record.matches(&presented) {
            return Err(invalid());
        }
        if !allowed.contains(&record.role) {
            return Err(error_status(
                Code::PermissionDenied,
                ErrorReason::RoleNotAllowed,
                format!("role {} may not call this method", record.role.as_str()),
                &[("role", record.role.as_str())],
            ));
        }
        Ok(Principal {
            tenant_id: record.tenant_id,
            role: record.role,
            key_id: record.key_id,
        })
    }

    async fn lookup(&self, presented: &PresentedKey) -> Result<Option<KeyRecord>, Status> {
        let now = Instant::now();
        if let Some(record) = self.cached(presented.key_id(), now) {
            return Ok(Some(record));
        }
        let record = self
            .store
            .active_key(presented.key_id())
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "api key lookup failed");
                error_status(
                    Code::Unavailable,
                    ErrorReason::StoreUnavailable,
                    "store unavailable",
                    &[],
                )
            })?;
        // Cache only keys whose secret matched, so a flood of wrong secrets cannot pin entries.
        if let Some(record) = &record
            && record.matches(presented)
            && let Ok(mut cache) = self.cache.lock()
        {
            if cache.len() > 10_000 {
                cache.clear();
            }
            cache.insert(record.key_id.clone(), (record.clone(), now + self.ttl));
        }
        Ok(record)
    }

    fn cached(&self, key_id: &str, now: Instant) -> Option<KeyRecord> {
        let cache = self.cache.lock().ok()?;
        cache
            .get(key_id)
            .filter(|(_, until)| *until > now)
            .map(|(record, _)| record.clone())
    }
}
