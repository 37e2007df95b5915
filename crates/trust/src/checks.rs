//! The checks under a verified trust statement: the tenant's policy over the stored decisions,
//! and the signed screening results.

use crate::evidence::Evidence;
use crate::unverified::Unverified;
use opledger_domain::approval::{ApprovalFacts, OperationFacts, TrustStatement, Verdict, evaluate};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_webhook::screening::{self, Screening, StoredScreening};

/// Evaluates the tenant's policy over every stored decision of `evidence`, each verified against
/// `trust`, with the withdrawal's risk flags.
pub(crate) fn check_decisions(
    trust: &TrustStatement,
    tenant: TenantId,
    op: OperationId,
    evidence: &Evidence<'_>,
) -> Result<(), Unverified> {
    let payload = evidence.payload;
    let facts = OperationFacts {
        tenant_id: tenant,
        operation_id: op,
        payload_hash: payload.hash(),
        asset: &payload.asset,
        amount: payload.amount,
        risk_flags: evidence.risk_flags.iter().copied().collect(),
    };
    let decisions = evidence
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
pub(crate) fn check_screenings(
    trust: &TrustStatement,
    op: OperationId,
    evidence: &Evidence<'_>,
) -> Result<(), Unverified> {
    let screenings: Vec<StoredScreening<'_>> =
        evidence.screenings.iter().map(|s| s.as_stored()).collect();
    match screening::judge(trust, op, &screenings).map_err(Unverified::KytMisplaced)? {
        Screening::Failed => Err(Unverified::KytFailed),
        Screening::Missing if trust.kyt_required(&evidence.payload.asset) => {
            Err(Unverified::KytMissing)
        }
        Screening::Passed | Screening::Missing => Ok(()),
    }
}
