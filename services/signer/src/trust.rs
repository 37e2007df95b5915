//! The signer's trust root: per tenant, the administrator keys pinned in its own configuration,
//! and the newest trust statement it has accepted. A withdrawal is signable only when every
//! stored decision verifies against a trust statement signed by a pinned key, no older than one
//! already accepted, and the tenant's policy is met (`opledger_domain::approval::evaluate`) by
//! approvals whose signed statements acknowledge every risk flag of the withdrawal; and, for an
//! asset the statement requires a KYT pass for, when a screening pass signed by a KYT key of the
//! statement is recorded and no signed failure is (`opledger_webhook::screening::judge`). A
//! signed failure refuses any asset.

use crate::config::Config;
use opledger_domain::approval::{
    ApprovalFacts, OperationFacts, Signature, TrustStatement, Verdict, VerifyingKey, evaluate,
    signature, verifying_key,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_store::signing::SigningInput;
use opledger_store::trust::StoredTrust;
use opledger_webhook::screening::{self, Screening, StoredScreening};
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
    /// Fewer distinct verified approvers than the policy requires once approvals whose signed
    /// statements do not acknowledge every risk flag of the withdrawal are left out.
    #[error(
        "verified approvals that acknowledge the withdrawal's risk flags do not meet the policy"
    )]
    RiskNotAcknowledged,
    /// The asset needs a KYT pass and none signed by a KYT key of the trust statement is recorded.
    #[error("no KYT pass signed by a KYT key of the trust statement is recorded")]
    KytMissing,
    /// A KYT failure signed by a KYT key of the trust statement is recorded.
    #[error("a signed KYT screening failed")]
    KytFailed,
    /// A provider-signed delivery recorded on the withdrawal is about something else.
    #[error("{0}")]
    KytMisplaced(screening::ScreeningRefusal),
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
            Unverified::RiskNotAcknowledged => "SIGNER_RISK_NOT_ACKNOWLEDGED",
            Unverified::Rejected => "SIGNER_APPROVAL_REJECTED",
            Unverified::KytMissing => "SIGNER_KYT_MISSING",
            Unverified::KytFailed => "SIGNER_KYT_FAILED",
            Unverified::KytMisplaced(_) => "SIGNER_KYT_INVALID",
        }
    }

    /// The fixed description recorded with the security event.
    pub fn detail(self) -> &'static str {
        match self {
            Unverified::KytMissing | Unverified::KytFailed | Unverified::KytMisplaced(_) => {
                "the withdrawal's screening results do not allow it under the tenant's trust statement"
            }
            _ => "approvals do not verify against the tenant's pinned trust root",
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
        let trust = self.trust_statement(tenant, root, stored, input.trust_seen)?;
        check_decisions(&trust, tenant, op, input)?;
        check_screenings(&trust, op, input)?;
        Ok(Approval {
            newly_accepted: (input.trust_seen < Some(trust.version())).then_some(trust.version()),
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

/// Evaluates the tenant's policy over every stored decision of `input`, each verified against
/// `trust`, with the withdrawal's risk flags.
fn check_decisions(
    trust: &TrustStatement,
    tenant: TenantId,
    op: OperationId,
    input: &SigningInput,
) -> Result<(), Unverified> {
    let payload = &input.operation.payload;
    let facts = OperationFacts {
        tenant_id: tenant,
        operation_id: op,
        payload_hash: payload.hash(),
        asset: &payload.asset,
        amount: payload.amount,
        risk_flags: input.operation.risk_flags.iter().copied().collect(),
    };
    let decisions = input
        .decisions
        .iter()
        .map(|d| d.facts(tenant, op))
        .collect::<Option<Vec<ApprovalFacts<'_>>>>()
        .ok_or(Unverified::UnsignedDecision)?;
    match evaluate(trust, &facts, &decisions).map_err(Unverified::Refused)? {
        Verdict::Met { .. } => Ok(()),
        Verdict::Short { unacknowledged, .. } if unacknowledged > 0 => {
            Err(Unverified::RiskNotAcknowledged)
        }
        Verdict::Short { .. } => Err(Unverified::Insufficient),
        Verdict::Rejected { .. } => Err(Unverified::Rejected),
    }
}

/// Judges the withdrawal's signed screening results under `trust`: a signed failure refuses any
/// asset, a missing pass refuses an asset the statement requires one for.
fn check_screenings(
    trust: &TrustStatement,
    op: OperationId,
    input: &SigningInput,
) -> Result<(), Unverified> {
    let screenings: Vec<StoredScreening<'_>> =
        input.screenings.iter().map(|s| s.as_stored()).collect();
    match screening::judge(trust, op, &screenings).map_err(Unverified::KytMisplaced)? {
        Screening::Failed => Err(Unverified::KytFailed),
        Screening::Missing if trust.kyt_required(&input.operation.payload.asset) => {
            Err(Unverified::KytMissing)
        }
        Screening::Passed | Screening::Missing => Ok(()),
    }
}
