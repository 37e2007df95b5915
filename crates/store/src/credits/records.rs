//! Reading credits: a proposal row with whether it was attested or refused, the operators'
//! statements recorded for it, and the `0x` hex text identifiers are stored as.

use super::types::{CreditKind, CreditRecord, CreditState, DepositEvidence, OperatorSignature};
use crate::{Result, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::amount::Amount;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::{AccountName, AssetCode};
use sqlx::PgConnection;

pub(super) fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", hex::encode(bytes))
}

fn unhex<const N: usize>(text: &str, what: &'static str) -> Result<[u8; N]> {
    let mut out = [0_u8; N];
    let digits = text
        .strip_prefix("0x")
        .ok_or(StoreError::Corrupt { what })?;
    hex::decode_to_slice(digits, &mut out).map_err(|_| StoreError::Corrupt { what })?;
    Ok(out)
}

pub(super) type ProposalRow = (
    uuid::Uuid,
    Vec<u8>,
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<String>,
    DateTime<Utc>,
    bool,
    Option<String>,
);

/// The columns of a [`ProposalRow`], of `credit_proposals p`.
macro_rules! proposal_columns {
    () => {
        "p.tenant_id, p.credit_id, p.kind, p.account, p.asset, \
     p.amount::text, p.network, p.tx_hash, p.log_index, p.recipient, p.created_at, \
     EXISTS (SELECT 1 FROM credit_attestations t \
             WHERE t.tenant_id = p.tenant_id AND t.credit_id = p.credit_id), \
     (SELECT r.reason FROM credit_refusals r \
      WHERE r.tenant_id = p.tenant_id AND r.credit_id = p.credit_id)"
    };
}
pub(super) use proposal_columns;

pub(super) fn record_from_row(
    row: ProposalRow,
    statements: Vec<OperatorSignature>,
) -> Result<CreditRecord> {
    let (tenant, id, kind, account, asset, amount, network, tx_hash, log_index, recipient, at) = (
        row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10,
    );
    let credit_id: [u8; 32] = id
        .try_into()
        .map_err(|_| StoreError::Corrupt { what: "credit id" })?;
    let evidence = match (network, tx_hash, recipient) {
        (Some(network), Some(tx_hash), Some(recipient)) => Some(DepositEvidence {
            network,
            tx_hash: unhex(&tx_hash, "deposit transaction")?,
            log_index: log_index
                .map(u32::try_from)
                .transpose()
                .map_err(|_| StoreError::Corrupt { what: "log index" })?,
            recipient: unhex(&recipient, "deposit recipient")?,
        }),
        (None, None, None) => None,
        _ => {
            return Err(StoreError::Corrupt {
                what: "deposit evidence",
            });
        }
    };
    let state = match (row.11, row.12) {
        (true, _) => CreditState::Credited,
        (false, Some(reason)) => CreditState::Refused(reason),
        (false, None) => CreditState::Pending,
    };
    Ok(CreditRecord {
        tenant_id: TenantId::from_uuid(tenant),
        credit_id,
        kind: CreditKind::parse(&kind)?,
        state,
        account: AccountName::parse(&account)
            .map_err(|_| StoreError::Corrupt { what: "account" })?,
        asset: AssetCode::parse(&asset).map_err(|_| StoreError::Corrupt { what: "asset" })?,
        amount: Amount::parse(&amount).map_err(|_| StoreError::Corrupt { what: "amount" })?,
        evidence,
        statements,
        created_at: at,
    })
}

pub(super) async fn statements_of(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    credit_id: &[u8; 32],
) -> Result<Vec<OperatorSignature>> {
    let rows: Vec<(String, i64, Vec<u8>)> = sqlx::query_as(
        "SELECT operator_key_id, policy_version, signature FROM credit_statements \
         WHERE tenant_id = $1 AND credit_id = $2 ORDER BY operator_key_id",
    )
    .bind(tenant_id.as_uuid())
    .bind(credit_id.as_slice())
    .fetch_all(&mut *conn)
    .await?;
    rows.into_iter()
        .map(|(key, version, signature)| {
            Ok(OperatorSignature {
                operator_key_id: key,
                policy_version: u64::try_from(version).map_err(|_| StoreError::Corrupt {
                    what: "policy version",
                })?,
                signature,
            })
        })
        .collect()
}

pub(super) async fn record_in(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    credit_id: &[u8; 32],
) -> Result<Option<CreditRecord>> {
    let row: Option<ProposalRow> = sqlx::query_as(concat!(
        "SELECT ",
        proposal_columns!(),
        " FROM credit_proposals p WHERE p.tenant_id = $1 AND p.credit_id = $2"
    ))
    .bind(tenant_id.as_uuid())
    .bind(credit_id.as_slice())
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let statements = statements_of(conn, tenant_id, credit_id).await?;
    record_from_row(row, statements).map(Some)
}
