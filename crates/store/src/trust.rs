//! Trust statements and stored approval decisions, as the approvals service and the signer read
//! them. The store verifies nothing cryptographic about trust statements: the bytes are what an
//! administrator signed, and the signer checks them against its own pinned keys.

use crate::{Result, Store, StoreError};
use opledger_domain::approval::{
    ApprovalFacts, ApprovalStatement, Decision, KeyId, TrustStatement,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_domain::risk::{RiskFlag, RiskFlags};
use sqlx::PgConnection;

/// A trust statement as stored: the signed bytes and the signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTrust {
    /// Its version.
    pub version: u64,
    /// The canonical statement bytes.
    pub statement: Vec<u8>,
    /// The administrator's signature over them.
    pub signature: Vec<u8>,
}

impl StoredTrust {
    /// Decodes the statement without verifying the signature (the approvals service's view; the
    /// signer verifies with its pinned keys instead).
    pub fn decode(&self) -> Result<TrustStatement> {
        let statement =
            TrustStatement::decode(&self.statement).map_err(|_| StoreError::Corrupt {
                what: "trust statement",
            })?;
        if statement.version() != self.version {
            return Err(StoreError::Corrupt {
                what: "trust statement version",
            });
        }
        Ok(statement)
    }
}

/// One stored decision of an operation, with the evidence it carries.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StoredDecision {
    /// The approver key that signed it (none on rows from before signed approvals).
    pub approver_key_id: Option<String>,
    /// APPROVE or REJECT.
    pub decision: String,
    /// The trust statement version it names.
    pub policy_version: Option<i64>,
    /// The payload hash it names.
    pub payload_hash: Vec<u8>,
    /// The Ed25519 signature.
    pub signature: Option<Vec<u8>>,
    /// The risk flags the statement acknowledges (signed as its field 7).
    pub acknowledged_flags: Vec<String>,
}

impl StoredDecision {
    /// The statement these columns describe for `tenant_id`'s `op_id`, or `None` when a column
    /// is missing or malformed (a row that can never count).
    pub fn statement(&self, tenant_id: TenantId, op_id: OperationId) -> Option<ApprovalStatement> {
        Some(ApprovalStatement {
            tenant_id,
            operation_id: op_id,
            payload_hash: PayloadHash::try_from(self.payload_hash.as_slice()).ok()?,
            decision: Decision::parse(&self.decision).ok()?,
            approver_key_id: KeyId::parse(self.approver_key_id.as_deref()?).ok()?,
            policy_version: u64::try_from(self.policy_version?).ok()?,
            acknowledged: self
                .acknowledged_flags
                .iter()
                .map(|f| RiskFlag::parse(f))
                .collect::<Option<RiskFlags>>()?,
        })
    }

    /// The facts the quorum decision reads, or `None` for a row that can never count.
    pub fn facts(&self, tenant_id: TenantId, op_id: OperationId) -> Option<ApprovalFacts<'_>> {
        Some(ApprovalFacts {
            statement: self.statement(tenant_id, op_id)?,
            signature: self.signature.as_deref()?,
        })
    }
}

impl Store {
    /// Publishes a signed trust statement as its own version (refused if that version exists or
    /// the bytes do not decode for `tenant_id`). The signature is not checked here: the signer
    /// checks it against its pinned keys, and `opledger-admin` signs before it publishes.
    pub async fn publish_trust_statement(
        &self,
        tenant_id: TenantId,
        statement: &[u8],
        signature: &[u8],
    ) -> Result<u64> {
        let decoded = TrustStatement::decode(statement).map_err(|_| StoreError::Corrupt {
            what: "trust statement",
        })?;
        if decoded.tenant_id() != tenant_id {
            return Err(StoreError::Corrupt {
                what: "trust statement tenant",
            });
        }
        let version = i64::try_from(decoded.version()).map_err(|_| StoreError::Corrupt {
            what: "trust statement version",
        })?;
        sqlx::query(
            "INSERT INTO trust_statements (tenant_id, version, statement, signature) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(tenant_id.as_uuid())
        .bind(version)
        .bind(statement)
        .bind(signature)
        .execute(&self.pool)
        .await?;
        Ok(decoded.version())
    }

    /// The tenant's newest trust statement, if any was published.
    pub async fn trust_statement(&self, tenant_id: TenantId) -> Result<Option<StoredTrust>> {
        let mut conn = self.pool.acquire().await?;
        newest_trust(&mut conn, tenant_id).await
    }
}

type TrustRow = (i64, Vec<u8>, Vec<u8>);

pub(crate) fn trust_from_row(row: TrustRow) -> Result<StoredTrust> {
    let (version, statement, signature) = row;
    Ok(StoredTrust {
        version: u64::try_from(version).map_err(|_| StoreError::Corrupt {
            what: "trust statement version",
        })?,
        statement,
        signature,
    })
}

pub(crate) async fn newest_trust(
    conn: &mut PgConnection,
    tenant_id: TenantId,
) -> Result<Option<StoredTrust>> {
    let row: Option<TrustRow> = sqlx::query_as(
        "SELECT version, statement, signature FROM trust_statements \
         WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1",
    )
    .bind(tenant_id.as_uuid())
    .fetch_optional(&mut *conn)
    .await?;
    row.map(trust_from_row).transpose()
}

pub(crate) async fn decisions(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
) -> Result<Vec<StoredDecision>> {
    Ok(sqlx::query_as(
        "SELECT approver_key_id, decision, policy_version, payload_hash, signature, \
           acknowledged_flags FROM approvals WHERE tenant_id = $1 AND op_id = $2 ORDER BY created_at, approver_id",
    )
    .bind(tenant_id.as_uuid())
    .bind(op_id.as_uuid())
    .fetch_all(&mut *conn)
    .await?)
}

/// A screening result recorded with the `v1a` delivery it came in.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SignedScreening {
    /// The `webhook-id`.
    pub event_id: String,
    /// The `webhook-timestamp`, unix seconds.
    pub signed_at: i64,
    /// The raw body.
    pub body: Vec<u8>,
    /// The provider's Ed25519 signature.
    pub signature: Vec<u8>,
}

impl SignedScreening {
    /// The view `opledger_webhook::screening::judge` reads.
    pub fn as_stored(&self) -> opledger_webhook::screening::StoredScreening<'_> {
        opledger_webhook::screening::StoredScreening {
            event_id: &self.event_id,
            timestamp: self.signed_at,
            body: &self.body,
            signature: Some(&self.signature),
        }
    }
}

/// The operation's screening results that carry a provider's signature.
pub(crate) async fn signed_screenings(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
) -> Result<Vec<SignedScreening>> {
    Ok(sqlx::query_as(
        "SELECT k.event_id, k.signed_at, k.body, k.signature FROM kyt_screenings k \
         WHERE k.tenant_id = $1 AND k.op_id = $2 AND k.signature IS NOT NULL",
    )
    .bind(tenant_id.as_uuid())
    .bind(op_id.as_uuid())
    .fetch_all(&mut *conn)
    .await?)
}
