//! Proposing credits: a proposal in the caller's transaction (the inbox's deposits), operator
//! credits with their operators' signed statements, and reading the tenant's credits.

use super::records::{
    ProposalRow, hex0x, proposal_columns, record_from_row, record_in, statements_of,
};
use super::types::{
    CreditKind, CreditRecord, CreditState, DepositEvidence, NewProposal, OperatorSignature,
    Proposed,
};
use crate::{Result, Store, StoreError};
use opledger_domain::ids::TenantId;
use opledger_domain::payload::PayloadField;
use sqlx::PgConnection;

/// The fields of `stored` that differ from `wanted` (and its evidence), in field order.
fn differences(
    stored: &CreditRecord,
    wanted: &NewProposal<'_>,
    kind: CreditKind,
    evidence: Option<&DepositEvidence>,
) -> Vec<PayloadField> {
    let mut fields = Vec::new();
    if stored.account != *wanted.account || stored.kind != kind {
        fields.push(PayloadField::SourceAccount);
    }
    if stored.evidence.as_ref() != evidence {
        fields.push(PayloadField::Destination);
    }
    if stored.asset != *wanted.asset {
        fields.push(PayloadField::Asset);
    }
    if stored.amount != wanted.amount {
        fields.push(PayloadField::Amount);
    }
    fields
}

/// Records a proposal in the caller's transaction: [`Proposed::New`], or, when the key already
/// proposed, whether it proposed exactly this.
pub async fn propose_in(
    conn: &mut PgConnection,
    proposal: &NewProposal<'_>,
    kind: CreditKind,
    evidence: Option<&DepositEvidence>,
) -> Result<Proposed> {
    let inserted = sqlx::query(
        "INSERT INTO credit_proposals \
           (tenant_id, credit_id, kind, account, asset, amount, network, tx_hash, log_index, \
            recipient) \
         VALUES ($1, $2, $3, $4, $5, $6::numeric, $7, $8, $9, $10) \
         ON CONFLICT (tenant_id, credit_id) DO NOTHING",
    )
    .bind(proposal.tenant_id.as_uuid())
    .bind(proposal.credit_id.as_slice())
    .bind(kind.as_str())
    .bind(proposal.account.as_str())
    .bind(proposal.asset.as_str())
    .bind(proposal.amount.to_string())
    .bind(evidence.map(|e| e.network.as_str()))
    .bind(evidence.map(|e| hex0x(&e.tx_hash)))
    .bind(evidence.and_then(|e| e.log_index).map(i64::from))
    .bind(evidence.map(|e| hex0x(&e.recipient)))
    .execute(&mut *conn)
    .await
    .map_err(StoreError::range)?
    .rows_affected();
    if inserted == 1 {
        return Ok(Proposed::New);
    }
    let stored = record_in(conn, proposal.tenant_id, proposal.credit_id)
        .await?
        .ok_or(StoreError::Conflict { current: None })?;
    let fields = differences(&stored, proposal, kind, evidence);
    Ok(if fields.is_empty() {
        Proposed::Replayed
    } else {
        Proposed::Conflicting(fields)
    })
}

async fn add_statement_in(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    credit_id: &[u8; 32],
    signature: &OperatorSignature,
) -> Result<()> {
    let version = i64::try_from(signature.policy_version).map_err(|_| StoreError::OutOfRange {
        what: "policy version",
    })?;
    sqlx::query(
        "INSERT INTO credit_statements \
           (tenant_id, credit_id, operator_key_id, policy_version, signature) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (tenant_id, credit_id, operator_key_id) DO NOTHING",
    )
    .bind(tenant_id.as_uuid())
    .bind(credit_id.as_slice())
    .bind(&signature.operator_key_id)
    .bind(version)
    .bind(&signature.signature)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

impl Store {
    /// Proposes an operator credit with one operator's signature (the operations API's role),
    /// idempotently by key digest: a replay with the same fields adds the signature (if new) and
    /// returns the credit with `true`; other fields are [`StoreError::KeyReused`].
    pub async fn propose_operator_credit(
        &self,
        proposal: &NewProposal<'_>,
        signature: &OperatorSignature,
    ) -> Result<(CreditRecord, bool)> {
        let mut tx = self.pool.begin().await?;
        let proposed = propose_in(&mut tx, proposal, CreditKind::Operator, None).await?;
        let replayed = match proposed {
            Proposed::New => false,
            Proposed::Replayed => true,
            Proposed::Conflicting(fields) => return Err(StoreError::KeyReused { fields }),
        };
        add_statement_in(&mut tx, proposal.tenant_id, proposal.credit_id, signature).await?;
        let record = record_in(&mut tx, proposal.tenant_id, proposal.credit_id)
            .await?
            .ok_or(StoreError::NotFound { what: "credit" })?;
        tx.commit().await?;
        Ok((record, replayed))
    }

    /// Adds an operator's signature to a pending credit. [`StoreError::NotFound`] when the
    /// tenant has no such credit; [`StoreError::Conflict`] when it is credited or refused already
    /// (nothing written).
    pub async fn add_credit_statement(
        &self,
        tenant_id: TenantId,
        credit_id: &[u8; 32],
        signature: &OperatorSignature,
    ) -> Result<CreditRecord> {
        let mut tx = self.pool.begin().await?;
        let record = record_in(&mut tx, tenant_id, credit_id)
            .await?
            .ok_or(StoreError::NotFound { what: "credit" })?;
        if record.state != CreditState::Pending {
            return Err(StoreError::Conflict { current: None });
        }
        add_statement_in(&mut tx, tenant_id, credit_id, signature).await?;
        let record = record_in(&mut tx, tenant_id, credit_id)
            .await?
            .ok_or(StoreError::NotFound { what: "credit" })?;
        tx.commit().await?;
        Ok(record)
    }

    /// One credit of the tenant.
    pub async fn credit(
        &self,
        tenant_id: TenantId,
        credit_id: &[u8; 32],
    ) -> Result<Option<CreditRecord>> {
        let mut conn = self.pool.acquire().await?;
        record_in(&mut conn, tenant_id, credit_id).await
    }

    /// Up to `limit` of the tenant's pending credits, oldest first.
    pub async fn pending_credits(
        &self,
        tenant_id: TenantId,
        limit: u32,
    ) -> Result<Vec<CreditRecord>> {
        let mut conn = self.pool.acquire().await?;
        let rows: Vec<ProposalRow> = sqlx::query_as(concat!(
            "SELECT ",
            proposal_columns!(),
            " FROM credit_proposals p \
             WHERE p.tenant_id = $1 \
               AND NOT EXISTS (SELECT 1 FROM credit_attestations t \
                               WHERE t.tenant_id = p.tenant_id AND t.credit_id = p.credit_id) \
               AND NOT EXISTS (SELECT 1 FROM credit_refusals r \
                               WHERE r.tenant_id = p.tenant_id AND r.credit_id = p.credit_id) \
             ORDER BY p.created_at, p.credit_id LIMIT $2"
        ))
        .bind(tenant_id.as_uuid())
        .bind(i64::from(limit))
        .fetch_all(&mut *conn)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            let id: [u8; 32] = row
                .1
                .clone()
                .try_into()
                .map_err(|_| StoreError::Corrupt { what: "credit id" })?;
            let statements = statements_of(&mut conn, tenant_id, &id).await?;
            out.push(record_from_row(row, statements)?);
        }
        Ok(out)
    }
}
