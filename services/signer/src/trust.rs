//! The signer's trust root: per tenant, the administrator keys pinned in its own configuration,
//! and the newest trust statement it has accepted. A withdrawal is signable only when every
//! stored decision verifies against a trust statement signed by a pinned key, no older than one
//! already accepted, and the tenant's policy is met (`opledger_domain::approval::evaluate`).

use crate::config::Config;
use opledger_domain::approval::{
    ApprovalFacts, OperationFacts, Signature, TrustStatement, Verdict, VerifyingKey, evaluate,
    signature, verifying_key,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_store::signing::SigningInput;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Why the approvals of a withdrawal could not be verified. Each is recorded as a security event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// No trust root is pinned for the tenant.
    #[error("no trust root is configured for the tenant")]
    NoTrustRoot,
    /// The tenant has no trust statement in the database.
    #[error("the tenant has no trust statement")]
    NoTrustStatement,
    /// The stored trust statement is not signed by a pinned key (or is malformed).
    #[error("the trust statement is not signed by a pinned administrator key")]
    TrustNotSigned,
    /// The stored trust statement is older than one already accepted (a rollback).
    #[error("the trust statement is older than one already accepted")]
    TrustRolledBack,
    /// A stored decision lacks its signature or a statement field.
    #[error("a stored approval carries no verifiable statement")]
    UnsignedDecision,
    /// A stored decision does not verify (forged, copied, revoked or unknown key, unknown policy
    /// version).
    #[error("a stored approval does not verify: {0}")]
    Refused(opledger_domain::approval::Refusal),
    /// Fewer distinct verified approvers than the policy requires.
    #[error("verified approvals do not meet the tenant's policy")]
    Insufficient,
    /// A verified rejection exists.
    #[error("the withdrawal was rejected by a verified decision")]
    Rejected,
}

impl Unverified {
    /// The security event kind recorded for it.
    pub fn event_kind(self) -> &'static str {
        match self {
            Unverified::NoTrustRoot | Unverified::NoTrustStatement => "SIGNER_TRUST_MISSING",
            Unverified::TrustNotSigned => "SIGNER_TRUST_STATEMENT_INVALID",
            Unverified::TrustRolledBack => "SIGNER_TRUST_STATEMENT_ROLLBACK",
            Unverified::UnsignedDecision | Unverified::Refused(_) => "SIGNER_APPROVAL_INVALID",
            Unverified::Insufficient => "SIGNER_APPROVALS_INSUFFICIENT",
            Unverified::Rejected => "SIGNER_APPROVAL_REJECTED",
        }
    }
}

struct Root {
    keys: Vec<VerifyingKey>,
    min_version: u64,
}

/// A trust statement this signer verified, and the digest of the bytes and signature it came from.
struct Accepted {
    digest: [u8; 32],
    statement: Arc<TrustStatement>,
}

/// Pinned keys and accepted statements. Cheap to clone.
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

/// What the signer decided about a withdrawal's approvals.
#[derive(Debug)]
pub struct Approval {
    /// A trust statement version newer than the one recorded as accepted: record it.
    pub newly_accepted: Option<u64>,
}

impl TrustRoots {
    /// The roots of a validated configuration (entries that do not parse are left out: the
    /// configuration's validation refuses them).
    pub fn from_config(config: &Config) -> TrustRoots {
        let roots = config
            .trust_roots
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

    /// Verifies the trust statement and every stored decision of `input` (whose payload hash the
    /// caller already recomputed and compared) and evaluates the tenant's policy.
    pub fn verify(
        &self,
        tenant: TenantId,
        op: OperationId,
        input: &SigningInput,
    ) -> Result<Approval, Unverified> {
        let root = self.roots.get(&tenant).ok_or(Unverified::NoTrustRoot)?;
        let stored = input.trust.as_ref().ok_or(Unverified::NoTrustStatement)?;
        let mut floor = root.min_version.max(input.trust_seen.unwrap_or(0));
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
            _ => {
                let sig: Signature =
                    signature(&stored.signature).map_err(|_| Unverified::TrustNotSigned)?;
                let statement =
                    TrustStatement::verify_signed(&stored.statement, &sig, tenant, &root.keys)
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
                statement
            }
        };
        if trust.version() < floor {
            return Err(Unverified::TrustRolledBack);
        }
        let payload = &input.operation.payload;
        let facts = OperationFacts {
            tenant_id: tenant,
            operation_id: op,
            payload_hash: payload.hash(),
            asset: &payload.asset,
            amount: payload.amount,
        };
        let decisions = input
            .decisions
            .iter()
            .map(|d| d.facts(tenant, op))
            .collect::<Option<Vec<ApprovalFacts<'_>>>>()
            .ok_or(Unverified::UnsignedDecision)?;
        match evaluate(&trust, &facts, &decisions).map_err(Unverified::Refused)? {
            Verdict::Met { .. } => Ok(Approval {
                newly_accepted: (input.trust_seen < Some(trust.version()))
                    .then_some(trust.version()),
            }),
            Verdict::Short { .. } => Err(Unverified::Insufficient),
            Verdict::Rejected { .. } => Err(Unverified::Rejected),
        }
    }
}
