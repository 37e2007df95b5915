//! What the signer reads and writes: the signing input, claims, attempts and nonces.
//!
//! The signer claims an APPROVED operation (APPROVED -> SIGNING with a lease, committed), verifies
//! the payload hash, then in ONE transaction allocates the sender's next nonce, persists the signed
//! attempt and moves the operation to SIGNED. A crash before that commit leaves no attempt and no
//! advanced nonce; the expired lease is reclaimed (SIGNING -> APPROVED) only while no attempt
//! exists, and signing the same transaction with the same nonce again yields the same bytes.

use crate::operations::{Operation, OperationRow, operation_columns};
use crate::shared::record_security_event;
use crate::transition::{LeaseGuard, TransitionRequest, transition_in};
use crate::trust::{SignedScreening, StoredDecision, StoredTrust, trust_from_row};
use crate::{Result, Store, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::PayloadHash;
use opledger_domain::state::{Actor, OperationState};
use sqlx::PgConnection;
use std::time::Duration;

/// Which transaction an attempt is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptKind {
    /// The withdrawal's transfer.
    Original,
    /// Same nonce, recipient and amount, higher fees.
    FeeBump,
    /// A 0-value self-transfer at the same nonce.
    Cancel,
}

impl AttemptKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Original => "ORIGINAL",
            AttemptKind::FeeBump => "FEE_BUMP",
            AttemptKind::Cancel => "CANCEL",
        }
    }

    /// The domain's name of this kind (what its content must be: `StoredKind::check`).
    pub fn stored(self) -> opledger_domain::evidence::StoredKind {
        use opledger_domain::evidence::StoredKind;
        match self {
            AttemptKind::Original => StoredKind::Original,
            AttemptKind::FeeBump => StoredKind::FeeBump,
            AttemptKind::Cancel => StoredKind::Cancel,
        }
    }

    fn parse(s: &str) -> Result<AttemptKind> {
        match s {
            "ORIGINAL" => Ok(AttemptKind::Original),
            "FEE_BUMP" => Ok(AttemptKind::FeeBump),
            "CANCEL" => Ok(AttemptKind::Cancel),
            _ => Err(StoreError::Corrupt {
                what: "attempt kind",
            }),
        }
    }
}

/// A signed transaction to persist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAttempt {
    /// Original, fee bump or cancel.
    pub kind: AttemptKind,
    /// Chain id the transaction is signed for.
    pub chain_id: u64,
    /// Sender address, 0x-prefixed lowercase.
    pub sender: String,
    /// The nonce it uses.
    pub nonce: u64,
    /// 0x-prefixed transaction hash.
    pub tx_hash: String,
    /// EIP-2718 bytes: exactly what may be broadcast.
    pub raw_tx: Vec<u8>,
    /// Gas limit.
    pub gas_limit: u64,
    /// Wei.
    pub max_fee_per_gas: u128,
    /// Wei.
    pub max_priority_fee_per_gas: u128,
}

/// A persisted attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the original, then 2, 3, ...
    pub attempt: u32,
    /// The network it was signed for.
    pub network: String,
    /// The signed transaction.
    pub signed: NewAttempt,
    /// When it was persisted.
    pub created_at: DateTime<Utc>,
    /// True once the signer has seen this attempt's commit acknowledged (the signed-bytes gate,
    /// `docs/serialization.md`): only released attempts may be submitted to a chain. A held-back
    /// attempt read by a worker ([`Store::attempts`]) carries no bytes: `signed.raw_tx` is empty
    /// (the database gives worker roles the bytes of released attempts only).
    pub released: bool,
}

impl Attempt {
    /// What a reader of the chain judges of this attempt: its bytes, stored kind and stored hash.
    pub fn as_stored(&self) -> opledger_domain::evidence::StoredAttempt<'_> {
        opledger_domain::evidence::StoredAttempt {
            raw: &self.signed.raw_tx,
            kind: self.signed.kind.stored(),
            tx_hash: &self.signed.tx_hash,
        }
    }
}

/// What must hold, under the operation's row lock, before a replacement is signed.
#[derive(Debug, Clone, Copy)]
pub struct ReplacementGuard<'a> {
    /// The states the operation may be in.
    pub states: &'a [OperationState],
    /// The least age of the latest attempt (from its `created_at`, by the database clock).
    pub min_age: Duration,
}

/// Why a replacement guard refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardRefusal {
    /// The operation is in a state the guard does not allow.
    State(OperationState),
    /// The latest attempt is younger than the guard's minimum age.
    TooRecent {
        /// Its age.
        age: Duration,
        /// The minimum.
        min_age: Duration,
    },
}

/// Why no replacement was persisted (besides a store failure).
#[derive(Debug)]
pub enum ReplacementError<E> {
    /// The guard refused: nothing was signed.
    Refused(GuardRefusal),
    /// Signing failed.
    Sign(E),
}

/// A sending account: the tenant's hot wallet on one network.
#[derive(Debug, Clone, Copy)]
pub struct Sender<'a> {
    /// The network id.
    pub network: &'a str,
    /// 0x-prefixed lowercase address.
    pub address: &'a str,
    /// The nonce of its first transaction (the account's on-chain nonce when the wallet was put
    /// in service); later nonces come from the store.
    pub initial_nonce: u64,
}

/// An operation claimed for signing (SIGNING under `owner`'s lease), one item of a batch.
#[derive(Debug, Clone, Copy)]
pub struct SignClaim<'a> {
    /// The operation's tenant.
    pub tenant_id: TenantId,
    /// The operation.
    pub op_id: OperationId,
    /// The lease owner that claimed it.
    pub owner: &'a str,
}

/// The operation as the signer must verify it.
#[derive(Debug, Clone)]
pub struct SigningInput {
    /// The stored operation, payload fields included.
    pub operation: Operation,
    /// Every stored decision (approval or rejection) of this operation, as stored: claims whose
    /// signatures the signer verifies.
    pub decisions: Vec<StoredDecision>,
    /// The operation's screening results recorded with a provider's signature, as stored: claims
    /// the signer verifies against the trust statement's KYT keys.
    pub screenings: Vec<SignedScreening>,
    /// The tenant's newest trust statement, as stored.
    pub trust: Option<StoredTrust>,
    /// The newest trust statement version the signer accepted for the tenant before.
    pub trust_seen: Option<u64>,
    /// The current lease owner, if any.
    pub lease_owner: Option<String>,
    /// True when there is no lease or it has expired.
    pub lease_expired: bool,
}

#[derive(sqlx::FromRow)]
struct AttemptRow {
    attempt: i32,
    kind: String,
    network: String,
    chain_id: i64,
    sender: String,
    nonce: i64,
    tx_hash: String,
    /// NULL when read through `released_attempts` while held back.
    raw_tx: Option<Vec<u8>>,
    gas_limit: i64,
    max_fee_per_gas: String,
    max_priority_fee_per_gas: String,
    created_at: DateTime<Utc>,
    released: bool,
}

impl AttemptRow {
    fn into_attempt(self) -> Result<Attempt> {
        let corrupt = |_| StoreError::Corrupt { what: "attempt" };
        // Bytes are missing only while held back; a released attempt always has them.
        let raw_tx = match (self.raw_tx, self.released) {
            (Some(raw), _) => raw,
            (None, false) => Vec::new(),
            (None, true) => return Err(StoreError::Corrupt { what: "attempt" }),
        };
        Ok(Attempt {
            attempt: u32::try_from(self.attempt).map_err(corrupt)?,
            network: self.network,
            signed: NewAttempt {
                kind: AttemptKind::parse(&self.kind)?,
                chain_id: u64::try_from(self.chain_id).map_err(corrupt)?,
                sender: self.sender,
                nonce: u64::try_from(self.nonce).map_err(corrupt)?,
                tx_hash: self.tx_hash,
                raw_tx,
                gas_limit: u64::try_from(self.gas_limit).map_err(corrupt)?,
                max_fee_per_gas: self
                    .max_fee_per_gas
                    .parse()
                    .map_err(|_| StoreError::Corrupt {
                        what: "attempt fee",
                    })?,
                max_priority_fee_per_gas: self.max_priority_fee_per_gas.parse().map_err(|_| {
                    StoreError::Corrupt {
                        what: "attempt fee",
                    }
                })?,
            },
            created_at: self.created_at,
            released: self.released,
        })
    }
}

#[derive(sqlx::FromRow)]
struct KeyedAttemptRow {
    tenant_id: uuid::Uuid,
    op_id: uuid::Uuid,
    #[sqlx(flatten)]
    attempt: AttemptRow,
}

#[derive(sqlx::FromRow)]
struct SigningInputRow {
    #[sqlx(flatten)]
    operation: OperationRow,
    lease_owner: Option<String>,
    lease_expired: bool,
    a_key_ids: Vec<Option<String>>,
    a_decisions: Vec<String>,
    a_versions: Vec<Option<i64>>,
    a_hashes: Vec<Vec<u8>>,
    a_signatures: Vec<Option<Vec<u8>>>,
    a_acks: Vec<String>,
    k_event_ids: Vec<String>,
    k_signed_ats: Vec<i64>,
    k_bodies: Vec<Vec<u8>>,
    k_signatures: Vec<Vec<u8>>,
    trust_version: Option<i64>,
    trust_statement: Option<Vec<u8>>,
    trust_signature: Option<Vec<u8>>,
    trust_seen: Option<i64>,
}

/// An operation's attempts as any service reads them: through `released_attempts`, whose `raw_tx`
/// is NULL while an attempt is held back (worker roles may not read `tx_attempts.raw_tx`).
const SELECT_ATTEMPTS: &str = "SELECT attempt, kind, network, chain_id, sender, nonce, tx_hash, \
     raw_tx, gas_limit, max_fee_per_gas::text AS max_fee_per_gas, \
     max_priority_fee_per_gas::text AS max_priority_fee_per_gas, created_at, released \
     FROM released_attempts WHERE tenant_id = $1 AND op_id = $2 ORDER BY attempt";

/// An operation's attempts with their bytes, held back or not: the signer's login only.
const SELECT_SIGNED_ATTEMPTS: &str = "SELECT a.attempt, kind, network, chain_id, sender, nonce, \
     tx_hash, raw_tx, gas_limit, max_fee_per_gas::text AS max_fee_per_gas, \
     max_priority_fee_per_gas::text AS max_priority_fee_per_gas, created_at, \
     r.released_at IS NOT NULL AS released \
     FROM tx_attempts a LEFT JOIN attempt_releases r USING (tenant_id, op_id, attempt) \
     WHERE a.tenant_id = $1 AND a.op_id = $2 ORDER BY a.attempt";

impl Store {
    /// The operation, its approvals' hashes and its lease, or `None` for another tenant's or a
    /// missing operation.
    pub async fn signing_input(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Option<SigningInput>> {
        // One round trip: the operation, its lease, every stored decision, its signed screening
        // results, the tenant's newest trust statement and the newest version this signer
        // accepted before.
        let row: Option<SigningInputRow> = sqlx::query_as(concat!(
            "SELECT ",
            operation_columns!(),
            ", o.lease_owner, coalesce(o.lease_expires_at <= now(), true) AS lease_expired, \
             d.a_key_ids, d.a_decisions, d.a_versions, d.a_hashes, d.a_signatures, d.a_acks, \
             ks.k_event_ids, ks.k_signed_ats, ks.k_bodies, ks.k_signatures, \
             t.version AS trust_version, t.statement AS trust_statement, \
             t.signature AS trust_signature, sv.version AS trust_seen \
             FROM withdrawal_ops o JOIN withdrawal_payloads p USING (tenant_id, op_id) \
             CROSS JOIN LATERAL (SELECT \
                 coalesce(array_agg(a.approver_key_id ORDER BY a.created_at), '{}') AS a_key_ids, \
                 coalesce(array_agg(a.decision ORDER BY a.created_at), '{}') AS a_decisions, \
                 coalesce(array_agg(a.policy_version ORDER BY a.created_at), '{}') AS a_versions, \
                 coalesce(array_agg(a.payload_hash ORDER BY a.created_at), '{}') AS a_hashes, \
                 coalesce(array_agg(a.signature ORDER BY a.created_at), '{}') AS a_signatures, \
                 coalesce(array_agg(array_to_string(a.acknowledged_flags, ',') \
                   ORDER BY a.created_at), '{}') AS a_acks \
               FROM approvals a WHERE a.tenant_id = o.tenant_id AND a.op_id = o.op_id) d \
             CROSS JOIN LATERAL (SELECT \
                 /* ordered by every column, so that the four arrays line up */ \
                 coalesce(array_agg(k.event_id ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_event_ids, \
                 coalesce(array_agg(k.signed_at ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_signed_ats, \
                 coalesce(array_agg(k.body ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_bodies, \
                 coalesce(array_agg(k.signature ORDER BY k.event_id, k.signed_at, k.signature, \
                   k.body), '{}') AS k_signatures \
               FROM kyt_screenings k WHERE k.tenant_id = o.tenant_id AND k.op_id = o.op_id \
                 AND k.signature IS NOT NULL) ks \
             LEFT JOIN LATERAL (SELECT version, statement, signature FROM trust_statements ts \
               WHERE ts.tenant_id = o.tenant_id ORDER BY version DESC LIMIT 1) t ON true \
             LEFT JOIN signer_trust_versions sv ON sv.tenant_id = o.tenant_id \
             WHERE o.tenant_id = $1 AND o.op_id = $2"
        ))
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let corrupt = StoreError::Corrupt {
            what: "approvals of the operation",
        };
        let n = row.a_decisions.len();
        let k = row.k_event_ids.len();
        if [
            row.a_key_ids.len(),
            row.a_versions.len(),
            row.a_hashes.len(),
            row.a_signatures.len(),
            row.a_acks.len(),
        ]
        .iter()
        .any(|&len| len != n)
            || [
                row.k_signed_ats.len(),
                row.k_bodies.len(),
                row.k_signatures.len(),
            ]
            .iter()
            .any(|&len| len != k)
        {
            return Err(corrupt);
        }
        let decisions = row
            .a_key_ids
            .into_iter()
            .zip(row.a_decisions)
            .zip(row.a_versions)
            .zip(row.a_hashes)
            .zip(row.a_signatures)
            .zip(row.a_acks)
            .map(
                |(
                    ((((approver_key_id, decision), policy_version), payload_hash), signature),
                    acks,
                )| {
                    StoredDecision {
                        approver_key_id,
                        decision,
                        policy_version,
                        payload_hash,
                        signature,
                        acknowledged_flags: acks
                            .split(',')
                            .filter(|f| !f.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    }
                },
            )
            .collect();
        let screenings = row
            .k_event_ids
            .into_iter()
            .zip(row.k_signed_ats)
            .zip(row.k_bodies)
            .zip(row.k_signatures)
            .map(
                |(((event_id, signed_at), body), signature)| SignedScreening {
                    event_id,
                    signed_at,
                    body,
                    signature,
                },
            )
            .collect();
        let trust = match (row.trust_version, row.trust_statement, row.trust_signature) {
            (Some(version), Some(statement), Some(signature)) => {
                Some(trust_from_row((version, statement, signature))?)
            }
            _ => None,
        };
        let trust_seen =
            row.trust_seen
                .map(u64::try_from)
                .transpose()
                .map_err(|_| StoreError::Corrupt {
                    what: "accepted trust version",
                })?;
        Ok(Some(SigningInput {
            operation: row.operation.into_operation(tenant_id)?,
            decisions,
            screenings,
            trust,
            trust_seen,
            lease_owner: row.lease_owner,
            lease_expired: row.lease_expired,
        }))
    }

    /// Records that the signer accepted `version` of the tenant's trust statement, so that an
    /// older one is refused from now on, across restarts. Never lowers the recorded version.
    pub async fn record_trust_seen(&self, tenant_id: TenantId, version: u64) -> Result<()> {
        let version = i64::try_from(version).map_err(|_| StoreError::Corrupt {
            what: "trust version",
        })?;
        sqlx::query(
            "INSERT INTO signer_trust_versions (tenant_id, version) VALUES ($1, $2) \
             ON CONFLICT (tenant_id) DO UPDATE SET version = excluded.version \
             WHERE signer_trust_versions.version < excluded.version",
        )
        .bind(tenant_id.as_uuid())
        .bind(version)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The released attempts of each of `ops`, oldest first, in one query: what a reader of the
    /// chain can judge by content. A held-back attempt is left out (its bytes are the signer's
    /// until released); [`Store::attempt_counts`] still counts it, so a reader that re-counts
    /// before acting (the watcher) waits for its release.
    pub async fn attempts_of(
        &self,
        ops: &[(TenantId, OperationId)],
    ) -> Result<std::collections::HashMap<(TenantId, OperationId), Vec<Attempt>>> {
        let mut out: std::collections::HashMap<(TenantId, OperationId), Vec<Attempt>> =
            std::collections::HashMap::new();
        if ops.is_empty() {
            return Ok(out);
        }
        let (tenants, op_ids) = crate::shared::unzip_keys(ops);
        let rows: Vec<KeyedAttemptRow> = sqlx::query_as(
            "SELECT tenant_id, op_id, attempt, kind, network, chain_id, sender, nonce, tx_hash, \
             raw_tx, gas_limit, max_fee_per_gas::text AS max_fee_per_gas, \
             max_priority_fee_per_gas::text AS max_priority_fee_per_gas, created_at, released \
             FROM released_attempts \
             WHERE (tenant_id, op_id) IN (SELECT * FROM unnest($1::uuid[], $2::uuid[])) \
               AND released \
             ORDER BY tenant_id, op_id, attempt",
        )
        .bind(tenants)
        .bind(op_ids)
        .fetch_all(&self.pool)
        .await?;
        for row in rows {
            let key = (
                TenantId::from_uuid(row.tenant_id),
                OperationId::from_uuid(row.op_id),
            );
            out.entry(key)
                .or_default()
                .push(row.attempt.into_attempt()?);
        }
        Ok(out)
    }

    /// Every attempt of the operation, oldest first; a held-back one without its bytes (see
    /// [`Attempt::released`]). Readable by every service role.
    pub async fn attempts(&self, tenant_id: TenantId, op_id: OperationId) -> Result<Vec<Attempt>> {
        self.read_attempts(SELECT_ATTEMPTS, tenant_id, op_id).await
    }

    /// Every attempt of the operation, oldest first, each with its bytes, held back or not. Only
    /// the signer's login may read them (a worker's is refused by the database); bytes of a
    /// held-back attempt must not leave the signer.
    pub async fn signed_attempts(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<Attempt>> {
        self.read_attempts(SELECT_SIGNED_ATTEMPTS, tenant_id, op_id)
            .await
    }

    async fn read_attempts(
        &self,
        sql: &'static str,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<Attempt>> {
        let rows: Vec<AttemptRow> = sqlx::query_as(sql)
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(AttemptRow::into_attempt).collect()
    }

    /// APPROVED -> SIGNING with a lease for `owner`, only while the stored hash is `hash`.
    pub async fn claim_for_signing(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        hash: PayloadHash,
        lease: Duration,
    ) -> Result<()> {
        let mut claim = TransitionRequest::new(
            tenant_id,
            op_id,
            OperationState::Approved,
            OperationState::Signing,
            Actor::Signer,
            owner,
            "claimed for signing",
        );
        claim.expected_hash = Some(hash);
        claim.lease_for = Some(lease);
        self.transition(&claim).await.map(|_| ())
    }

    /// SIGNING -> APPROVED: gives a claim back. With `owner` the lease must be that owner's and
    /// live; without, it must have expired. Refused once any attempt exists.
    pub async fn release_claim(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: Option<&str>,
        actor_id: &str,
        reason: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let (signed,): (bool,) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM tx_attempts WHERE tenant_id = $1 AND op_id = $2)",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_one(&mut *tx)
        .await?;
        if signed {
            return Err(StoreError::Conflict {
                current: Some(OperationState::Signing),
            });
        }
        let mut release = TransitionRequest::new(
            tenant_id,
            op_id,
            OperationState::Signing,
            OperationState::Approved,
            Actor::Signer,
            actor_id,
            reason,
        );
        release.lease_guard = match owner {
            Some(owner) => LeaseGuard::HeldBy(owner),
            None => LeaseGuard::Expired,
        };
        transition_in(&mut tx, &release).await?;
        tx.commit().await?;
        Ok(())
    }

    /// In one transaction: takes the sender's next nonce (starting at `initial_nonce` for a new
    /// sender), calls `sign` with it, persists the original attempt, advances the nonce and moves
    /// the operation SIGNING -> SIGNED under `owner`'s lease. Nothing is kept if any step fails.
    pub async fn persist_signed<E>(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        owner: &str,
        sender: &Sender<'_>,
        sign: impl FnOnce(u64) -> std::result::Result<NewAttempt, E>,
    ) -> Result<std::result::Result<Attempt, E>> {
        let mut tx = self.pool.begin().await?;
        let nonce = take_nonces(&mut tx, sender, 1).await?;
        let signed = match sign(nonce) {
            Ok(signed) => signed,
            Err(e) => return Ok(Err(e)),
        };
        let claim = SignClaim {
            tenant_id,
            op_id,
            owner,
        };
        let mut attempt = record_signed(&mut tx, sender, &claim, nonce, &signed).await?;
        opledger_failpoint::hit("sign.before_commit");
        tx.commit().await?;
        opledger_failpoint::hit("sign.after_commit");
        self.release_acknowledged(std::slice::from_mut(&mut attempt), tenant_id, op_id)
            .await;
        Ok(Ok(attempt))
    }

    /// [`Store::persist_signed`] for several claimed operations of one sender in ONE transaction:
    /// one lock of the sender's nonce row, consecutive nonces in `claims` order, one durable
    /// commit. `sign(i, nonce)` signs `claims[i]`. All or nothing: when any claim is no longer held
    /// (lease lost) or any signing fails, everything is rolled back (no attempt, no nonce used) and
    /// `None` is returned, so the caller persists each claim on its own and each gets its own
    /// answer.
    pub async fn persist_signed_batch<E>(
        &self,
        sender: &Sender<'_>,
        claims: &[SignClaim<'_>],
        mut sign: impl FnMut(usize, u64) -> std::result::Result<NewAttempt, E>,
    ) -> Result<Option<Vec<Attempt>>> {
        let count =
            u64::try_from(claims.len()).map_err(|_| StoreError::Corrupt { what: "batch" })?;
        let mut tx = self.pool.begin().await?;
        let first = take_nonces(&mut tx, sender, count).await?;
        let mut attempts = Vec::with_capacity(claims.len());
        for (i, (claim, nonce)) in claims.iter().zip(first..).enumerate() {
            let Ok(signed) = sign(i, nonce) else {
                return Ok(None);
            };
            match record_signed(&mut tx, sender, claim, nonce, &signed).await {
                Ok(attempt) => attempts.push(attempt),
                // The claim was lost (lease expired and reclaimed): nothing of the batch is kept.
                Err(StoreError::Conflict { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        opledger_failpoint::hit("sign.before_commit");
        tx.commit().await?;
        opledger_failpoint::hit("sign.after_commit");
        let keys: Vec<(TenantId, OperationId, u32)> = claims
            .iter()
            .zip(&attempts)
            .map(|(c, a)| (c.tenant_id, c.op_id, a.attempt))
            .collect();
        if self.release(&keys).await.is_ok() {
            for attempt in &mut attempts {
                attempt.released = true;
            }
        }
        Ok(Some(attempts))
    }

    /// Persists a replacement (fee bump or cancel) of the latest attempt as the next attempt;
    /// `sign` receives every attempt, oldest first (the original, whose sender and nonce every
    /// replacement must keep, and the latest, which it replaces). In the transaction that locks the operation's row, the
    /// operation must be in one of `guard.states` and its latest attempt at least `guard.min_age`
    /// old (measured by the database clock); otherwise nothing is signed or written and the
    /// refusal says why.
    pub async fn persist_replacement<E>(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        guard: &ReplacementGuard<'_>,
        sign: impl FnOnce(&[Attempt]) -> std::result::Result<NewAttempt, E>,
    ) -> Result<std::result::Result<Attempt, ReplacementError<E>>> {
        let mut tx = self.pool.begin().await?;
        let row: Option<(String, DateTime<Utc>)> = sqlx::query_as(
            "SELECT state, now() FROM withdrawal_ops WHERE tenant_id = $1 AND op_id = $2 FOR UPDATE",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_optional(&mut *tx)
        .await?;
        let Some((state, now)) = row else {
            return Err(StoreError::NotFound { what: "withdrawal" });
        };
        let state: OperationState = state
            .parse()
            .map_err(|_| StoreError::Corrupt { what: "state" })?;
        if !guard.states.contains(&state) {
            return Ok(Err(ReplacementError::Refused(GuardRefusal::State(state))));
        }
        let rows: Vec<AttemptRow> = sqlx::query_as(SELECT_SIGNED_ATTEMPTS)
            .bind(tenant_id.as_uuid())
            .bind(op_id.as_uuid())
            .fetch_all(&mut *tx)
            .await?;
        let attempts = rows
            .into_iter()
            .map(AttemptRow::into_attempt)
            .collect::<Result<Vec<_>>>()?;
        let (Some(original), Some(latest)) = (attempts.first(), attempts.last()) else {
            return Err(StoreError::Corrupt {
                what: "signed operation without attempt",
            });
        };
        let age = (now - latest.created_at).to_std().unwrap_or(Duration::ZERO);
        if age < guard.min_age {
            return Ok(Err(ReplacementError::Refused(GuardRefusal::TooRecent {
                age,
                min_age: guard.min_age,
            })));
        }
        let signed = match sign(&attempts) {
            Ok(signed) => signed,
            Err(e) => return Ok(Err(ReplacementError::Sign(e))),
        };
        // A replacement keeps the original's sender, nonce and chain: a transaction of another
        // account at that nonce could not replace the original, and could be mined beside it.
        // (The database refuses such a row too.)
        if signed.nonce != original.signed.nonce
            || signed.sender != original.signed.sender
            || signed.chain_id != original.signed.chain_id
            || signed.kind == AttemptKind::Original
        {
            return Err(StoreError::Corrupt {
                what: "replacement attempt",
            });
        }
        let attempt = insert_attempt(
            &mut tx,
            tenant_id,
            op_id,
            latest.attempt + 1,
            &latest.network,
            &signed,
        )
        .await?;
        tx.commit().await?;
        let mut attempt = attempt;
        self.release_acknowledged(std::slice::from_mut(&mut attempt), tenant_id, op_id)
            .await;
        Ok(Ok(attempt))
    }

    /// The signed-bytes gate, step two: releases attempts of `tenant_id`/`op_id` for submission
    /// after the caller saw the commit that persisted them acknowledged. A failure leaves them
    /// held back (the signer's sweep, [`Store::release_held`], releases them later) and is not
    /// an error of the signing: the attempts are persisted.
    async fn release_acknowledged(
        &self,
        attempts: &mut [Attempt],
        tenant_id: TenantId,
        op_id: OperationId,
    ) {
        let keys: Vec<(TenantId, OperationId, u32)> = attempts
            .iter()
            .map(|a| (tenant_id, op_id, a.attempt))
            .collect();
        if self.release(&keys).await.is_ok() {
            for attempt in attempts {
                attempt.released = true;
            }
        }
    }

    /// Releases `keys` (tenant, operation, attempt number) for submission. Call this ONLY after
    /// seeing acknowledged a commit that was made after the attempts' own commit (their signing
    /// commit, or a probe: [`Store::release_held`]): with synchronous replication that proves
    /// they reached the standby. Releasing is idempotent.
    ///
    /// The release itself commits asynchronously (`synchronous_commit` off for its own
    /// transaction only): it waits for no flush and no standby. Its durability does not matter,
    /// only that of the attempts it releases, which is already proven: a release lost in a crash
    /// or a promotion leaves the attempt held back until the sweep probes and releases it again,
    /// and bytes sent under a lost release are the same stored bytes, sent again at most.
    pub async fn release(&self, keys: &[(TenantId, OperationId, u32)]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let (tenants, ops, numbers) = unzip_attempt_keys(keys)?;
        sqlx::query(
            "WITH quick AS (SELECT set_config('synchronous_commit', 'off', true)) \
             UPDATE attempt_releases SET released_at = now() FROM quick \
             WHERE (tenant_id, op_id, attempt) IN \
                   (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::int4[])) \
               AND released_at IS NULL",
        )
        .bind(tenants)
        .bind(ops)
        .bind(numbers)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The signer's sweep: attempts persisted at least `min_age` ago (database clock) and still
    /// held back, because the answer to their signing commit was lost or their release failed.
    /// First a probe is committed on their release rows (`probed_at`); only if that commit is
    /// acknowledged are they released, in a second transaction. The probe's commit comes after
    /// the attempts' in the write-ahead log, so its acknowledgement proves theirs. Returns how
    /// many were released.
    pub async fn release_held(&self, min_age: Duration, limit: u32) -> Result<usize> {
        let min_age_ms = i64::try_from(min_age.as_millis()).unwrap_or(i64::MAX);
        // Tenant by tenant, so that each claim stays within one tenant (docs/distribution.md).
        let tenants: Vec<(uuid::Uuid,)> = sqlx::query_as(
            "SELECT DISTINCT tenant_id FROM attempt_releases WHERE released_at IS NULL LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut released = 0;
        for (tenant,) in tenants {
            let probed: Vec<(uuid::Uuid, i32)> = sqlx::query_as(
                "UPDATE attempt_releases r SET probed_at = now() \
                 FROM (SELECT h.tenant_id, h.op_id, h.attempt FROM attempt_releases h \
                         JOIN tx_attempts a USING (tenant_id, op_id, attempt) \
                        WHERE h.tenant_id = $3 AND h.released_at IS NULL \
                          AND a.created_at < now() - make_interval(secs => $1::float8 / 1000) \
                        ORDER BY a.created_at LIMIT $2 FOR UPDATE OF h SKIP LOCKED) held \
                 WHERE (r.tenant_id, r.op_id, r.attempt) = (held.tenant_id, held.op_id, held.attempt) \
                 RETURNING r.op_id, r.attempt",
            )
            .bind(min_age_ms)
            .bind(i64::from(limit))
            .bind(tenant)
            .fetch_all(&self.pool)
            .await?;
            opledger_failpoint::hit("release.after_probe");
            let tenant = TenantId::from_uuid(tenant);
            let keys = probed
                .into_iter()
                .map(|(o, a)| {
                    let number =
                        u32::try_from(a).map_err(|_| StoreError::Corrupt { what: "attempt" })?;
                    Ok((tenant, OperationId::from_uuid(o), number))
                })
                .collect::<Result<Vec<_>>>()?;
            self.release(&keys).await?;
            released += keys.len();
        }
        Ok(released)
    }

    /// [`Store::release_held`] for one operation, now, whatever the age of its held-back
    /// attempts: a probe committed on their release rows, then (that commit acknowledged) their
    /// release. Rows another session holds (the sweep probing them) are skipped. Returns the
    /// numbers of the attempts it released.
    pub async fn release_held_of(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
    ) -> Result<Vec<u32>> {
        let probed: Vec<(i32,)> = sqlx::query_as(
            "UPDATE attempt_releases r SET probed_at = now() \
             FROM (SELECT attempt FROM attempt_releases \
                    WHERE tenant_id = $1 AND op_id = $2 AND released_at IS NULL \
                    FOR UPDATE SKIP LOCKED) held \
             WHERE (r.tenant_id, r.op_id, r.attempt) = ($1, $2, held.attempt) \
             RETURNING r.attempt",
        )
        .bind(tenant_id.as_uuid())
        .bind(op_id.as_uuid())
        .fetch_all(&self.pool)
        .await?;
        opledger_failpoint::hit("release.after_probe");
        let numbers = probed
            .into_iter()
            .map(|(a,)| u32::try_from(a).map_err(|_| StoreError::Corrupt { what: "attempt" }))
            .collect::<Result<Vec<_>>>()?;
        let keys: Vec<_> = numbers.iter().map(|n| (tenant_id, op_id, *n)).collect();
        self.release(&keys).await?;
        Ok(numbers)
    }

    /// Records a security-relevant refusal (a fixed description, never a payload value).
    pub async fn record_security_event(
        &self,
        tenant_id: TenantId,
        op_id: OperationId,
        kind: &str,
        actor: Actor,
        actor_id: &str,
        detail: &str,
    ) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        record_security_event(
            &mut conn,
            tenant_id,
            Some(op_id),
            kind,
            actor,
            actor_id,
            detail,
        )
        .await
    }
}

/// Takes `count` consecutive nonces of the sender and returns the first. One statement locks (or
/// creates, at `initial_nonce`) the sender's row and advances it: the lock is held until the
/// caller's commit, so the counter commits only together with the attempts that use its nonces.
async fn take_nonces(conn: &mut PgConnection, sender: &Sender<'_>, count: u64) -> Result<u64> {
    let as_i64 = |v: u64| i64::try_from(v).map_err(|_| StoreError::Corrupt { what: "nonce" });
    let (first,): (i64,) = sqlx::query_as(
        "INSERT INTO signer_nonces (network, sender, next_nonce) VALUES ($1, $2, $3 + $4) \
         ON CONFLICT (network, sender) DO UPDATE SET next_nonce = signer_nonces.next_nonce + $4 \
         RETURNING next_nonce - $4",
    )
    .bind(sender.network)
    .bind(sender.address)
    .bind(as_i64(sender.initial_nonce)?)
    .bind(as_i64(count)?)
    .fetch_one(&mut *conn)
    .await?;
    u64::try_from(first).map_err(|_| StoreError::Corrupt { what: "nonce" })
}

/// Persists the original attempt `signed` of a claimed operation (it must use `nonce` and come
/// from the sender) and moves the operation SIGNING -> SIGNED under the claim's lease; a lost
/// lease is [`StoreError::Conflict`].
async fn record_signed(
    conn: &mut PgConnection,
    sender: &Sender<'_>,
    claim: &SignClaim<'_>,
    nonce: u64,
    signed: &NewAttempt,
) -> Result<Attempt> {
    if signed.nonce != nonce
        || signed.kind != AttemptKind::Original
        || signed.sender != sender.address
    {
        return Err(StoreError::Corrupt {
            what: "signed attempt",
        });
    }
    let attempt = insert_attempt(
        conn,
        claim.tenant_id,
        claim.op_id,
        1,
        sender.network,
        signed,
    )
    .await?;
    let mut done = TransitionRequest::new(
        claim.tenant_id,
        claim.op_id,
        OperationState::Signing,
        OperationState::Signed,
        Actor::Signer,
        claim.owner,
        "signed and persisted",
    );
    done.lease_guard = LeaseGuard::HeldBy(claim.owner);
    done.signed_tx_ref = Some(&signed.tx_hash);
    transition_in(conn, &done).await?;
    Ok(attempt)
}

async fn insert_attempt(
    conn: &mut PgConnection,
    tenant_id: TenantId,
    op_id: OperationId,
    number: u32,
    network: &str,
    signed: &NewAttempt,
) -> Result<Attempt> {
    let as_i64 = |v: u64| i64::try_from(v).map_err(|_| StoreError::Corrupt { what: "attempt" });
    // The attempt and its release row (held back) in one statement: see `Store::release`.
    let (created_at,): (DateTime<Utc>,) = sqlx::query_as(
        "WITH a AS ( \
           INSERT INTO tx_attempts (tenant_id, op_id, attempt, kind, network, chain_id, sender, \
             nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, max_priority_fee_per_gas) \
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::numeric, $13::numeric) \
           RETURNING tenant_id, op_id, attempt, created_at), \
         r AS (INSERT INTO attempt_releases (tenant_id, op_id, attempt) \
           SELECT tenant_id, op_id, attempt FROM a) \
         SELECT created_at FROM a",
    )
    .bind(tenant_id.as_uuid())
    .bind(op_id.as_uuid())
    .bind(i32::try_from(number).map_err(|_| StoreError::Corrupt { what: "attempt" })?)
    .bind(signed.kind.as_str())
    .bind(network)
    .bind(as_i64(signed.chain_id)?)
    .bind(&signed.sender)
    .bind(as_i64(signed.nonce)?)
    .bind(&signed.tx_hash)
    .bind(&signed.raw_tx)
    .bind(as_i64(signed.gas_limit)?)
    .bind(signed.max_fee_per_gas.to_string())
    .bind(signed.max_priority_fee_per_gas.to_string())
    .fetch_one(&mut *conn)
    .await
    .map_err(StoreError::wallet)?;
    Ok(Attempt {
        attempt: number,
        network: network.to_owned(),
        signed: signed.clone(),
        created_at,
        released: false,
    })
}

fn unzip_attempt_keys(
    keys: &[(TenantId, OperationId, u32)],
) -> Result<(Vec<uuid::Uuid>, Vec<uuid::Uuid>, Vec<i32>)> {
    let mut tenants = Vec::with_capacity(keys.len());
    let mut ops = Vec::with_capacity(keys.len());
    let mut numbers = Vec::with_capacity(keys.len());
    for (tenant, op, number) in keys {
        tenants.push(tenant.as_uuid());
        ops.push(op.as_uuid());
        numbers.push(i32::try_from(*number).map_err(|_| StoreError::Corrupt { what: "attempt" })?);
    }
    Ok((tenants, ops, numbers))
}
