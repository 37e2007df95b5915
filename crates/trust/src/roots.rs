//! [`TrustRoots`]: per tenant, the administrator keys pinned in the verifier's own configuration
//! and the newest trust statement it has accepted, and the verification of a withdrawal's
//! evidence against them.

use crate::checks::{check_decisions, check_screenings};
use crate::evidence::Evidence;
use crate::unverified::Unverified;
use opledger_config::TrustRootConfig;
use opledger_domain::approval::{
    Signature, TrustStatement, VerifyingKey, signature, verifying_key,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_store::trust::StoredTrust;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One tenant's pinned administrator keys and the lowest statement version it accepts.
#[derive(Debug)]
struct Root {
    keys: Vec<VerifyingKey>,
    min_version: u64,
}

/// A trust statement this verifier verified, and the digest of the bytes and signature it came
/// from.
#[derive(Debug)]
struct Accepted {
    digest: [u8; 32],
    statement: Arc<TrustStatement>,
}

/// Pinned keys and accepted statements. Cheap to clone (clones share the accepted statements).
#[derive(Clone)]
pub struct TrustRoots {
    roots: Arc<HashMap<TenantId, Root>>,
    accepted: Arc<Mutex<HashMap<TenantId, Accepted>>>,
}

impl std::fmt::Debug for TrustRoots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustRoots")
            .field("tenants", &self.roots.len())
            .finish_non_exhaustive()
    }
}

/// What the verifier decided about a withdrawal's approvals: they verify.
#[derive(Debug)]
pub struct Approval {
    /// A trust statement version newer than the one recorded as accepted
    /// ([`Evidence::trust_seen`]): the caller records it, so that an older one is refused from
    /// then on, across restarts.
    pub newly_accepted: Option<u64>,
}

impl TrustRoots {
    /// The roots of a validated configuration section (entries that do not parse are left out:
    /// [`crate::check_trust_roots`] refuses them when the configuration is validated).
    pub fn new(configured: &[TrustRootConfig]) -> TrustRoots {
        let roots = configured
            .iter()
            .filter_map(|r| {
                let tenant: TenantId = r.tenant_id.parse().ok()?;
                let keys = r
                    .admin_public_keys
                    .iter()
                    .filter_map(|k| verifying_key(&hex::decode(k).ok()?).ok())
                    .collect();
                Some((
                    tenant,
                    Root {
                        keys,
                        min_version: r.min_version,
                    },
                ))
            })
            .collect();
        TrustRoots {
            roots: Arc::new(roots),
            accepted: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Verifies the trust statement and every stored decision of `evidence` (whose payload hash
    /// the caller already recomputed and compared: [`Evidence::payload_hash_approved`]) and
    /// evaluates the tenant's policy and the signed screening results.
    pub fn verify(
        &self,
        tenant: TenantId,
        op: OperationId,
        evidence: &Evidence<'_>,
    ) -> Result<Approval, Unverified> {
        let root = self.roots.get(&tenant).ok_or(Unverified::NoTrustRoot)?;
        let stored = evidence.trust.ok_or(Unverified::NoTrustStatement)?;
        let trust = self.trust_statement(tenant, root, stored, evidence.trust_seen)?;
        check_decisions(&trust, tenant, op, evidence)?;
        check_screenings(&trust, op, evidence)?;
        Ok(Approval {
            newly_accepted: (evidence.trust_seen < Some(trust.version()))
                .then_some(trust.version()),
        })
    }

    /// The tenant's trust statement `stored`, verified against the pinned keys of `root` (or the
    /// one already accepted from the very same bytes and signature), no older than the root's
    /// minimum, the version recorded as seen (`trust_seen`) or one already accepted.
    fn trust_statement(
        &self,
        tenant: TenantId,
        root: &Root,
        stored: &StoredTrust,
        trust_seen: Option<u64>,
    ) -> Result<Arc<TrustStatement>, Unverified> {
        let mut floor = root.min_version.max(trust_seen.unwrap_or(0));
        let digest: [u8; 32] = {
            let mut d = Sha256::new();
            d.update(&stored.statement);
            d.update(&stored.signature);
            d.finalize().into()
        };
        let cached = {
            let accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
            accepted
                .get(&tenant)
                .map(|a| (a.digest, a.statement.clone()))
        };
        if let Some((_, statement)) = &cached {
            floor = floor.max(statement.version());
        }
        let trust = match cached {
            Some((d, statement)) if d == digest => statement,
            _ => self.accept(tenant, root, stored, digest, floor)?,
        };
        if trust.version() < floor {
            return Err(Unverified::TrustRolledBack);
        }
        Ok(trust)
    }

    /// Verifies `stored` (whose bytes and signature hash to `digest`) against the pinned keys of
    /// `root`, refuses it below `floor`, and keeps it as the tenant's accepted statement unless a
    /// newer one was accepted meanwhile.
    fn accept(
        &self,
        tenant: TenantId,
        root: &Root,
        stored: &StoredTrust,
        digest: [u8; 32],
        floor: u64,
    ) -> Result<Arc<TrustStatement>, Unverified> {
        let sig: Signature =
            signature(&stored.signature).map_err(|_| Unverified::TrustNotSigned)?;
        let statement = TrustStatement::verify_signed(&stored.statement, &sig, tenant, &root.keys)
            .map_err(|_| Unverified::TrustNotSigned)?;
        if statement.version() != stored.version {
            return Err(Unverified::TrustNotSigned);
        }
        if statement.version() < floor {
            return Err(Unverified::TrustRolledBack);
        }
        let statement = Arc::new(statement);
        let mut accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
        // Another call may have accepted a newer one meanwhile: keep the newest.
        let newer_held = accepted
            .get(&tenant)
            .is_some_and(|a| a.statement.version() > statement.version());
        if newer_held {
            return Err(Unverified::TrustRolledBack);
        }
        accepted.insert(
            tenant,
            Accepted {
                digest,
                statement: statement.clone(),
            },
        );
        Ok(statement)
    }
}
