//! Credits that need two principals (migration 29): proposals by the inbox (deposits) and the
//! operations API (operator credits, with operators' signed statements), attestations and
//! refusals by the witness.
//!
//! A proposal is not spendable: it shows as the balance's `pending` until the witness attests it
//! through `opledger_attest_credit`, which records the attestation and applies the credit in one
//! transaction, once. Proposals, statements, attestations and refusals are append-only; each is
//! insertable only by its own role. Identifiers (transaction hashes, recipients) are stored as
//! `0x` and lowercase hex and never appear in errors.

use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::amount::Amount;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::{AccountName, AssetCode, PayloadField};
use sqlx::PgConnection;

/// Who proposed a credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditKind {
    /// A deposit reported by a webhook provider (the inbox).
    Deposit,
    /// An operator's credit (the operations API).
    Operator,
}

impl CreditKind {
    fn as_str(self) -> &'static str {
        match self {
            CreditKind::Deposit => "DEPOSIT",
            CreditKind::Operator => "OPERATOR",
        }
    }

    fn parse(text: &str) -> Result<CreditKind> {
        match text {
            "DEPOSIT" => Ok(CreditKind::Deposit),
            "OPERATOR" => Ok(CreditKind::Operator),
            _ => Err(StoreError::Corrupt {
                what: "credit kind",
            }),
        }
    }
}

/// Where a credit stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreditState {
    /// Proposed, not witnessed: not spendable.
    Pending,
    /// Witnessed and applied, once.
    Credited,
    /// Refused for good by the witness, with its reason code.
    Refused(String),
}

/// A deposit's chain evidence, as the provider reported it.
#[derive(Clone, PartialEq, Eq)]
pub struct DepositEvidence {
    /// The network id (the witness's `[evidence.<id>]`).
    pub network: String,
    /// The transaction.
    pub tx_hash: [u8; 32],
    /// The log of a token transfer in its receipt; `None` for the native coin.
    pub log_index: Option<u32>,
    /// The address that received it.
    pub recipient: [u8; 20],
}

impl std::fmt::Debug for DepositEvidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DepositEvidence")
            .field("network", &self.network)
            .field("log_index", &self.log_index)
            .finish_non_exhaustive()
    }
}

/// An operator's signature over the credit statement of a credit's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorSignature {
    /// Key id (32 lowercase hex characters) of the operator's key.
    pub operator_key_id: String,
    /// The trust statement version the operator signed under.
    pub policy_version: u64,
    /// The 64-byte Ed25519 signature.
    pub signature: Vec<u8>,
}

/// One credit, pending or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditRecord {
    /// The credit's tenant.
    pub tenant_id: TenantId,
    /// Its key digest.
    pub credit_id: [u8; 32],
    /// Who proposed it.
    pub kind: CreditKind,
    /// Where it stands.
    pub state: CreditState,
    /// The account it credits.
    pub account: AccountName,
    /// The asset.
    pub asset: AssetCode,
    /// The amount.
    pub amount: Amount,
    /// A deposit's chain evidence, if it came with some.
    pub evidence: Option<DepositEvidence>,
    /// Operators' statements recorded so far, by key id.
    pub statements: Vec<OperatorSignature>,
    /// When it was proposed.
    pub created_at: DateTime<Utc>,
}

/// What a proposal asks for.
#[derive(Debug, Clone, Copy)]
pub struct NewProposal<'a> {
    /// The tenant that owns the account.
    pub tenant_id: TenantId,
    /// The credit's key digest.
    pub credit_id: &'a [u8; 32],
    /// The account to credit.
    pub account: &'a AccountName,
    /// The asset.
    pub asset: &'a AssetCode,
    /// The amount, greater than zero.
    pub amount: Amount,
}

/// What recording a proposal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposed {
    /// A new proposal.
    New,
    /// The same key already proposed exactly this credit: nothing new.
    Replayed,
    /// The same key proposed another credit: these fields differ (in field order). Nothing
    /// written.
    Conflicting(Vec<PayloadField>),
}

fn hex0x(bytes: &[u8]) -> String {
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

type ProposalRow = (
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

fn record_from_row(row: ProposalRow, statements: Vec<OperatorSignature>) -> Result<CreditRecord> {
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

async fn statements_of(
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

async fn record_in(
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
