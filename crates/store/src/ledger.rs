//! The double-entry ledger: balances, holds and their postings.
//!
//! Every balance change is one journal entry whose postings sum to zero per asset. Buckets are an
//! account's `available` and `held` balances and `external` (money entering or leaving the
//! platform). A hold is placed with its operation, and later settled or released exactly once; the
//! conditional updates below refuse a second resolution.

use crate::{Result, Store, StoreError};
use opledger_domain::amount::Amount;
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{AccountName, AssetCode, WithdrawalPayload};
use opledger_domain::state::HoldEffect;
use sqlx::PgConnection;

/// An account's balances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Balance {
    /// Spendable amount.
    pub available: Amount,
    /// Amount held by open withdrawals.
    pub held: Amount,
}

/// The result of a credit call.
#[derive(Debug, Clone)]
pub struct Credited {
    /// The account's balances after the credit.
    pub balance: Balance,
    /// True when the key had already credited the account (nothing credited again).
    pub replayed: bool,
}

/// What a credit call asks for.
#[derive(Debug)]
pub struct NewCredit<'a> {
    /// The tenant that owns the account.
    pub tenant_id: TenantId,
    /// The idempotency key of this credit; only its digest is stored.
    pub key: &'a IdempotencyKey,
    /// The account to credit (created when missing).
    pub account: &'a AccountName,
    /// The asset.
    pub asset: &'a AssetCode,
    /// The amount, greater than zero.
    pub amount: Amount,
}

/// The second statement of the create transaction: moves the amount from available to held (only
/// if available covers it), records the hold, its journal entry and two postings. Parameters: `$1`
/// tenant, `$2` op id, `$3` account, `$4` amount, `$5` asset. Affects 2 rows on success, 0 when
/// funds are insufficient. Public so benchmarks run the exact same SQL.
pub const PLACE_HOLD_SQL: &str = "WITH acct AS ( \
           UPDATE ledger_accounts SET available = available - $4::numeric, \
             held = held + $4::numeric, version = version + 1 \
           WHERE tenant_id = $1 AND account = $3 AND asset = $5 AND available >= $4::numeric \
           RETURNING tenant_id), \
         hold AS ( \
           INSERT INTO ledger_holds (tenant_id, op_id, account, asset, amount, status) \
           SELECT $1, $2, $3, $5, $4::numeric, 'OPEN' FROM acct), \
         entry AS ( \
           INSERT INTO ledger_entries (tenant_id, kind, op_id) SELECT $1, 'HOLD', $2 FROM acct \
           RETURNING entry_id) \
         INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount) \
         SELECT entry.entry_id, l.line, $1, $3, $5, l.bucket, l.amount FROM entry, \
           (VALUES (1::smallint, 'available', -($4::numeric)), (2::smallint, 'held', $4::numeric)) \
           AS l(line, bucket, amount)";

/// Moves the payload amount from available to held and records the hold, in the caller's
/// transaction. Returns false, changing nothing, when the available balance is too small.
pub(crate) async fn place_hold(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
    payload: &WithdrawalPayload,
) -> Result<bool> {
    let rows = sqlx::query(PLACE_HOLD_SQL)
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(payload.source_account.as_str())
        .bind(payload.amount.to_string())
        .bind(payload.asset.as_str())
        .execute(&mut *conn)
        .await?
        .rows_affected();
    Ok(rows == 2)
}

/// Applies the ledger side of a transition inside the caller's transaction: release (held back to
/// available), settle (held leaves the platform) or reopen (a reorged settlement is held again).
pub(crate) async fn apply_hold_effect(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
    effect: HoldEffect,
) -> Result<()> {
    let (from, to, kind, held_delta, lines): (&str, &str, &str, i8, [(&str, i8); 2]) = match effect
    {
        HoldEffect::Keep => return Ok(()),
        HoldEffect::Release => (
            "OPEN",
            "RELEASED",
            "RELEASE",
            -1,
            [("held", -1), ("available", 1)],
        ),
        HoldEffect::Settle => (
            "OPEN",
            "SETTLED",
            "SETTLE",
            -1,
            [("held", -1), ("external", 1)],
        ),
        HoldEffect::Reopen => (
            "SETTLED",
            "OPEN",
            "REOPEN",
            1,
            [("external", -1), ("held", 1)],
        ),
    };
    let available_delta: i8 = if effect == HoldEffect::Release { 1 } else { 0 };
    let rows = sqlx::query(
        "WITH h AS ( \
           UPDATE ledger_holds SET status = $4, \
             resolved_at = CASE WHEN $4 = 'OPEN' THEN NULL ELSE now() END \
           WHERE tenant_id = $1 AND op_id = $2 AND status = $3 \
           RETURNING account, asset, amount), \
         acct AS ( \
           UPDATE ledger_accounts a SET held = a.held + $6::numeric * h.amount, \
             available = a.available + $7::numeric * h.amount, version = a.version + 1 \
           FROM h WHERE a.tenant_id = $1 AND a.account = h.account AND a.asset = h.asset \
           RETURNING h.account, h.asset, h.amount), \
         entry AS ( \
           INSERT INTO ledger_entries (tenant_id, kind, op_id) SELECT $1, $5, $2 FROM acct \
           RETURNING entry_id) \
         INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount) \
         SELECT entry.entry_id, l.line, $1, acct.account, acct.asset, l.bucket, l.sign * acct.amount \
         FROM entry, acct, (VALUES (1::smallint, $8, $9::numeric), (2::smallint, $10, $11::numeric)) \
           AS l(line, bucket, sign)",
    )
    .bind(tenant_id.as_uuid())
    .bind(op_id.as_uuid())
    .bind(from)
    .bind(to)
    .bind(kind)
    .bind(i32::from(held_delta))
    .bind(i32::from(available_delta))
    .bind(lines[0].0)
    .bind(i32::from(lines[0].1))
    .bind(lines[1].0)
    .bind(i32::from(lines[1].1))
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if rows != 2 {
        return Err(StoreError::HoldMismatch { expected: from });
    }
    // The caller's transaction is still open: a crash here must leave the hold as it was.
    match effect {
        HoldEffect::Release => opledger_failpoint::hit("hold.release_before_commit"),
        HoldEffect::Settle => opledger_failpoint::hit("hold.settle_before_commit"),
        HoldEffect::Reopen => opledger_failpoint::hit("hold.reopen_before_commit"),
        HoldEffect::Keep => {}
    }
    Ok(())
}

/// Credits an account inside the caller's transaction, keyed by `key_digest` (creating the account
/// when missing): one journal entry, two postings, one `ledger_credits` row. Returns false, having
/// written nothing (the statement runs under a savepoint that is rolled back), when the key already
/// credited this tenant; compare with [`stored_credit`].
pub async fn credit_in(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    key_digest: &[u8; 32],
    account: &AccountName,
    asset: &AssetCode,
    amount: Amount,
) -> Result<bool> {
    use sqlx::Connection;
    // The statement credits the account before it learns whether the key was new.
    let mut savepoint = conn.begin().await?;
    let inserted: Option<(i64,)> = sqlx::query_as(
        "WITH acct AS ( \
               INSERT INTO ledger_accounts (tenant_id, account, asset, available) \
               VALUES ($1, $2, $3, $4::numeric) \
               ON CONFLICT (tenant_id, account, asset) DO UPDATE \
                 SET available = ledger_accounts.available + EXCLUDED.available, \
                     version = ledger_accounts.version + 1 \
               RETURNING tenant_id), \
             entry AS ( \
               INSERT INTO ledger_entries (tenant_id, kind) SELECT $1, 'CREDIT' FROM acct \
               RETURNING entry_id), \
             postings AS ( \
               INSERT INTO ledger_postings (entry_id, line, tenant_id, account, asset, bucket, amount) \
               SELECT entry.entry_id, l.line, $1, $2, $3, l.bucket, l.amount FROM entry, \
                 (VALUES (1::smallint, 'external', -($4::numeric)), (2::smallint, 'available', $4::numeric)) \
                 AS l(line, bucket, amount)) \
             INSERT INTO ledger_credits (tenant_id, idempotency_key_hash, account, asset, amount, entry_id) \
             SELECT $1, $5, $2, $3, $4::numeric, entry_id FROM entry \
             ON CONFLICT (tenant_id, idempotency_key_hash) DO NOTHING RETURNING entry_id",
    )
    .bind(tenant_id.as_uuid())
    .bind(account.as_str())
    .bind(asset.as_str())
    .bind(amount.to_string())
    .bind(key_digest.as_slice())
    .fetch_optional(&mut *savepoint)
    .await?;
    if inserted.is_some() {
        savepoint.commit().await?;
        Ok(true)
    } else {
        savepoint.rollback().await?;
        Ok(false)
    }
}

/// What the credit with this key digest did: account, asset and amount, if it exists.
pub async fn stored_credit(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    key_digest: &[u8; 32],
) -> Result<Option<(String, String, String)>> {
    Ok(sqlx::query_as(
        "SELECT account, asset, amount::text FROM ledger_credits \
         WHERE tenant_id = $1 AND idempotency_key_hash = $2",
    )
    .bind(tenant_id.as_uuid())
    .bind(key_digest.as_slice())
    .fetch_optional(&mut *conn)
    .await?)
}

impl Store {
    /// Credits an account idempotently by key, creating the account when missing.
    pub async fn credit_account(&self, credit: NewCredit<'_>) -> Result<Credited> {
        let digest = credit.key.digest();
        let mut tx = self.pool.begin().await?;
        let inserted = credit_in(
            &mut tx,
            credit.tenant_id,
            &digest,
            credit.account,
            credit.asset,
            credit.amount,
        )
        .await?;
        let replayed = !inserted;
        if replayed {
            // The key was used before: undo this attempt entirely, then compare with what it did.
            tx.rollback().await?;
            let mut conn = self.pool.acquire().await?;
            let stored = stored_credit(&mut conn, credit.tenant_id, &digest).await?;
            let Some((account, asset, amount)) = stored else {
                return Err(StoreError::Conflict { current: None });
            };
            let mut fields = Vec::new();
            if account != credit.account.as_str() {
                fields.push(opledger_domain::payload::PayloadField::SourceAccount);
            }
            if asset != credit.asset.as_str() {
                fields.push(opledger_domain::payload::PayloadField::Asset);
            }
            if amount != credit.amount.to_string() {
                fields.push(opledger_domain::payload::PayloadField::Amount);
            }
            if !fields.is_empty() {
                return Err(StoreError::KeyReused { fields });
            }
        } else {
            tx.commit().await?;
        }
        let balance = self
            .balance(credit.tenant_id, credit.account, credit.asset)
            .await?
            .ok_or(StoreError::NotFound { what: "account" })?;
        Ok(Credited { balance, replayed })
    }

    /// The balances of one account, or `None` when it does not exist for this tenant.
    pub async fn balance(
        &self,
        tenant_id: TenantId,
        account: &AccountName,
        asset: &AssetCode,
    ) -> Result<Option<Balance>> {
        let row: Option<(String, String)> = sqlx::query_as(
            "SELECT available::text, held::text FROM ledger_accounts \
             WHERE tenant_id = $1 AND account = $2 AND asset = $3",
        )
        .bind(tenant_id.as_uuid())
        .bind(account.as_str())
        .bind(asset.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(available, held)| {
            Ok(Balance {
                available: Amount::parse(&available)
                    .map_err(|_| StoreError::Corrupt { what: "balance" })?,
                held: Amount::parse(&held).map_err(|_| StoreError::Corrupt { what: "balance" })?,
            })
        })
        .transpose()
    }
}
