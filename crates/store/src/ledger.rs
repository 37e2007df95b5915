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
    /// Spendable amount (0 while the account owes).
    pub available: Amount,
    /// What the account owes: released funds spent before the release was reopened because the
    /// cancel that proved it was reorganized away (`opledger_reopen_release`). While it is above
    /// 0 the account can place no hold.
    pub owed: Amount,
    /// Amount held by open withdrawals.
    pub held: Amount,
    /// Credits proposed and not yet witnessed (neither attested nor refused): not spendable.
    pub pending: Amount,
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

/// The second statement of the create transaction: `opledger_place_hold` (a SECURITY DEFINER
/// function of the service-roles migration, the only way a service places a hold) moves the amount
/// from available to held (only if available covers it and only for a REQUESTED operation with
/// this payload), records the hold, its journal entry and two postings. Parameters: `$1` tenant,
/// `$2` op id, `$3` account, `$4` amount, `$5` asset. Returns true on success, false when funds
/// are insufficient. Public so benchmarks run the exact same SQL.
pub const PLACE_HOLD_SQL: &str = "SELECT opledger_place_hold($1, $2, $3, $5, $4::numeric)";

/// Moves the payload amount from available to held and records the hold, in the caller's
/// transaction. Returns false, changing nothing, when the available balance is too small.
pub(crate) async fn place_hold(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
    payload: &WithdrawalPayload,
) -> Result<bool> {
    let (placed,): (bool,) = sqlx::query_as(PLACE_HOLD_SQL)
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(payload.source_account.as_str())
        .bind(payload.amount.to_string())
        .bind(payload.asset.as_str())
        .fetch_one(&mut *conn)
        .await?;
    Ok(placed)
}

/// The failpoint of a hold effect applied in a transaction not yet committed.
fn before_commit(effect: HoldEffect) {
    match effect {
        HoldEffect::Release => opledger_failpoint::hit("hold.release_before_commit"),
        HoldEffect::Settle => opledger_failpoint::hit("hold.settle_before_commit"),
        HoldEffect::Reopen => opledger_failpoint::hit("hold.reopen_before_commit"),
        HoldEffect::Keep => {}
    }
}

/// Applies the ledger side of transitions inside the caller's transaction, after their state
/// changes: release (held back to available), settle (held leaves the platform) or reopen (a
/// reorged settlement is held again). One `opledger_resolve_holds` call per tenant (migration
/// 22) moves the holds, writes their entries and postings, and then updates each balance row
/// once by the sum of its holds, so that the row every create of the account also needs is
/// locked for one update and the commit only (callers sort by tenant, so that batches take those
/// locks in one order). An effect that finds its hold in the wrong status, or its operation in a
/// state that does not call for it, fails the whole call ([`StoreError::HoldMismatch`]; the
/// caller rolls back).
pub(crate) async fn apply_hold_effects(
    conn: &mut PgConnection,
    effects: &[(TenantId, OperationId, HoldEffect)],
) -> Result<()> {
    // Tenant by tenant (each call touches one tenant's rows, docs/distribution.md), in the
    // order of first appearance: the callers sort by tenant, so every batch locks balance rows
    // in one order (and within a tenant, opledger_resolve_holds orders them itself).
    let mut by_tenant: Vec<(TenantId, Vec<uuid::Uuid>, Vec<&str>)> = Vec::new();
    let mut first_from = None;
    for (tenant_id, op_id, effect) in effects {
        let (name, from) = match effect {
            HoldEffect::Keep => continue,
            HoldEffect::Release => ("RELEASE", "OPEN"),
            HoldEffect::Settle => ("SETTLE", "OPEN"),
            HoldEffect::Reopen => ("REOPEN", "SETTLED"),
        };
        first_from.get_or_insert(from);
        match by_tenant.iter_mut().find(|(t, _, _)| t == tenant_id) {
            Some((_, ops, names)) => {
                ops.push(op_id.as_uuid());
                names.push(name);
            }
            None => by_tenant.push((*tenant_id, vec![op_id.as_uuid()], vec![name])),
        }
    }
    let Some(from) = first_from else {
        return Ok(());
    };
    for (tenant_id, ops, names) in &by_tenant {
        // The holds, entries and postings in one statement, each balance row once, last.
        let (moved,): (i32,) = sqlx::query_as("SELECT opledger_resolve_holds($1, $2, $3)")
            .bind(tenant_id.as_uuid())
            .bind(ops)
            .bind(names)
            .fetch_one(&mut *conn)
            .await
            .map_err(StoreError::range)?;
        if usize::try_from(moved).ok() != Some(ops.len()) {
            return Err(StoreError::HoldMismatch { expected: from });
        }
    }
    // The caller's transaction is still open: a crash here must leave every hold as it was.
    for (_, _, effect) in effects {
        before_commit(*effect);
    }
    Ok(())
}

/// Credits an account inside the caller's transaction, keyed by `key_digest` (creating the account
/// when missing), through `opledger_credit` (the only way a service credits): one journal entry,
/// two postings, one `ledger_credits` row. Returns false, having written nothing, when the key
/// already credited this tenant; compare with [`stored_credit`]. A credit that would take the
/// account's balance beyond the amount range is [`StoreError::OutOfRange`]; the statement failed,
/// so the caller's transaction must be rolled back (or the call made inside a savepoint).
pub async fn credit_in(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    key_digest: &[u8; 32],
    account: &AccountName,
    asset: &AssetCode,
    amount: Amount,
) -> Result<bool> {
    let (entry,): (Option<i64>,) =
        sqlx::query_as("SELECT opledger_credit($1, $2, $3, $4, $5::numeric)")
            .bind(tenant_id.as_uuid())
            .bind(key_digest.as_slice())
            .bind(account.as_str())
            .bind(asset.as_str())
            .bind(amount.to_string())
            .fetch_one(&mut *conn)
            .await
            .map_err(StoreError::range)?;
    Ok(entry.is_some())
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

    /// The balances of one account, or `None` when the tenant has neither the account nor a
    /// pending credit for it.
    pub async fn balance(
        &self,
        tenant_id: TenantId,
        account: &AccountName,
        asset: &AssetCode,
    ) -> Result<Option<Balance>> {
        let row: Option<(Option<String>, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT a.available::text, a.held::text, p.pending::text \
             FROM (SELECT 1) AS one \
             LEFT JOIN ledger_accounts a \
               ON a.tenant_id = $1 AND a.account = $2 AND a.asset = $3 \
             LEFT JOIN LATERAL ( \
               SELECT CASE WHEN sum(c.amount) > 340282366920938463463374607431768211455 \
                      THEN 340282366920938463463374607431768211455 ELSE sum(c.amount) END \
                      AS pending \
               FROM credit_proposals c \
               WHERE c.tenant_id = $1 AND c.account = $2 AND c.asset = $3 \
                 AND NOT EXISTS (SELECT 1 FROM credit_attestations t \
                                 WHERE t.tenant_id = c.tenant_id AND t.credit_id = c.credit_id) \
                 AND NOT EXISTS (SELECT 1 FROM credit_refusals r \
                                 WHERE r.tenant_id = c.tenant_id AND r.credit_id = c.credit_id) \
             ) p ON true \
             WHERE a.account IS NOT NULL OR p.pending IS NOT NULL",
        )
        .bind(tenant_id.as_uuid())
        .bind(account.as_str())
        .bind(asset.as_str())
        .fetch_optional(&self.pool)
        .await?;
        let parse = |text: Option<String>| {
            text.map_or(Ok(Amount::ZERO), |t| {
                Amount::parse(&t).map_err(|_| StoreError::Corrupt { what: "balance" })
            })
        };
        row.map(|(available, held, pending)| {
            // A negative available is a debt (see `Balance::owed`), never a corrupt row.
            let (available, owed) = match available.as_deref().map(|a| a.strip_prefix('-')) {
                Some(Some(debt)) => (Amount::ZERO, parse(Some(debt.to_owned()))?),
                _ => (parse(available)?, Amount::ZERO),
            };
            Ok(Balance {
                available,
                owed,
                held: parse(held)?,
                pending: parse(pending)?,
            })
        })
        .transpose()
    }
}
