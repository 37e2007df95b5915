//! What the signer verifies before it signs: the operation with its stored decisions, signed
//! screening results and the tenant's trust statement (one round trip), the trust versions it
//! accepted, and the security events it records when it refuses.

use crate::operations::{Operation, OperationRow, operation_columns};
use crate::shared::record_security_event;
use crate::trust::{SignedScreening, StoredDecision, StoredTrust, trust_from_row};
use crate::{Result, Store, StoreError};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::Actor;

/// The operation as the signer must verify it.
#[derive(Debug, Clone)]
pub struct SigningInput {
    /// The stored operation, payload fields included.
    pub operation: Operation,
    /// Every stored decision (approval or rejection) of this operation, as stored: claims whose
    /// signatures the signer verifies.
    pub decisions: Vec<StoredDecision>,
    /// The operation's screening results recorded with a provider's signature, as stored: claims
    /// the signer verifies against the trust statement's KYT keys.
    pub screenings: Vec<SignedScreening>,
    /// The tenant's newest trust statement, as stored.
    pub trust: Option<StoredTrust>,
    /// The newest trust statement version the signer accepted for the tenant before.
    pub trust_seen: Option<u64>,
    /// The current lease owner, if any.
    pub lease_owner: Option<String>,
    /// True when there is no lease or it has expired.
    pub lease_expired: bool,
}

#[derive(sqlx::FromRow)]
struct SigningInputRow {
    #[sqlx(flatten)]
    operation: OperationRow,
    lease_owner: Option<String>,
    lease_expired: bool,
    a_key_ids: Vec<Option<String>>,
    a_decisions: Vec<String>,
    a_versions: Vec<Option<i64>>,
    a_hashes: Vec<Vec<u8>>,
    a_signatures: Vec<Option<Vec<u8>>>,
    a_acks: Vec<String>,
    k_event_ids: Vec<String>,
    k_signed_ats: Vec<i64>,
    k_bodies: Vec<Vec<u8>>,
    k_signatures: Vec<Vec<u8>>,
    trust_version: Option<i64>,
    trust_statement: Option<Vec<u8>>,
    trust_signature: Option<Vec<u8>>,
    trust_seen: Option<i64>,
}

impl SigningInputRow {
    /// The signing input of `tenant_id` this row holds; its arrays must line up (one element
    /// of each `a_` array per decision, of each `k_` array per signed screening).
    fn into_input(self, tenant_id: TenantId) -> Result<SigningInput> {
        self.check_aligned()?;
        let decisions = decisions_of(
            self.a_key_ids,
            self.a_decisions,
            self.a_versions,
            self.a_hashes,
            self.a_signatures,
            self.a_acks,
        );
        let screenings = screenings_of(
            self.k_event_ids,
            self.k_signed_ats,
            self.k_bodies,
            self.k_signatures,
        );
        let trust = match (
            self.trust_version,
            self.trust_statement,
            self.trust_signature,
        ) {
            (Some(version), Some(statement), Some(signature)) => {
                Some(trust_from_row((version, statement, signature))?)
            }
            _ => None,
        };
        let trust_seen = self
            .trust_seen
            .map(u64::try_from)
            .transpose()
            .map_err(|_| StoreError::Corrupt {
                what: "accepted trust version",
            })?;
        Ok(SigningInput {
            operation: self.operation.into_operation(tenant_id)?,
            decisions,
            screenings,
            trust,
            trust_seen,
            lease_owner: self.lease_owner,
            lease_expired: self.lease_expired,
        })
    }

    /// [`StoreError::Corrupt`] unless the decisions' arrays and the screenings' arrays each have
    /// one length.
    fn check_aligned(&self) -> Result<()> {
        let corrupt = StoreError::Corrupt {
            what: "approvals of the operation",
        };
        let n = self.a_decisions.len();
        let k = self.k_event_ids.len();
        if [
            self.a_key_ids.len(),
            self.a_versions.len(),
            self.a_hashes.len(),
            self.a_signatures.len(),
            self.a_acks.len(),
        ]
        .iter()
        .any(|&len| len != n)
            || [
                self.k_signed_ats.len(),
                self.k_bodies.len(),
                self.k_signatures.len(),
            ]
            .iter()
            .any(|&len| len != k)
        {
            return Err(corrupt);
        }
        Ok(())
    }
}

/// The stored decisions of a [`SigningInputRow`], from its aligned `a_` arrays, in their order.
fn decisions_of(
    key_ids: Vec<Option<String>>,
    decisions: Vec<String>,
    versions: Vec<Option<i64>>,
    hashes: Vec<Vec<u8>>,
    signatures: Vec<Option<Vec<u8>>>,
    acks: Vec<String>,
) -> Vec<StoredDecision> {
    key_ids
        .into_iter()
        .zip(decisions)
        .zip(versions)
        .zip(hashes)
        .zip(signatures)
        .zip(acks)
        .map(
            |(((((approver_key_id, decision), policy_version), payload_hash), signature), acks)| {
                StoredDecision {
                    approver_key_id,
                    decision,
                    policy_version,
                    payload_hash,
                    signature,
                    acknowledged_flags: acks
                        .split(',')
                        .filter(|f| !f.is_empty())
                        .map(str::to_owned)
                        .collect(),
                }
            },
        )
        .collect()
}

/// The signed screening results of a [`SigningInputRow`], from its aligned `k_` arrays, in their
/// order.
fn screenings_of(
    event_ids: Vec<String>,
    signed_ats: Vec<i64>,
    bodies: Vec<Vec<u8>>,
    signatures: Vec<Vec<u8>>,
) -> Vec<SignedScreening> {
    event_ids
        .into_iter()
        .zip(signed_ats)
        .zip(bodies)
        .zip(signatures)
        .map(
            |(((event_id, signed_at), body), signature)| SignedScreening {
                event_id,
                signed_at,
                body,
                signature,
            },
        )
        .collect()
}

impl Store {
    /// The operation, its approvals' hashes and its lease, or `None` for another tenant's or a
    /// missing operation.
    pub async fn signing_input(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<SigningInput>> {
        // One round trip: the operation, its lease, every stored decision, its signed screening
        // results, the tenant's newest trust statement and the newest version this signer
        // accepted before.
        let row: Option<SigningInputRow> = sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            ", o.lease_owner, coalesce(o.lease_expires_at <= now(), true) AS lease_expired, \
             d.a_key_ids, d.a_decisions, d.a_versions, d.a_hashes, d.a_signatures, d.a_acks, \
             ks.k_event_ids, ks.k_signed_ats, ks.k_bodies, ks.k_signatures, \
             t.version AS trust_version, t.statement AS trust_statement, \
             t.signature AS trust_signature, sv.version AS trust_seen \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             CROSS JOIN LATERAL (SELECT \
                 coalesce(array_agg(a.approver_key_id ORDER BY a.created_at), '{}') AS a_key_ids, \
                 coalesce(array_agg(a.decision ORDER BY a.created_at), '{}') AS a_decisions, \
                 coalesce(array_agg(a.policy_version ORDER BY a.created_at), '{}') AS a_versions, \
                 coalesce(array_agg(a.payload_hash ORDER BY a.created_at), '{}') AS a_hashes, \
                 coalesce(array_agg(a.signature ORDER BY a.created_at), '{}') AS a_signatures, \
                 coalesce(array_agg(array_to_string(a.acknowledged_flags, ',') \
                   ORDER BY a.created_at), '{}') AS a_acks \
               FROM approvals a WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id) d \
             CROSS JOIN LATERAL (SELECT \
                 /* ordered by every column, so that the four arrays line up */ \
                 coalesce(array_agg(k.event_id ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_event_ids, \
                 coalesce(array_agg(k.signed_at ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_signed_ats, \
                 coalesce(array_agg(k.body ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_bodies, \
                 coalesce(array_agg(k.signature ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_signatures \
               FROM kyt_screenings k WHERE k.tenant_id = o.tenant_id AND k.op_id = o.op_id \
                 AND k.signature IS NOT NULL) ks \
             LEFT JOIN LATERAL (SELECT version, statement, signature FROM trust_statements ts \
               WHERE ts.tenant_id = o.tenant_id ORDER BY version DESC LIMIT 1) t ON true \
             LEFT JOIN signer_trust_versions sv ON sv.tenant_id = o.tenant_id \
             WHERE o.tenant_id = $1 AND o.op_id = $2"
        ))
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        row.into_input(tenant_id).map(Some)
    }

    /// Records that the signer accepted `version` of the tenant's trust statement, so that an
    /// older one is refused from now on, across restarts. Never lowers the recorded version.
    pub async fn record_trust_seen(&self, tenant_id: TenantId, version: u64) -> Result<()> {
        let version = i64::try_from(version).map_err(|_| StoreError::Corrupt {
            what: "trust version",
        })?;
        sqlx::query(
            "INSERT INTO signer_trust_versions (tenant_id, version) VALUES ($1, $2) \
             ON CONFLICT (tenant_id) DO UPDATE SET version = excluded.version \
             WHERE signer_trust_versions.version < excluded.version",
        )
        .bind(tenant_id.as_uuid())
        .bind(version)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a security-relevant refusal (a fixed description, never a payload value).
    pub async fn record_security_event(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        kind: &str,
        actor: Actor,
        actor_id: &str,
        detail: &str,
    ) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        record_security_event(
            &mut conn,
            tenant_id,
            Some(op_id),
            kind,
            actor,
            actor_id,
            detail,
        )
        .await
    }
}
