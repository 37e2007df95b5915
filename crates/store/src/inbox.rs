//! The webhook inbox: endpoints and their keys, verified deliveries recorded together with their
//! work item in one transaction, the processor's claim-apply-finish transaction (including the
//! watch hints it records), dead letters, and the retention job.
//!
//! This module stores what the ingress verified; it never verifies, decrypts or parses (that is
//! `opledger-webhook`, in the service). Bodies arrive here sealed.

use crate::credits::{self, CreditKind, DepositEvidence, NewProposal, Proposed};
use crate::transition::{TransitionRequest, Transitioned, transition_in};
use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::amount::Amount;
use opledger_domain::evidence::StoredKind;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{AccountName, AssetCode};
use opledger_domain::state::OperationState;
use sqlx::{PgConnection, Postgres, Transaction};
use std::time::Duration;

/// How many of the oldest due items name the tenants a claim tries, in order. More than the
/// processors that can hold a claim at once, so that some candidate is always unlocked.
const CLAIM_CANDIDATES: i64 = 128;

/// A body sealed by the ingress (AEAD): which key, the nonce and the ciphertext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedBody {
    /// Id of the key that sealed it.
    pub key_id: i16,
    /// The AEAD nonce.
    pub nonce: Vec<u8>,
    /// Ciphertext with its tag.
    pub ciphertext: Vec<u8>,
}

/// How an endpoint key verifies signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// Standard Webhooks `v1`: HMAC-SHA256 with a shared secret (stored sealed).
    Hmac,
    /// Standard Webhooks `v1a`: an Ed25519 public key (stored as is).
    Ed25519,
}

impl SecretKind {
    fn as_str(self) -> &'static str {
        match self {
            SecretKind::Hmac => "hmac",
            SecretKind::Ed25519 => "ed25519",
        }
    }
}

/// One active verification key of an endpoint.
#[derive(Debug, Clone)]
pub struct StoredSecret {
    /// Its id (for retirement).
    pub secret_id: i64,
    /// The kind.
    pub kind: SecretKind,
    /// For HMAC: the secret, sealed with the endpoint id as associated data. For Ed25519: `None`.
    pub sealed: Option<SealedBody>,
    /// For Ed25519: the 32-byte public key. Empty for HMAC (the material is in `sealed`).
    pub public_key: Vec<u8>,
}

/// A new verification key for an endpoint.
#[derive(Debug, Clone)]
pub enum NewSecret {
    /// An HMAC secret, already sealed by the caller with the endpoint id as associated data.
    Hmac(SealedBody),
    /// An Ed25519 public key (32 bytes).
    Ed25519(Vec<u8>),
}

/// A webhook endpoint with its active keys.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `whe_` + 32 hex digits; the last path segment of its URL.
    pub endpoint_id: String,
    /// The tenant it belongs to: the only source of tenancy for what arrives on it.
    pub tenant_id: TenantId,
    /// The provider label (first path segment).
    pub source: String,
    /// Event types this provider may send; anything else is stored UNHANDLED.
    pub allowed_types: Vec<String>,
    /// Active keys (any may verify: rotation).
    pub secrets: Vec<StoredSecret>,
}

/// What kind of delivery the ingress verified.
#[derive(Debug, Clone, Copy)]
pub enum DeliveryClass<'a> {
    /// A known event type this endpoint may send: recorded with a work item.
    Event {
        /// The event type.
        event_type: &'a str,
        /// The operation it is about, if any (for waking parked items).
        op_id: Option<OperationId>,
    },
    /// Unknown type, unexpected schema or a type this endpoint may not send: stored, never applied.
    Unhandled {
        /// The declared type, if any (at most 64 characters).
        event_type: Option<&'a str>,
        /// A machine code (`unknown_type`, `schema`, `type_not_allowed`).
        reason: &'a str,
    },
}

impl DeliveryClass<'_> {
    /// The inbox row's `event_type`, `kind`, `unhandled_reason` and the work item's `op_id`.
    fn columns(&self) -> (Option<&str>, &'static str, Option<&str>, Option<uuid::Uuid>) {
        match *self {
            DeliveryClass::Event { event_type, op_id } => {
                (Some(event_type), "EVENT", None, op_id.map(|o| o.as_uuid()))
            }
            DeliveryClass::Unhandled { event_type, reason } => {
                (event_type, "UNHANDLED", Some(reason), None)
            }
        }
    }
}

/// A verified delivery to record.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The endpoint it arrived on.
    pub endpoint: &'a Endpoint,
    /// The sender's event id (`webhook-id`).
    pub event_id: &'a str,
    /// SHA-256 of the raw body.
    pub body_hash: [u8; 32],
    /// The sender's timestamp (`webhook-timestamp`).
    pub sent_at: DateTime<Utc>,
    /// The raw body, sealed with the tenant, source and event id as associated data.
    pub body: &'a SealedBody,
    /// What it is.
    pub class: DeliveryClass<'a>,
    /// The `v1a` signature that verified it, kept so that a third party can verify the delivery
    /// again (`opledger_webhook::Verified::signature`); `None` for `v1`.
    pub signature: Option<&'a [u8; 64]>,
}

/// What recording a delivery did; every variant is committed and may be acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// New event, recorded with its work item.
    Accepted {
        /// Its inbox row.
        inbox_id: i64,
    },
    /// New, stored as UNHANDLED (no work item).
    Unhandled {
        /// Its inbox row.
        inbox_id: i64,
    },
    /// The same event id with the same body was recorded before: nothing new.
    Duplicate {
        /// The existing row.
        inbox_id: i64,
    },
    /// The same event id with a different body: quarantined, never applied.
    Quarantined {
        /// The original row.
        inbox_id: i64,
        /// False when this very body was already quarantined.
        first_time: bool,
    },
}

/// The recording statement: inbox row and work item in one statement, nothing on a duplicate id.
/// `$1` tenant, `$2` source, `$3` event id, `$4` endpoint, `$5` body hash, `$6` event type,
/// `$7` kind, `$8` unhandled reason, `$9` sent at, `$10` key id, `$11` nonce, `$12` ciphertext,
/// `$13` operation id, `$14` the `v1a` signature. Public so the benchmark runs the exact same SQL
/// through pgbench.
pub const RECORD_DELIVERY_SQL: &str = "WITH ev AS ( \
       INSERT INTO inbox_events (tenant_id, source, event_id, endpoint_id, body_hash, event_type, \
         kind, unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, signature) \
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $14) \
       ON CONFLICT (tenant_id, source, event_id) DO NOTHING RETURNING inbox_id), \
     work AS ( \
       INSERT INTO inbox_work (inbox_id, tenant_id, op_id) \
       SELECT inbox_id, $1, $13 FROM ev WHERE $7 = 'EVENT') \
     SELECT inbox_id FROM ev";

/// [`RECORD_DELIVERY_SQL`] for several deliveries in one statement (so one transaction and one
/// commit): arrays of the same columns, one element per delivery, plus its position (`$14`) and
/// signature (`$15`).
/// Rows are inserted in key order (two concurrent batches lock the same keys in the same order)
/// and the positions of the new rows are returned; a known event id returns nothing for its
/// position.
pub const RECORD_DELIVERIES_SQL: &str = "WITH input AS ( \
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::bytea[], \
         $6::text[], $7::text[], $8::text[], $9::timestamptz[], $10::int2[], $11::bytea[], \
         $12::bytea[], $13::uuid[], $14::int4[], $15::bytea[]) \
       AS i (tenant_id, source, event_id, endpoint_id, body_hash, event_type, kind, \
         unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, op_id, position, \
         signature)), \
     ev AS ( \
       INSERT INTO inbox_events (tenant_id, source, event_id, endpoint_id, body_hash, event_type, \
         kind, unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, signature) \
       SELECT tenant_id, source, event_id, endpoint_id, body_hash, event_type, kind, \
         unhandled_reason, sent_at, body_key_id, body_nonce, body_ciphertext, signature \
       FROM input ORDER BY tenant_id, source, event_id \
       ON CONFLICT (tenant_id, source, event_id) DO NOTHING \
       RETURNING inbox_id, tenant_id, source, event_id), \
     found AS ( \
       SELECT i.position, i.kind, i.op_id, ev.inbox_id, ev.tenant_id \
       FROM ev JOIN input i USING (tenant_id, source, event_id)), \
     work AS ( \
       INSERT INTO inbox_work (inbox_id, tenant_id, op_id) \
       SELECT inbox_id, tenant_id, op_id FROM found WHERE kind = 'EVENT') \
     SELECT position, inbox_id FROM found";

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

/// A fresh endpoint id (`whe_` + 32 hex digits): minted before the endpoint exists, because its
/// HMAC secret is sealed with the id as associated data.
pub fn new_endpoint_id() -> String {
    let bytes: [u8; 16] = rand::random();
    format!("whe_{}", hex::encode(bytes))
}

async fn insert_secret(
    conn: &mut PgConnection,
    endpoint_id: &str,
    secret: &NewSecret,
) -> Result<i64> {
    let (kind, key_id, nonce, material) = match secret {
        NewSecret::Hmac(s) => (
            SecretKind::Hmac,
            Some(s.key_id),
            Some(s.nonce.as_slice()),
            s.ciphertext.as_slice(),
        ),
        NewSecret::Ed25519(k) => (SecretKind::Ed25519, None, None, k.as_slice()),
    };
    let (id,): (i64,) = sqlx::query_as(
        "INSERT INTO webhook_secrets (endpoint_id, kind, key_id, nonce, material) \
         VALUES ($1, $2, $3, $4, $5) RETURNING secret_id",
    )
    .bind(endpoint_id)
    .bind(kind.as_str())
    .bind(key_id)
    .bind(nonce)
    .bind(material)
    .fetch_one(&mut *conn)
    .await?;
    Ok(id)
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
    pub kind: StoredKind,
}

fn stored_kind(kind: &str) -> Result<StoredKind> {
    match kind {
        "ORIGINAL" => Ok(StoredKind::Original),
        "FEE_BUMP" => Ok(StoredKind::FeeBump),
        "CANCEL" => Ok(StoredKind::Cancel),
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
    tx: Transaction<'static, Postgres>,
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
        row.map(|(state, version)| {
            state
                .parse()
                .map(|s| (s, version))
                .map_err(|_| StoreError::Corrupt { what: "state" })
        })
        .transpose()
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

/// One item an operator must look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxIssue {
    /// The inbox row (the handle for replay and resolve).
    pub inbox_id: i64,
    /// DEAD_LETTER, QUARANTINED or UNHANDLED.
    pub kind: &'static str,
    /// Provider label.
    pub source: String,
    /// Declared event type, if any.
    pub event_type: Option<String>,
    /// When it arrived (for a quarantine: the conflicting body).
    pub received_at: DateTime<Utc>,
    /// Owning team (dead letters).
    pub owner: Option<String>,
    /// Machine reason code.
    pub reason: String,
    /// Processing attempts (dead letters).
    pub attempts: i32,
}

/// Gauges of the inbox for the metrics endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InboxSnapshot {
    /// Work items due or waiting.
    pub pending: i64,
    /// Work items parked on an operation's state.
    pub parked: i64,
    /// Unresolved dead letters.
    pub dead: i64,
    /// Unresolved quarantined bodies.
    pub quarantined: i64,
    /// Unresolved UNHANDLED events.
    pub unhandled: i64,
    /// Age in seconds of the oldest unresolved dead letter, quarantine or unhandled event.
    pub oldest_unresolved_secs: f64,
}

/// Bodies purged by one retention pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    /// Bodies of processed events and of resolved or old unhandled events.
    pub events: u64,
    /// Quarantined bodies.
    pub quarantined: u64,
}

impl Store {
    /// Creates endpoint `endpoint_id` (from [`new_endpoint_id`]; the caller sealed the first HMAC
    /// secret with that id as associated data) for `tenant_id` with its first key; returns the
    /// key's id. Owner role.
    pub async fn create_webhook_endpoint_with_id(
        &self,
        endpoint_id: &str,
        tenant_id: TenantId,
        source: &str,
        allowed_types: &[String],
        first: &NewSecret,
    ) -> Result<i64> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO webhook_endpoints (endpoint_id, tenant_id, source, allowed_types) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(endpoint_id)
        .bind(tenant_id.as_uuid())
        .bind(source)
        .bind(allowed_types)
        .execute(&mut *tx)
        .await?;
        let id = insert_secret(&mut tx, endpoint_id, first).await?;
        tx.commit().await?;
        Ok(id)
    }

    /// Adds a key to an endpoint (rotation: both verify until the old one is retired).
    pub async fn add_webhook_secret(&self, endpoint_id: &str, secret: &NewSecret) -> Result<i64> {
        let mut conn = self.pool.acquire().await?;
        insert_secret(&mut conn, endpoint_id, secret).await
    }

    /// Retires a key; false when it was not active on that endpoint.
    pub async fn retire_webhook_secret(&self, endpoint_id: &str, secret_id: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE webhook_secrets SET retired_at = now() \
             WHERE endpoint_id = $1 AND secret_id = $2 AND retired_at IS NULL",
        )
        .bind(endpoint_id)
        .bind(secret_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done == 1)
    }

    /// The enabled endpoint with this id and its active keys.
    pub async fn webhook_endpoint(&self, endpoint_id: &str) -> Result<Option<Endpoint>> {
        let row: Option<(uuid::Uuid, String, Vec<String>)> = sqlx::query_as(
            "SELECT tenant_id, source, allowed_types FROM webhook_endpoints \
             WHERE endpoint_id = $1 AND disabled_at IS NULL",
        )
        .bind(endpoint_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some((tenant, source, allowed_types)) = row else {
            return Ok(None);
        };
        type SecretRow = (i64, String, Option<i16>, Option<Vec<u8>>, Vec<u8>);
        let rows: Vec<SecretRow> = sqlx::query_as(
            "SELECT secret_id, kind, key_id, nonce, material FROM webhook_secrets \
             WHERE endpoint_id = $1 AND retired_at IS NULL ORDER BY secret_id",
        )
        .bind(endpoint_id)
        .fetch_all(&self.pool)
        .await?;
        let mut secrets = Vec::with_capacity(rows.len());
        for (secret_id, kind, key_id, nonce, material) in rows {
            secrets.push(match (kind.as_str(), key_id, nonce) {
                ("hmac", Some(key_id), Some(nonce)) => StoredSecret {
                    secret_id,
                    kind: SecretKind::Hmac,
                    sealed: Some(SealedBody {
                        key_id,
                        nonce,
                        ciphertext: material,
                    }),
                    public_key: Vec::new(),
                },
                ("ed25519", None, None) => StoredSecret {
                    secret_id,
                    kind: SecretKind::Ed25519,
                    sealed: None,
                    public_key: material,
                },
                _ => {
                    return Err(StoreError::Corrupt {
                        what: "webhook secret",
                    });
                }
            });
        }
        Ok(Some(Endpoint {
            endpoint_id: endpoint_id.to_owned(),
            tenant_id: TenantId::from_uuid(tenant),
            source,
            allowed_types,
            secrets,
        }))
    }

    /// Records a verified delivery: inbox row and work item in one statement (one transaction);
    /// on a known event id compares body hashes (duplicate, or quarantine of the different body).
    /// Returns only after commit: any error means nothing was acknowledged.
    pub async fn record_delivery(&self, delivery: &Delivery<'_>) -> Result<Recorded> {
        let endpoint = delivery.endpoint;
        let (event_type, kind, reason, op_id) = delivery.class.columns();
        // A new event is one statement, so one round trip: the inbox row and its work item commit
        // together or not at all (a single statement is its own transaction).
        opledger_failpoint::hit("webhook.before_commit");
        let inserted: Option<(i64,)> = sqlx::query_as(RECORD_DELIVERY_SQL)
            .bind(endpoint.tenant_id.as_uuid())
            .bind(&endpoint.source)
            .bind(delivery.event_id)
            .bind(&endpoint.endpoint_id)
            .bind(delivery.body_hash.as_slice())
            .bind(event_type)
            .bind(kind)
            .bind(reason)
            .bind(delivery.sent_at)
            .bind(delivery.body.key_id)
            .bind(delivery.body.nonce.as_slice())
            .bind(delivery.body.ciphertext.as_slice())
            .bind(op_id)
            .bind(delivery.signature.map(|s| s.as_slice()))
            .fetch_optional(&self.pool)
            .await?;
        let recorded = match inserted {
            Some((inbox_id,)) if kind == "EVENT" => Recorded::Accepted { inbox_id },
            Some((inbox_id,)) => Recorded::Unhandled { inbox_id },
            // A known event id: compare bodies; a different one is quarantined (idempotent too).
            None => self.record_repeat(delivery).await?,
        };
        opledger_failpoint::hit("webhook.after_commit");
        Ok(recorded)
    }

    /// [`Store::record_delivery`] for several deliveries with ONE statement and commit: the new
    /// ones are inserted together (inbox rows and work items), then each known event id is
    /// compared with what is stored (duplicate or quarantine), and a second delivery of an event
    /// id within the same call is a repeat of the first. Returns one result per delivery, in
    /// order, only after commit: on any error nothing of the statement was committed.
    pub async fn record_deliveries(&self, deliveries: &[Delivery<'_>]) -> Result<Vec<Recorded>> {
        let mut seen = std::collections::HashSet::new();
        // Only the first delivery of each event id goes into the statement.
        let first: Vec<bool> = deliveries
            .iter()
            .map(|d| seen.insert((d.endpoint.tenant_id, &d.endpoint.source, d.event_id)))
            .collect();
        let mut columns = DeliveryColumns::default();
        for (i, delivery) in deliveries.iter().enumerate().filter(|(i, _)| first[*i]) {
            columns.push(i, delivery)?;
        }
        opledger_failpoint::hit("webhook.before_commit");
        let c = columns; // moved into the binds, column by column
        let inserted: Vec<(i32, i64)> = sqlx::query_as(RECORD_DELIVERIES_SQL)
            .bind(c.tenant_id)
            .bind(c.source)
            .bind(c.event_id)
            .bind(c.endpoint_id)
            .bind(c.body_hash)
            .bind(c.event_type)
            .bind(c.kind)
            .bind(c.reason)
            .bind(c.sent_at)
            .bind(c.key_id)
            .bind(c.nonce)
            .bind(c.ciphertext)
            .bind(c.op_id)
            .bind(c.position)
            .bind(c.signature)
            .fetch_all(&self.pool)
            .await?;
        opledger_failpoint::hit("webhook.after_commit");
        let mut recorded: Vec<Option<Recorded>> = vec![None; deliveries.len()];
        for (position, inbox_id) in inserted {
            let i = usize::try_from(position).map_err(|_| StoreError::Corrupt { what: "batch" })?;
            let new = match deliveries.get(i).map(|d| d.class) {
                Some(DeliveryClass::Event { .. }) => Recorded::Accepted { inbox_id },
                Some(DeliveryClass::Unhandled { .. }) => Recorded::Unhandled { inbox_id },
                None => return Err(StoreError::Corrupt { what: "batch" }),
            };
            recorded[i] = Some(new);
        }
        let mut out = Vec::with_capacity(deliveries.len());
        for (delivery, done) in deliveries.iter().zip(recorded) {
            out.push(match done {
                Some(done) => done,
                // A known event id (stored earlier, or earlier in this call).
                None => self.record_repeat(delivery).await?,
            });
        }
        Ok(out)
    }

    async fn record_repeat(&self, delivery: &Delivery<'_>) -> Result<Recorded> {
        let endpoint = delivery.endpoint;
        let (inbox_id, stored_hash): (i64, Vec<u8>) = sqlx::query_as(
            "SELECT inbox_id, body_hash FROM inbox_events \
             WHERE tenant_id = $1 AND source = $2 AND event_id = $3",
        )
        .bind(endpoint.tenant_id.as_uuid())
        .bind(&endpoint.source)
        .bind(delivery.event_id)
        .fetch_one(&self.pool)
        .await?;
        if stored_hash == delivery.body_hash {
            return Ok(Recorded::Duplicate { inbox_id });
        }
        let new = sqlx::query(
            "INSERT INTO inbox_quarantine (inbox_id, tenant_id, body_hash, \
               body_key_id, body_nonce, body_ciphertext) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (tenant_id, inbox_id, body_hash) DO NOTHING",
        )
        .bind(inbox_id)
        .bind(endpoint.tenant_id.as_uuid())
        .bind(delivery.body_hash.as_slice())
        .bind(delivery.body.key_id)
        .bind(delivery.body.nonce.as_slice())
        .bind(delivery.body.ciphertext.as_slice())
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(Recorded::Quarantined {
            inbox_id,
            first_time: new == 1,
        })
    }

    /// Counts a refused request (bad signature, unknown endpoint) in this minute's row of
    /// `webhook_rejection_counts` for its tenant, source label, endpoint id prefix and reason:
    /// minimal metadata, and a bounded number of rows however many requests are refused (labels
    /// and prefixes naming no known endpoint are capped per minute, the rest count as `other`).
    pub async fn record_webhook_rejection(
        &self,
        tenant_id: Option<TenantId>,
        source: &str,
        endpoint_id_prefix: &str,
        reason: &str,
    ) -> Result<()> {
        sqlx::query("SELECT opledger_count_rejection($1, $2, $3, $4)")
            .bind(tenant_id.map(|t| t.as_uuid()))
            .bind(source)
            .bind(endpoint_id_prefix)
            .bind(reason)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

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

    /// Claims the next due item (many processors are safe: `SKIP LOCKED`) in a transaction that
    /// will carry its effects; `None` when nothing is due.
    ///
    /// Every claim stays within one tenant, so that a tenant-distributed deployment routes it to
    /// one shard (docs/distribution.md): first the tenants of the oldest due items, oldest first
    /// (a read without locks), then, tenant by tenant, that tenant's oldest due item not locked
    /// by another processor. The order across tenants is the same as before, oldest due item
    /// first.
    pub async fn claim_work(&self) -> Result<Option<WorkTx>> {
        let tenants: Vec<(uuid::Uuid,)> = sqlx::query_as(
            "SELECT tenant_id FROM ( \
               SELECT tenant_id, due_at, inbox_id FROM inbox_work \
               WHERE status = 'PENDING' AND due_at <= now() \
               ORDER BY due_at, inbox_id LIMIT $1) oldest \
             GROUP BY tenant_id ORDER BY min(due_at), min(inbox_id)",
        )
        .bind(CLAIM_CANDIDATES)
        .fetch_all(&self.pool)
        .await?;
        for (tenant,) in tenants {
            if let Some(work) = self.claim_work_of(tenant).await? {
                return Ok(Some(work));
            }
        }
        Ok(None)
    }

    /// Claims the tenant's oldest due item that no other processor holds.
    async fn claim_work_of(&self, tenant: uuid::Uuid) -> Result<Option<WorkTx>> {
        let mut tx = self.pool.begin().await?;
        type Row = (
            i64,
            uuid::Uuid,
            String,
            String,
            i32,
            Option<i16>,
            Option<Vec<u8>>,
            Option<Vec<u8>>,
            i64,
            Option<Vec<u8>>,
        );
        let row: Option<Row> = sqlx::query_as(
            "SELECT w.inbox_id, w.tenant_id, e.source, e.event_id, w.attempts, \
               e.body_key_id, e.body_nonce, e.body_ciphertext, \
               extract(epoch FROM e.sent_at)::int8 AS sent_at, e.signature \
             FROM inbox_work w \
             JOIN inbox_events e ON e.tenant_id = w.tenant_id AND e.inbox_id = w.inbox_id \
             WHERE w.tenant_id = $1 AND w.status = 'PENDING' AND w.due_at <= now() \
             ORDER BY w.due_at, w.inbox_id LIMIT 1 FOR UPDATE OF w SKIP LOCKED",
        )
        .bind(tenant)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((
            inbox_id,
            tenant,
            source,
            event_id,
            attempts,
            key_id,
            nonce,
            ciphertext,
            sent_at,
            signature,
        )) = row
        else {
            tx.rollback().await?;
            return Ok(None);
        };
        let body = match (key_id, nonce, ciphertext) {
            (Some(key_id), Some(nonce), Some(ciphertext)) => Some(SealedBody {
                key_id,
                nonce,
                ciphertext,
            }),
            _ => None,
        };
        Ok(Some(WorkTx {
            tx,
            item: WorkItem {
                inbox_id,
                tenant_id: TenantId::from_uuid(tenant),
                source,
                event_id,
                attempts,
                body,
                sent_at,
                signature,
            },
        }))
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

    /// Dead letters, quarantined bodies and UNHANDLED events of a tenant that nobody resolved yet,
    /// oldest first.
    pub async fn inbox_issues(&self, tenant_id: TenantId, limit: u32) -> Result<Vec<InboxIssue>> {
        type Row = (
            i64,
            String,
            String,
            Option<String>,
            DateTime<Utc>,
            Option<String>,
            Option<String>,
            i32,
        );
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT * FROM ( \
               SELECT w.inbox_id, 'DEAD_LETTER' AS kind, e.source, e.event_type, e.received_at, \
                 w.owner, COALESCE(w.outcome, w.last_error) AS reason, w.attempts \
               FROM inbox_work w \
               JOIN inbox_events e ON e.tenant_id = w.tenant_id AND e.inbox_id = w.inbox_id \
               WHERE w.tenant_id = $1 AND w.status = 'DEAD' \
               UNION ALL \
               SELECT q.inbox_id, 'QUARANTINED', e.source, e.event_type, q.received_at, NULL, \
                 'DIFFERENT_BODY', 0 \
               FROM inbox_quarantine q \
               JOIN inbox_events e ON e.tenant_id = q.tenant_id AND e.inbox_id = q.inbox_id \
               WHERE q.tenant_id = $1 AND q.resolved_at IS NULL \
               UNION ALL \
               SELECT inbox_id, 'UNHANDLED', source, event_type, received_at, NULL, \
                 upper(unhandled_reason), 0 \
               FROM inbox_events WHERE tenant_id = $1 AND kind = 'UNHANDLED' AND resolved_at IS NULL \
             ) issues ORDER BY received_at, inbox_id LIMIT $2",
        )
        .bind(tenant_id.as_uuid())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(
                |(inbox_id, kind, source, event_type, received_at, owner, reason, attempts)| {
                    InboxIssue {
                        inbox_id,
                        kind: match kind.as_str() {
                            "DEAD_LETTER" => "DEAD_LETTER",
                            "QUARANTINED" => "QUARANTINED",
                            _ => "UNHANDLED",
                        },
                        source,
                        event_type,
                        received_at,
                        owner,
                        reason: reason.unwrap_or_default(),
                        attempts,
                    }
                },
            )
            .collect())
    }

    /// Puts a dead letter back to PENDING with fresh attempts, logging who and why.
    pub async fn replay_dead_letter(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let done = sqlx::query(
            "UPDATE inbox_work SET status = 'PENDING', attempts = 0, due_at = now(), \
               updated_at = now() \
             WHERE tenant_id = $1 AND inbox_id = $2 AND status = 'DEAD'",
        )
        .bind(tenant_id.as_uuid())
        .bind(inbox_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if done != 1 {
            return Err(StoreError::NotFound {
                what: "dead letter",
            });
        }
        log_action(&mut tx, tenant_id, inbox_id, "REPLAY", actor_id, reason).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Resolves an inbox issue by hand (dead letter, quarantine or UNHANDLED event), logging who
    /// and why. Nothing is applied or deleted: the issue stops paging.
    pub async fn resolve_inbox_issue(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let tenant = tenant_id.as_uuid();
        let dead = sqlx::query(
            "UPDATE inbox_work SET status = 'RESOLVED', updated_at = now() \
             WHERE tenant_id = $1 AND inbox_id = $2 AND status = 'DEAD'",
        )
        .bind(tenant)
        .bind(inbox_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let quarantined = sqlx::query(
            "UPDATE inbox_quarantine SET resolved_at = now(), resolved_by = $3, resolution = $4 \
             WHERE tenant_id = $1 AND inbox_id = $2 AND resolved_at IS NULL",
        )
        .bind(tenant)
        .bind(inbox_id)
        .bind(actor_id)
        .bind(reason)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let unhandled = sqlx::query(
            "UPDATE inbox_events SET resolved_at = now(), resolved_by = $3, resolution = $4 \
             WHERE tenant_id = $1 AND inbox_id = $2 AND kind = 'UNHANDLED' AND resolved_at IS NULL",
        )
        .bind(tenant)
        .bind(inbox_id)
        .bind(actor_id)
        .bind(reason)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if dead + quarantined + unhandled == 0 {
            return Err(StoreError::NotFound {
                what: "unresolved inbox issue",
            });
        }
        log_action(&mut tx, tenant_id, inbox_id, "RESOLVE", actor_id, reason).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The inbox gauges (all tenants).
    pub async fn inbox_snapshot(&self) -> Result<InboxSnapshot> {
        let (pending, parked, dead, quarantined, unhandled, oldest): (
            i64,
            i64,
            i64,
            i64,
            i64,
            Option<f64>,
        ) = sqlx::query_as(
            "SELECT \
               (SELECT count(*) FROM inbox_work WHERE status = 'PENDING'), \
               (SELECT count(*) FROM inbox_work WHERE status = 'PARKED'), \
               (SELECT count(*) FROM inbox_work WHERE status = 'DEAD'), \
               (SELECT count(*) FROM inbox_quarantine WHERE resolved_at IS NULL), \
               (SELECT count(*) FROM inbox_events WHERE kind = 'UNHANDLED' AND resolved_at IS NULL), \
               (SELECT extract(epoch FROM now() - min(t))::float8 FROM ( \
                  SELECT min(updated_at) AS t FROM inbox_work WHERE status = 'DEAD' \
                  UNION ALL SELECT min(received_at) FROM inbox_quarantine WHERE resolved_at IS NULL \
                  UNION ALL SELECT min(received_at) FROM inbox_events \
                    WHERE kind = 'UNHANDLED' AND resolved_at IS NULL) o)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(InboxSnapshot {
            pending,
            parked,
            dead,
            quarantined,
            unhandled,
            oldest_unresolved_secs: oldest.unwrap_or(0.0).max(0.0),
        })
    }

    /// Deletes refused-request counts older than `keep`; returns how many rows went.
    pub async fn purge_rejection_counts(&self, keep: Duration) -> Result<u64> {
        Ok(sqlx::query(
            "DELETE FROM webhook_rejection_counts \
             WHERE minute < now() - $1::float8 * interval '1 second'",
        )
        .bind(keep.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected())
    }

    /// Enforces body retention: processed events' bodies after `processed`; UNHANDLED events'
    /// and quarantined bodies after `quarantined` from arrival. Bodies of pending, parked and dead
    /// work are never purged. Metadata (ids, hashes, times) is kept.
    pub async fn purge_inbox_bodies(
        &self,
        processed: Duration,
        quarantined: Duration,
    ) -> Result<Purged> {
        let events = sqlx::query(
            "UPDATE inbox_events e SET body_key_id = NULL, body_nonce = NULL, \
               body_ciphertext = NULL, body_purged_at = now() \
             WHERE e.body_ciphertext IS NOT NULL AND ( \
               (e.kind = 'EVENT' AND EXISTS (SELECT 1 FROM inbox_work w \
                  WHERE w.tenant_id = e.tenant_id AND w.inbox_id = e.inbox_id \
                    AND w.status IN ('DONE', 'RESOLVED') \
                    AND w.updated_at < now() - $1::float8 * interval '1 second')) \
               OR (e.kind = 'UNHANDLED' AND e.received_at < now() - $2::float8 * interval '1 second'))",
        )
        .bind(processed.as_secs_f64())
        .bind(quarantined.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected();
        let quarantined = sqlx::query(
            "UPDATE inbox_quarantine SET body_key_id = NULL, body_nonce = NULL, \
               body_ciphertext = NULL, body_purged_at = now() \
             WHERE body_ciphertext IS NOT NULL \
               AND received_at < now() - $1::float8 * interval '1 second'",
        )
        .bind(quarantined.as_secs_f64())
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(Purged {
            events,
            quarantined,
        })
    }
}

async fn log_action(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    inbox_id: i64,
    action: &str,
    actor_id: &str,
    reason: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO inbox_actions (tenant_id, inbox_id, action, actor_id, reason) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(tenant_id.as_uuid())
    .bind(inbox_id)
    .bind(action)
    .bind(actor_id)
    .bind(reason)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Deliveries as the column arrays of [`RECORD_DELIVERIES_SQL`].
#[derive(Default)]
struct DeliveryColumns {
    tenant_id: Vec<uuid::Uuid>,
    source: Vec<String>,
    event_id: Vec<String>,
    endpoint_id: Vec<String>,
    body_hash: Vec<Vec<u8>>,
    event_type: Vec<Option<String>>,
    kind: Vec<&'static str>,
    reason: Vec<Option<String>>,
    sent_at: Vec<DateTime<Utc>>,
    key_id: Vec<i16>,
    nonce: Vec<Vec<u8>>,
    ciphertext: Vec<Vec<u8>>,
    op_id: Vec<Option<uuid::Uuid>>,
    position: Vec<i32>,
    signature: Vec<Option<Vec<u8>>>,
}

impl DeliveryColumns {
    fn push(&mut self, position: usize, d: &Delivery<'_>) -> Result<()> {
        let (event_type, kind, reason, op_id) = d.class.columns();
        self.position
            .push(i32::try_from(position).map_err(|_| StoreError::Corrupt { what: "batch" })?);
        self.tenant_id.push(d.endpoint.tenant_id.as_uuid());
        self.source.push(d.endpoint.source.clone());
        self.event_id.push(d.event_id.to_owned());
        self.endpoint_id.push(d.endpoint.endpoint_id.clone());
        self.body_hash.push(d.body_hash.to_vec());
        self.event_type.push(event_type.map(str::to_owned));
        self.kind.push(kind);
        self.reason.push(reason.map(str::to_owned));
        self.sent_at.push(d.sent_at);
        self.key_id.push(d.body.key_id);
        self.nonce.push(d.body.nonce.clone());
        self.ciphertext.push(d.body.ciphertext.clone());
        self.op_id.push(op_id);
        self.signature.push(d.signature.map(|s| s.to_vec()));
        Ok(())
    }
}
