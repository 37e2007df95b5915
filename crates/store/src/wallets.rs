//! The hot wallets the signer holds, as it registers them at start: which account signs new
//! withdrawals of a tenant on a network (ACTIVE, one at most), and which retiring ones still sign
//! replacements of their own in-flight nonces (RETIRING). The operations service reads this to
//! refuse a withdrawal no signer could execute.

use crate::{Result, Store, StoreError};
use opledger_domain::ids::TenantId;
use std::time::Duration;

/// A wallet's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WalletStatus {
    /// Signs new withdrawals.
    Active,
    /// Signs only replacements of its own in-flight nonces.
    Retiring,
    /// Rotated out and finished: none of its operations in flight, its key dropped.
    Retired,
}

impl WalletStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            WalletStatus::Active => "ACTIVE",
            WalletStatus::Retiring => "RETIRING",
            WalletStatus::Retired => "RETIRED",
        }
    }
}

/// One registered wallet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Its tenant.
    pub tenant_id: TenantId,
    /// Its network.
    pub network: String,
    /// Its address, 0x-prefixed lowercase.
    pub sender: String,
    /// Its role.
    pub status: WalletStatus,
}

/// The operations of tenant $1 whose original attempt sender $3 signed on network $2 and that are
/// still in flight: SIGNED, BROADCAST, UNKNOWN, FAILED_TERMINAL, or CONFIRMED and still within
/// the chain watcher's reorganization window (which may reopen it): confirmed less than $4
/// seconds ago, or with a live inclusion above the network's reorganization floor, or on a
/// network without a floor yet. A `FROM` clause; the originals are read by their nonce-owner
/// index (tenant, network, sender, nonce; originals only).
macro_rules! in_flight_of_sender {
    () => {
        "FROM tx_attempts a JOIN withdrawal_ops o USING (tenant_id, op_id) \
         WHERE a.tenant_id = $1 AND a.network = $2 AND a.sender = $3 AND a.kind = 'ORIGINAL' \
           AND (o.state IN ('SIGNED', 'BROADCAST', 'UNKNOWN', 'FAILED_TERMINAL') \
                OR (o.state = 'CONFIRMED' \
                    AND (o.updated_at > now() - make_interval(secs => $4) \
                         OR NOT EXISTS (SELECT 1 FROM chain_reorg_floors f WHERE f.network = $2) \
                         OR EXISTS (SELECT 1 FROM inclusions i \
                                    JOIN chain_reorg_floors f ON f.network = $2 \
                                    WHERE i.tenant_id = o.tenant_id AND i.op_id = o.op_id \
                                      AND i.reorged_at IS NULL \
                                      AND i.block_number > f.floor_block))))"
    };
}

/// Whether a retiring wallet has gone quiet: none of the attempts of the operations whose original
/// it signed (tenant $1, network $2, sender $3), originals and their replacements alike, was
/// persisted less than $5 seconds ago. Only the signer writes these rows (and none changes), so no
/// other login can make a wallet look quiet. A `WHERE` condition on `signer_wallets`.
macro_rules! quiet_sender {
    () => {
        "NOT EXISTS (SELECT 1 FROM tx_attempts o JOIN tx_attempts a USING (tenant_id, op_id) \
           WHERE o.tenant_id = $1 AND o.network = $2 AND o.sender = $3 AND o.kind = 'ORIGINAL' \
             AND a.created_at > now() - make_interval(secs => $5))"
    };
}

/// When a retiring wallet may retire, besides none of its operations being in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetireAfter {
    /// A CONFIRMED withdrawal keeps its wallet at least this long after its confirmation. Read
    /// from the operation row, which other logins write: it only ever keeps a wallet longer.
    pub grace: Duration,
    /// The wallet is kept at least this long after the latest attempt of any of its operations
    /// was signed, whatever the other rows say: read only from rows the signer writes, it bounds
    /// how early any other login (the broadcaster's, through the reorganization floors,
    /// inclusions and confirmation times it writes) could make the wallet retire.
    pub quiet: Duration,
}

impl From<Duration> for RetireAfter {
    /// `grace` for both: kept that long after a confirmation, and after its latest signature.
    fn from(grace: Duration) -> RetireAfter {
        RetireAfter {
            grace,
            quiet: grace,
        }
    }
}

impl Store {
    /// Registers the signer's wallets, in one transaction: a wallet registered ACTIVE demotes any
    /// other ACTIVE wallet of its tenant and network to RETIRING (a rotation), and a RETIRING one
    /// is recorded as such. Rows of wallets this signer no longer holds are left as they are.
    /// A rotation is never undone by a start: a wallet the registry holds as RETIRING or RETIRED
    /// registered ACTIVE (a signer restarted with a configuration from before the rotation) is
    /// [`StoreError::WalletRotatedOut`], and nothing is registered.
    pub async fn register_wallets(&self, wallets: &[Registration]) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        // Retiring ones first, so that the ACTIVE ones never meet the one-active index twice.
        let mut ordered: Vec<&Registration> = wallets.iter().collect();
        ordered.sort_by_key(|w| w.status == WalletStatus::Active);
        for wallet in ordered {
            if wallet.status == WalletStatus::Active {
                let rotated_out: Option<(String,)> = sqlx::query_as(
                    "SELECT status FROM signer_wallets \
                     WHERE tenant_id = $1 AND network = $2 AND sender = $3 \
                       AND status IN ('RETIRING', 'RETIRED') FOR UPDATE",
                )
                .bind(wallet.tenant_id.as_uuid())
                .bind(&wallet.network)
                .bind(&wallet.sender)
                .fetch_optional(&mut *tx)
                .await?;
                if rotated_out.is_some() {
                    return Err(StoreError::WalletRotatedOut);
                }
                sqlx::query(
                    "UPDATE signer_wallets SET status = 'RETIRING', updated_at = now() \
                     WHERE tenant_id = $1 AND network = $2 AND sender <> $3 AND status = 'ACTIVE'",
                )
                .bind(wallet.tenant_id.as_uuid())
                .bind(&wallet.network)
                .bind(&wallet.sender)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query(
                "INSERT INTO signer_wallets (tenant_id, network, sender, status) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id, network, sender) \
                 DO UPDATE SET status = excluded.status, updated_at = now() \
                 WHERE signer_wallets.status <> excluded.status",
            )
            .bind(wallet.tenant_id.as_uuid())
            .bind(&wallet.network)
            .bind(&wallet.sender)
            .bind(wallet.status.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Operations of `tenant_id` whose original attempt `sender` signed on `network` and that are
    /// still in flight: not yet CONFIRMED nor ended without a payout (SIGNED, BROADCAST, UNKNOWN,
    /// FAILED_TERMINAL), or CONFIRMED less than `grace` ago or above the chain watcher's
    /// reorganization floor (a reorganization within its window may still reopen it). A retiring
    /// wallet retires once this is zero.
    pub async fn in_flight_of_sender(
        &self,
        tenant_id: TenantId,
        network: &str,
        sender: &str,
        grace: Duration,
    ) -> Result<u64> {
        let (count,): (i64,) = sqlx::query_as(concat!("SELECT count(*) ", in_flight_of_sender!()))
            .bind(tenant_id.as_uuid())
            .bind(network)
            .bind(sender)
            .bind(grace.as_secs_f64())
            .fetch_one(&self.pool)
            .await?;
        u64::try_from(count).map_err(|_| StoreError::Corrupt { what: "count" })
    }

    /// RETIRING -> RETIRED for the wallet `sender` of `tenant_id` on `network`, in one statement
    /// and only when none of its operations is in flight ([`Store::in_flight_of_sender`] with
    /// `after.grace` is zero; no original can be added meanwhile: only an ACTIVE wallet signs one)
    /// and none of their attempts was signed less than `after.quiet` ago: true when the row is
    /// RETIRED now (by this call, or by an earlier one whose answer was lost). The signer drops
    /// the key only after this returned true.
    pub async fn retire_wallet(
        &self,
        tenant_id: TenantId,
        network: &str,
        sender: &str,
        after: impl Into<RetireAfter>,
    ) -> Result<bool> {
        let after = after.into();
        let retired = sqlx::query(concat!(
            "UPDATE signer_wallets SET status = 'RETIRED', updated_at = now() \
             WHERE tenant_id = $1 AND network = $2 AND sender = $3 \
               AND status IN ('RETIRING', 'RETIRED') AND ",
            quiet_sender!(),
            " AND NOT EXISTS (SELECT 1 ",
            in_flight_of_sender!(),
            ")"
        ))
        .bind(tenant_id.as_uuid())
        .bind(network)
        .bind(sender)
        .bind(after.grace.as_secs_f64())
        .bind(after.quiet.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(retired == 1)
    }
}
