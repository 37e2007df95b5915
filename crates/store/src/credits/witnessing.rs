//! The witness's side of credits: its queue of undecided credits (a page per pass, with the
//! registered owner of a deposit's recipient), attestations that apply a credit, refusals, the
//! age of the oldest undecided credit, and the registration of deposit addresses.

use super::records::{hex0x, record_in};
use super::types::CreditRecord;
use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::ids::TenantId;
use opledger_domain::payload::AccountName;

/// A position in the witness's queue: the last credit of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditCursor {
    /// When it was proposed.
    pub created_at: DateTime<Utc>,
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Its id.
    pub credit_id: [u8; 32],
}

impl CreditToWitness {
    /// The cursor just after this credit.
    pub fn cursor(&self) -> CreditCursor {
        CreditCursor {
            created_at: self.record.created_at,
            tenant_id: self.record.tenant_id,
            credit_id: self.record.credit_id,
        }
    }
}

/// A credit the witness has not decided yet, with what it rests on.
#[derive(Debug, Clone)]
pub struct CreditToWitness {
    /// The credit.
    pub record: CreditRecord,
    /// For a deposit with chain evidence: the tenant and account its recipient is registered to
    /// on its network (`None`: not registered).
    pub registered_to: Option<(TenantId, AccountName)>,
}

impl Store {
    /// Up to `limit` credits neither attested nor refused, in proposal order after `after` (from
    /// the oldest when `None`): the witness's queue, read a page per pass so that credits it
    /// cannot decide yet (a deposit its endpoints do not show) never starve the ones behind them.
    pub async fn credits_to_witness(
        &self,
        after: Option<&CreditCursor>,
        limit: u32,
    ) -> Result<Vec<CreditToWitness>> {
        let mut conn = self.pool.acquire().await?;
        let rows: Vec<(uuid::Uuid, Vec<u8>)> = sqlx::query_as(
            "SELECT p.tenant_id, p.credit_id FROM credit_proposals p \
             WHERE NOT EXISTS (SELECT 1 FROM credit_attestations t \
                               WHERE t.tenant_id = p.tenant_id AND t.credit_id = p.credit_id) \
               AND NOT EXISTS (SELECT 1 FROM credit_refusals r \
                               WHERE r.tenant_id = p.tenant_id AND r.credit_id = p.credit_id) \
               AND ($2::timestamptz IS NULL \
                    OR (p.created_at, p.tenant_id, p.credit_id) > ($2, $3, $4)) \
             ORDER BY p.created_at, p.tenant_id, p.credit_id LIMIT $1",
        )
        .bind(i64::from(limit))
        .bind(after.map(|c| c.created_at))
        .bind(after.map(|c| c.tenant_id.as_uuid()))
        .bind(after.map(|c| c.credit_id.to_vec()))
        .fetch_all(&mut *conn)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for (tenant, id) in rows {
            let tenant_id = TenantId::from_uuid(tenant);
            let credit_id: [u8; 32] = id
                .try_into()
                .map_err(|_| StoreError::Corrupt { what: "credit id" })?;
            let Some(record) = record_in(&mut conn, tenant_id, &credit_id).await? else {
                continue;
            };
            let registered_to = match &record.evidence {
                Some(evidence) => {
                    let owner: Option<(uuid::Uuid, String)> = sqlx::query_as(
                        "SELECT tenant_id, account FROM deposit_addresses \
                         WHERE network = $1 AND address = $2",
                    )
                    .bind(&evidence.network)
                    .bind(hex0x(&evidence.recipient))
                    .fetch_optional(&mut *conn)
                    .await?;
                    owner
                        .map(|(t, a)| {
                            Ok::<_, StoreError>((
                                TenantId::from_uuid(t),
                                AccountName::parse(&a)
                                    .map_err(|_| StoreError::Corrupt { what: "account" })?,
                            ))
                        })
                        .transpose()?
                }
                None => None,
            };
            out.push(CreditToWitness {
                record,
                registered_to,
            });
        }
        Ok(out)
    }

    /// The witness's attestation of a credit, and the credit it allows, in one transaction
    /// (`opledger_attest_credit`); `block` is the including block of a deposit with chain
    /// evidence. False when the database applied nothing (already attested or refused, proposed
    /// by a witness login, an unregistered recipient, a transfer credited before, no operator
    /// statement). A credit beyond the amount range is [`StoreError::OutOfRange`].
    pub async fn attest_credit(
        &self,
        tenant_id: TenantId,
        credit_id: &[u8; 32],
        witness_id: &str,
        block: Option<(u64, [u8; 32])>,
    ) -> Result<bool> {
        let number = block
            .map(|(n, _)| i64::try_from(n))
            .transpose()
            .map_err(|_| StoreError::OutOfRange {
                what: "block number",
            })?;
        let (entry,): (Option<i64>,) =
            sqlx::query_as("SELECT opledger_attest_credit($1, $2, $3, $4, $5)")
                .bind(tenant_id.as_uuid())
                .bind(credit_id.as_slice())
                .bind(witness_id)
                .bind(number)
                .bind(block.map(|(_, hash)| hex0x(&hash)))
                .fetch_one(&self.pool)
                .await
                .map_err(StoreError::range)?;
        Ok(entry.is_some())
    }

    /// Refuses a credit for good with a reason code (the witness's role); a second refusal of
    /// the same credit changes nothing.
    pub async fn refuse_credit(
        &self,
        tenant_id: TenantId,
        credit_id: &[u8; 32],
        reason: &str,
        witness_id: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO credit_refusals (tenant_id, credit_id, reason, witness_id) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, credit_id) DO NOTHING",
        )
        .bind(tenant_id.as_uuid())
        .bind(credit_id.as_slice())
        .bind(reason)
        .bind(witness_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Seconds since the oldest credit neither attested nor refused was proposed (0: none).
    pub async fn oldest_unwitnessed_credit_secs(&self) -> Result<f64> {
        let (secs,): (Option<f64>,) = sqlx::query_as(
            "SELECT EXTRACT(EPOCH FROM now() - min(p.created_at))::float8 \
             FROM credit_proposals p \
             WHERE NOT EXISTS (SELECT 1 FROM credit_attestations t \
                               WHERE t.tenant_id = p.tenant_id AND t.credit_id = p.credit_id) \
               AND NOT EXISTS (SELECT 1 FROM credit_refusals r \
                               WHERE r.tenant_id = p.tenant_id AND r.credit_id = p.credit_id)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(secs.unwrap_or(0.0).max(0.0))
    }

    /// Registers `address` on `network` as a deposit address of the tenant's account (the
    /// database owner's role: `opledger-admin deposit-address`). False when it was registered
    /// already to exactly this account; [`StoreError::Conflict`] when to another.
    pub async fn register_deposit_address(
        &self,
        network: &str,
        address: &[u8; 20],
        tenant_id: TenantId,
        account: &AccountName,
    ) -> Result<bool> {
        let inserted = sqlx::query(
            "INSERT INTO deposit_addresses (network, address, tenant_id, account) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (network, address) DO NOTHING",
        )
        .bind(network)
        .bind(hex0x(address))
        .bind(tenant_id.as_uuid())
        .bind(account.as_str())
        .execute(&self.pool)
        .await?
        .rows_affected();
        if inserted == 1 {
            return Ok(true);
        }
        let (tenant, stored): (uuid::Uuid, String) = sqlx::query_as(
            "SELECT tenant_id, account FROM deposit_addresses WHERE network = $1 AND address = $2",
        )
        .bind(network)
        .bind(hex0x(address))
        .fetch_one(&self.pool)
        .await?;
        if tenant == tenant_id.as_uuid() && stored == account.as_str() {
            Ok(false)
        } else {
            Err(StoreError::Conflict { current: None })
        }
    }
}
