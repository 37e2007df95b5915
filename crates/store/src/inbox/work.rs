//! The processor's work items: the claimed item, the transaction that carries its effects and
//! its end, waking parked items, and failed attempts. (The claim itself is in the module root.)

use super::sealed::SealedBody;
use crate::credits::{self, CreditKind, DepositEvidence, NewProposal, Proposed};
use crate::transition::{TransitionRequest, Transitioned, transition_in};
use crate::{Result, Store, StoreError};
use opledger_domain::amount::Amount;
use opledger_domain::evidence::AttemptKind;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::operation::Executor;
use opledger_domain::payload::{AccountName, AssetCode};
use opledger_domain::state::OperationState;
use sqlx::{Postgres, Transaction};
use std::time::Duration;

/// Domain-separated digest keying a deposit's ledger credit: one credit per (source, deposit id)
/// for a tenant, whatever event carried it.
pub fn deposit_credit_digest(source: &str, deposit_id: &str) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"opledger/deposit-credit/v1\0");
    h.update(source.as_bytes());
    h.update([0]);
    h.update(deposit_id.as_bytes());
    h.finalize().into()
}

/// A work item claimed by the processor, with its event.
#[derive(Debug, Clone)]
pub struct WorkItem {
    /// Inbox row.
    pub inbox_id: i64,
    /// Tenant.
    pub tenant_id: TenantId,
    /// Provider label.
    pub source: String,
    /// Sender's event id.
    pub event_id: String,
    /// Attempts so far (before this one).
    pub attempts: i32,
    /// The sealed body; `None` if it was purged (an item is never purged while pending).
    pub body: Option<SealedBody>,
    /// The sender's timestamp (`webhook-timestamp`), unix seconds.
    pub sent_at: i64,
    /// The `v1a` signature the delivery was verified with, if any.
    pub signature: Option<Vec<u8>>,
    /// The event type the ingress classified it as.
    pub event_type: Option<String>,
    /// The operation the ingress found named in it, if any (for a custodian's status event: our
    /// reference, read from the verified body).
    pub op_id: Option<OperationId>,
}

/// How a claimed item ends this attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish<'a> {
    /// Applied (or found already applied): never run again.
    Done {
        /// What happened, a machine code.
        outcome: &'a str,
    },
    /// Not allowed by the operation's state yet: wait until its version moves past `version`.
    Parked {
        /// The operation version seen.
        version: i64,
        /// Why, a machine code.
        outcome: &'a str,
    },
    /// Cannot be applied without a person: dead letter owned by `owner`.
    Dead {
        /// Owning team.
        owner: &'a str,
        /// A machine code.
        reason: &'a str,
    },
}

/// One signed attempt of an operation as the webhook processor compares it with a webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedAttemptRef {
    /// Its transaction hash, `0x` + lowercase hex.
    pub tx_hash: String,
    /// The kind it is stored as: a transfer (original, fee bump) or a cancel.
    pub kind: AttemptKind,
}

fn stored_kind(kind: &str) -> Result<AttemptKind> {
    match kind {
        "ORIGINAL" => Ok(AttemptKind::Original),
        "FEE_BUMP" => Ok(AttemptKind::FeeBump),
        "CANCEL" => Ok(AttemptKind::Cancel),
        _ => Err(StoreError::Corrupt {
            what: "attempt kind",
        }),
    }
}

/// What a deposit credit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditOutcome {
    /// Proposed now: pending until the witness attests it.
    Proposed,
    /// The same deposit was proposed before with the same account, asset, amount and evidence.
    AlreadyProposed,
    /// The same deposit id was proposed before with different content.
    Conflicting,
}

/// The processor's transaction over one claimed item: effects and the item's end commit together
/// (running an item twice cannot apply it twice). Dropping it without [`WorkTx::finish`] rolls
/// everything back and leaves the item PENDING.
#[derive(Debug)]
pub struct WorkTx {
    pub(super) tx: Transaction<'static, Postgres>,
    /// The claimed item.
    pub item: WorkItem,
}

impl WorkTx {
    /// The operation's state and version (`None` when it does not exist for this tenant).
    pub async fn operation(&mut self, op_id: OperationId) -> Result<Option<(OperationState, i64)>> {
        let row: Option<(String, i64)> = sqlx::query_as(
            "SELECT state, version FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2",
        )
        .bind(self.item.tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&mut *self.tx)
        .await?;
        row.map(|(state, version)| Ok((crate::row::state(&state)?, version)))
            .transpose()
    }

    /// The withdrawal's state, version and executor (`None` when it does not exist for this
    /// tenant).
    pub async fn withdrawal(
        &mut self,
        op_id: OperationId,
    ) -> Result<Option<(OperationState, i64, Executor)>> {
        let row: Option<(String, i64, String)> = sqlx::query_as(
            "SELECT state, version, executor FROM withdrawal_ops \
             WHERE tenant_id = $1 AND op_id = $2",
        )
        .bind(self.item.tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&mut *self.tx)
        .await?;
        row.map(|(state, version, executor)| {
            let executor =
                Executor::parse(&executor).ok_or(StoreError::Corrupt { what: "executor" })?;
            Ok((crate::row::state(&state)?, version, executor))
        })
        .transpose()
    }

    /// Records that the custodian executor should look the withdrawal up at its next pass (a
    /// verified status event of its custodian named it), in this transaction: one row per
    /// withdrawal, a repeat only refreshes `hinted_at` (the database's clock). A hint moves
    /// nothing: no state, no hold, no record. The database refuses it for a withdrawal that is not
    /// a custodian's (migration 35).
    pub async fn record_custodian_hint(&mut self, op_id: OperationId) -> Result<()> {
        sqlx::query(
            "INSERT INTO custodian_hints (tenant_id, op_id) VALUES ($1, $2) \
             ON CONFLICT (tenant_id, op_id) DO UPDATE SET hinted_at = now()",
        )
        .bind(self.item.tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Whether an executor holds the custodian withdrawal's follow lease at this moment (it is
    /// looking the withdrawal up, or sending its request).
    pub async fn custodian_follow_in_progress(&mut self, op_id: OperationId) -> Result<bool> {
        let row: Option<(bool,)> = sqlx::query_as(
            "SELECT leased_until > clock_timestamp() FROM custodian_follows \
             WHERE tenant_id = $1 AND op_id = $2",
        )
        .bind(self.item.tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&mut *self.tx)
        .await?;
        Ok(row.is_some_and(|(held,)| held))
    }

    /// Every signed attempt of the operation, in attempt order: its transaction hash and the kind
    /// it is stored as (the signer checks every kind against the attempt's content).
    pub async fn attempts(&mut self, op_id: OperationId) -> Result<Vec<SignedAttemptRef>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT tx_hash, kind FROM tx_attempts WHERE tenant_id = $1 AND op_id = $2 \
             ORDER BY attempt",
        )
        .bind(self.item.tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_all(&mut *self.tx)
        .await?;
        rows.into_iter()
            .map(|(tx_hash, kind)| {
                Ok(SignedAttemptRef {
                    tx_hash: tx_hash.to_ascii_lowercase(),
                    kind: stored_kind(&kind)?,
                })
            })
            .collect()
    }

    /// Records that the watcher should look at the operation now (a webhook named one of its
    /// transfer attempts), in this transaction: one row per operation, a repeat only refreshes
    /// `hinted_at`. A hint moves nothing: no state, no hold, no inclusion.
    pub async fn record_watch_hint(&mut self, op_id: OperationId) -> Result<()> {
        sqlx::query(
            "INSERT INTO watch_hints (tenant_id, op_id) VALUES ($1, $2) \
             ON CONFLICT (tenant_id, op_id) DO UPDATE SET hinted_at = now()",
        )
        .bind(self.item.tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }

    /// Moves the operation through the one transition function, in this transaction.
    pub async fn transition(&mut self, request: &TransitionRequest<'_>) -> Result<Transitioned> {
        transition_in(&mut self.tx, request).await
    }

    /// Proposes the credit of a confirmed deposit once per (source, deposit id), with its chain
    /// evidence if the provider sent some: the account moves only once the witness attests it
    /// (migration 29).
    pub async fn propose_deposit(
        &mut self,
        deposit_id: &str,
        account: &AccountName,
        asset: &AssetCode,
        amount: Amount,
        evidence: Option<&DepositEvidence>,
    ) -> Result<CreditOutcome> {
        let digest = deposit_credit_digest(&self.item.source, deposit_id);
        let proposal = NewProposal {
            tenant_id: self.item.tenant_id,
            credit_id: &digest,
            account,
            asset,
            amount,
        };
        Ok(
            match credits::propose_in(&mut self.tx, &proposal, CreditKind::Deposit, evidence)
                .await?
            {
                Proposed::New => CreditOutcome::Proposed,
                Proposed::Replayed => CreditOutcome::AlreadyProposed,
                Proposed::Conflicting(_) => CreditOutcome::Conflicting,
            },
        )
    }

    /// Records a KYT screening result on the operation, with the delivery whole (event id,
    /// timestamp, raw `body`, `v1a` signature) when it was signed with `v1a`: the signer counts
    /// only such results. False when this provider reference was already recorded (with any
    /// result: the first one stands).
    pub async fn record_screening(
        &mut self,
        op_id: OperationId,
        provider_ref: &str,
        pass: bool,
        body: &[u8],
    ) -> Result<bool> {
        let signed = self.item.signature.as_deref();
        let inserted = sqlx::query(
            "INSERT INTO kyt_screenings (tenant_id, op_id, source, provider_ref, result, inbox_id, \
               event_id, signed_at, body, signature) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (tenant_id, op_id, source, provider_ref) DO NOTHING",
        )
        .bind(self.item.tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .bind(&self.item.source)
        .bind(provider_ref)
        .bind(if pass { "PASS" } else { "FAIL" })
        .bind(self.item.inbox_id)
        .bind(signed.map(|_| self.item.event_id.as_str()))
        .bind(signed.map(|_| self.item.sent_at))
        .bind(signed.map(|_| body))
        .bind(signed)
        .execute(&mut *self.tx)
        .await?
        .rows_affected();
        Ok(inserted == 1)
    }

    /// Ends this attempt and commits the effects with it.
    pub async fn finish(mut self, finish: Finish<'_>) -> Result<()> {
        let (status, parked, outcome, owner) = match finish {
            Finish::Done { outcome } => ("DONE", None, outcome, None),
            Finish::Parked { version, outcome } => ("PARKED", Some(version), outcome, None),
            Finish::Dead { owner, reason } => ("DEAD", None, reason, Some(owner)),
        };
        sqlx::query(
            "UPDATE inbox_work SET status = $2, parked_version = $3, outcome = $4, \
               owner = COALESCE($5, owner), attempts = attempts + 1, updated_at = now() \
             WHERE tenant_id = $6 AND inbox_id = $1 AND status = 'PENDING'",
        )
        .bind(self.item.inbox_id)
        .bind(status)
        .bind(parked)
        .bind(outcome)
        .bind(owner)
        .bind(self.item.tenant_id.as_uuid())
        .execute(&mut *self.tx)
        .await?;
        opledger_failpoint::hit("inbox.apply_before_commit");
        self.tx.commit().await?;
        Ok(())
    }
}

impl Store {
    /// Makes PARKED items whose operation has moved since they were parked due again.
    pub async fn wake_parked_work(&self) -> Result<u64> {
        Ok(sqlx::query(
            "UPDATE inbox_work w SET status = 'PENDING', parked_version = NULL, due_at = now(), \
               updated_at = now() \
             FROM withdrawal_ops o \
             WHERE w.status = 'PARKED' AND o.tenant_id = w.tenant_id AND o.op_id = w.op_id \
               AND o.version <> w.parked_version",
        )
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// Makes a pending item due again after `retry_in` without counting an attempt (after the
    /// attempt's transaction rolled back): for a wait known to end (`reason`, a machine code).
    pub async fn defer_work(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        reason: &str,
        retry_in: Duration,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE inbox_work SET last_error = $2, updated_at = now(), \
               due_at = now() + $3::float8 * interval '1 second' \
             WHERE tenant_id = $4 AND inbox_id = $1 AND status = 'PENDING'",
        )
        .bind(inbox_id)
        .bind(reason)
        .bind(retry_in.as_secs_f64())
        .bind(tenant_id.as_uuid())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records a failed attempt (after the attempt's transaction rolled back): due again after
    /// `retry_in`, or DEAD owned by `owner` once `max_attempts` is reached. Returns true when the
    /// item became a dead letter.
    pub async fn fail_work(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        error: &str,
        retry_in: Duration,
        max_attempts: i32,
        owner: &str,
    ) -> Result<bool> {
        let row: Option<(String,)> = sqlx::query_as(
            "UPDATE inbox_work SET attempts = attempts + 1, last_error = $2, updated_at = now(), \
               due_at = now() + $3::float8 * interval '1 second', \
               status = CASE WHEN attempts + 1 >= $4 THEN 'DEAD' ELSE 'PENDING' END, \
               owner = CASE WHEN attempts + 1 >= $4 THEN $5 ELSE owner END, \
               outcome = CASE WHEN attempts + 1 >= $4 THEN 'ATTEMPTS_EXHAUSTED' ELSE outcome END \
             WHERE tenant_id = $6 AND inbox_id = $1 AND status = 'PENDING' RETURNING status",
        )
        .bind(inbox_id)
        .bind(error)
        .bind(retry_in.as_secs_f64())
        .bind(max_attempts)
        .bind(owner)
        .bind(tenant_id.as_uuid())
        .fetch_optional(&self.pool)
        .await?;
        Ok(matches!(row, Some((s,)) if s == "DEAD"))
    }
}
