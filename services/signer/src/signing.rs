//! The signing procedure: verify, claim, sign, persist, answer. No step trusts a value it did not
//! recompute from the stored fields.

use crate::batch::{Job, Lanes, new_attempt};
use crate::config::{Capability, Config, NetworkConfig};
use crate::trust::TrustRoots;
use crate::wallets::{Wallet, Wallets};
use alloy_primitives::{Address, U256};
use opledger_domain::evidence::{
    self, AttemptDefect, ExpectedTransfer, ReplacementRequest, StoredKind,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::WithdrawalPayload;
use opledger_domain::state::{Actor, OperationState};
use opledger_evm::signer::{self as evm, SignError};
use opledger_evm::tx::{self, TransferKind, TransferRequest, TxError};
use opledger_store::signing::{
    Attempt, AttemptKind, GuardRefusal, NewAttempt, ReplacementError, ReplacementGuard,
    SigningInput,
};
use opledger_store::wallets::{RetireAfter, WalletStatus};
use opledger_store::{Store, StoreError};
use std::sync::Arc;
use std::time::Duration;

/// Why the signer refused or failed. Messages carry no address, amount, memo or key material.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// No such withdrawal for the tenant.
    #[error("withdrawal not found")]
    NotFound,
    /// The recomputed payload hash differs from the stored or the approved hash. Recorded as a
    /// security event; nothing was signed.
    #[error("payload hash recomputed from the stored fields does not match the approved hash")]
    HashMismatch,
    /// The approvals could not be verified against the tenant's pinned trust root. Recorded as
    /// a security event; nothing was signed.
    #[error("approvals not verified: {0}")]
    ApprovalsNotVerified(#[from] crate::trust::Unverified),
    /// The operation is not APPROVED (or is claimed by a live lease: `retry`).
    #[error("withdrawal is not signable in state {}", state.as_str())]
    NotSignable {
        /// Its state.
        state: OperationState,
        /// True when another signer holds a live lease: retry later.
        retry: bool,
    },
    /// The fee the signer would spend is above the payload's fee cap.
    #[error("network fee would exceed the payload's fee cap")]
    FeeCapExceeded,
    /// No wallet, network or asset configuration for this withdrawal.
    #[error("signer has no {0} configured for this withdrawal")]
    NotConfigured(&'static str),
    /// Building or signing the transaction failed.
    #[error("signing failed: {0}")]
    Sign(#[from] SignError),
    /// A replacement could not be derived.
    #[error("replacement refused: {0}")]
    Replacement(#[from] TxError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The caller may not ask for this, or not now: nothing was signed. Recorded as a security
    /// event.
    #[error("caller not allowed: {0}")]
    NotAllowed(Refusal),
    /// The signing lane ended before answering (the claim stays; its lease expires and the
    /// operation is signed once on a later call).
    #[error("signing interrupted before an answer; retry")]
    Interrupted,
    /// The payload carries a memo, which a transfer on this network cannot carry: what would be
    /// executed is not what was approved.
    #[error("the payload's memo cannot be carried by a transfer on this network")]
    MemoNotExecutable,
    /// A stored attempt is not what it is stored as (its content is neither the approved transfer
    /// nor a cancel of it, or contradicts its stored kind). Recorded as a security event; nothing
    /// was signed.
    #[error("stored attempt does not match its content: {0}")]
    AttemptMismatch(#[from] AttemptDefect),
    /// No key of the original attempt's sender is loaded (a wallet rotated out and removed too
    /// early): a replacement from another account could not replace the original.
    #[error("no wallet of the original attempt's sender is loaded")]
    NoKeyForSender,
}

/// Why the signer ended an operation it refused (APPROVED -> FAILED_TERMINAL), and who owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// True when the owner is security (evidence of tampering), else operations.
    pub security: bool,
    /// The reason code recorded on the escalation.
    pub reason_code: &'static str,
}

impl SignerError {
    /// The ending of an operation refused with this error, if the refusal is final: tampering
    /// evidence (security) or a configuration fault nothing can fix for this payload (operations).
    /// Transient failures (store, interrupted, busy) end nothing: the caller retries with back-off.
    pub fn ending(&self) -> Option<Ending> {
        let (security, reason_code) = match self {
            SignerError::HashMismatch => (true, "SIGNER_HASH_MISMATCH"),
            SignerError::ApprovalsNotVerified(_) => (true, "APPROVALS_NOT_VERIFIED"),
            SignerError::NotConfigured(_) => (false, "SIGNER_NOT_CONFIGURED"),
            SignerError::FeeCapExceeded => (false, "FEE_CAP_EXCEEDED"),
            SignerError::MemoNotExecutable => (false, "MEMO_NOT_EXECUTABLE"),
            SignerError::NotFound
            | SignerError::NotSignable { .. }
            | SignerError::Sign(_)
            | SignerError::Replacement(_)
            | SignerError::Store(_)
            | SignerError::NotAllowed(_)
            | SignerError::Interrupted
            | SignerError::AttemptMismatch(_)
            | SignerError::NoKeyForSender => return None,
        };
        Some(Ending {
            security,
            reason_code,
        })
    }
}

/// What a caller lacked for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The caller's configuration does not grant this capability.
    Capability(Capability),
    /// The caller is bound to a client certificate and did not present exactly that one.
    ClientCertificate,
    /// The operation is not in the state this request needs (it is in this one).
    State(OperationState),
    /// The latest attempt is younger than the signer's window for this request.
    Age {
        /// Its age, whole seconds.
        age_secs: u64,
        /// The window, seconds.
        min_age_secs: u64,
    },
}

impl Refusal {
    /// What was missing: `capability`, `client_certificate`, `state` or `age`.
    pub fn missing(&self) -> &'static str {
        match self {
            Refusal::Capability(_) => "capability",
            Refusal::ClientCertificate => "client_certificate",
            Refusal::State(_) => "state",
            Refusal::Age { .. } => "age",
        }
    }
}

impl Refusal {
    /// The security event's fixed description.
    fn detail(&self) -> &'static str {
        match self {
            Refusal::Capability(_) => "caller lacks the capability for this request",
            Refusal::ClientCertificate => "caller did not present its bound client certificate",
            Refusal::State(_) => "operation is not in the state this request needs",
            Refusal::Age { .. } => "latest attempt is inside the signer's window for this request",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Capability(c) => write!(f, "missing capability {}", c.as_str()),
            Refusal::ClientCertificate => {
                f.write_str("the caller's bound client certificate was not presented")
            }
            Refusal::State(state) => write!(f, "not allowed in state {}", state.as_str()),
            Refusal::Age {
                age_secs,
                min_age_secs,
            } => write!(
                f,
                "latest attempt is {age_secs} s old, the window is {min_age_secs} s"
            ),
        }
    }
}

/// The signer's state: store, configuration and keys.
#[derive(Debug, Clone)]
pub struct Signer {
    store: Store,
    config: Arc<Config>,
    wallets: Arc<Wallets>,
    lanes: Lanes,
    trust: TrustRoots,
}

/// A signed attempt and whether an earlier call had already persisted it.
#[derive(Debug, Clone)]
pub struct Signed {
    /// The latest persisted attempt.
    pub attempt: Attempt,
    /// True when nothing new was signed by this call.
    pub already_signed: bool,
}

impl Signer {
    /// A signer over this store, configuration and wallets.
    pub fn new(store: Store, config: Arc<Config>, wallets: Arc<Wallets>) -> Signer {
        Signer {
            lanes: Lanes::new(store.clone()),
            trust: TrustRoots::from_config(&config),
            store,
            config,
            wallets,
        }
    }

    /// Registers this signer's wallets (active and retiring) where the operations service reads
    /// them, and logs, for each retiring wallet, how many of its operations are still in flight
    /// (it retires once that is zero: [`Signer::retire_finished_wallets`]).
    pub async fn register_wallets(&self) -> Result<(), SignerError> {
        let registrations = self.wallets.registrations();
        self.store.register_wallets(&registrations).await?;
        for wallet in registrations
            .iter()
            .filter(|w| w.status == WalletStatus::Retiring)
        {
            let in_flight = self
                .store
                .in_flight_of_sender(
                    wallet.tenant_id,
                    &wallet.network,
                    &wallet.sender,
                    self.retire_grace(),
                )
                .await?;
            tracing::info!(
                tenant_id = %wallet.tenant_id,
                network = %wallet.network,
                in_flight,
                "retiring wallet: signs only replacements of its own nonces until none is in flight"
            );
        }
        Ok(())
    }

    /// True while this signer holds a retiring wallet.
    pub fn holds_retiring_wallets(&self) -> bool {
        self.wallets.any_retiring()
    }

    /// Retires every retiring wallet none of whose operations is in flight any more (each
    /// original it signed ended without a payout, or CONFIRMED longer than
    /// `wallet_retire_grace_secs` ago) and that signed nothing for `wallet_retire_min_age_secs`:
    /// its row becomes RETIRED in the same statement that checks this, then its key is dropped,
    /// so no replacement of its nonces can be signed afterwards.
    /// Returns how many it retired; a wallet the database could not check is left for the next
    /// call (late is the safe direction).
    pub async fn retire_finished_wallets(&self) -> usize {
        let mut retired = 0;
        for wallet in self
            .wallets
            .registrations()
            .into_iter()
            .filter(|w| w.status == WalletStatus::Retiring)
        {
            let finished = self
                .store
                .retire_wallet(
                    wallet.tenant_id,
                    &wallet.network,
                    &wallet.sender,
                    RetireAfter {
                        grace: self.retire_grace(),
                        quiet: Duration::from_secs(self.config.wallet_retire_min_age_secs),
                    },
                )
                .await;
            match finished {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(
                        tenant_id = %wallet.tenant_id,
                        network = %wallet.network,
                        error = %e.log_safe(),
                        "cannot check a retiring wallet"
                    );
                    continue;
                }
            }
            if self
                .wallets
                .retire(wallet.tenant_id, &wallet.network, &wallet.sender)
            {
                retired += 1;
                tracing::warn!(
                    tenant_id = %wallet.tenant_id,
                    network = %wallet.network,
                    "wallet retired: none of its operations is in flight; its key is dropped, remove it from the configuration"
                );
            }
        }
        retired
    }

    fn retire_grace(&self) -> Duration {
        Duration::from_secs(self.config.wallet_retire_grace_secs)
    }

    /// Signs an APPROVED withdrawal once; any later call returns the persisted attempt. A refusal
    /// that is final (see [`SignerError::ending`]) also ends the operation: APPROVED ->
    /// FAILED_TERMINAL with an escalation naming its owner and reason, hold kept, so it is
    /// neither retried nor left at the head of anyone's queue.
    pub async fn sign_withdrawal(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Signed, SignerError> {
        let result = self.try_sign_withdrawal(tenant, op).await;
        if let Err(e) = &result
            && let Some(ending) = e.ending()
        {
            self.end(tenant, op, ending).await?;
        }
        result
    }

    /// APPROVED -> FAILED_TERMINAL with an escalation (a lease left expired by a dead claimant is
    /// given back first). An operation another call moved first is left alone.
    async fn end(
        &self,
        tenant: TenantId,
        op: OperationId,
        ending: Ending,
    ) -> Result<(), SignerError> {
        let actor_id = self.config.instance_id.as_str();
        match self
            .store
            .release_claim(tenant, op, None, actor_id, "expired lease reclaimed")
            .await
        {
            Ok(()) | Err(StoreError::Conflict { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        let request = opledger_store::transition::TransitionRequest::new(
            tenant,
            op,
            OperationState::Approved,
            OperationState::FailedTerminal,
            Actor::Signer,
            actor_id,
            "refused by the signer: ended with an owner, hold kept",
        );
        let owner = if ending.security {
            &self.config.security_owner
        } else {
            &self.config.operations_owner
        };
        match self
            .store
            .escalate(&request, owner, ending.reason_code)
            .await
        {
            Ok(()) => {
                tracing::error!(%op, owner = %owner, reason = ending.reason_code, "refused withdrawal ended: FAILED_TERMINAL, hold kept");
                Ok(())
            }
            Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn try_sign_withdrawal(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Signed, SignerError> {
        // An operation that is APPROVED or SIGNING has no attempt yet (the original attempt is
        // persisted in the very transaction that moves SIGNING -> SIGNED), so its attempts are
        // read only when it is past them: one query fewer on every signature.
        let input = self
            .store
            .signing_input(tenant, op)
            .await?
            .ok_or(SignerError::NotFound)?;
        let state = input.operation.state;
        if !matches!(state, OperationState::Approved | OperationState::Signing) {
            // Already signed (by an earlier or a concurrent call): answer with its artifact.
            return match self.stored(tenant, op).await? {
                Some(stored) => Ok(stored),
                None => Err(SignerError::NotSignable {
                    state,
                    retry: false,
                }),
            };
        }
        self.verify(tenant, op, &input).await?;
        self.verify_approvals(tenant, op, &input).await?;
        let (wallet, request) = self.plan(tenant, &input.operation.payload)?;
        let owner = format!(
            "{}:{}",
            self.config.instance_id,
            uuid::Uuid::new_v4().simple()
        );
        if let Err(e) = self.claim(tenant, op, &owner, &input).await {
            // Another call claimed first; if it has finished, its artifact is the answer.
            return match self.stored(tenant, op).await? {
                Some(stored) => Ok(stored),
                None => Err(e),
            };
        }
        opledger_failpoint::hit("sign.after_claim");
        // Verify again under the claim: the stored fields must still produce the approved hash.
        let under_claim = self
            .store
            .signing_input(tenant, op)
            .await?
            .ok_or(SignerError::NotFound)?;
        // The approvals verified above stand when the claim sees the very same evidence
        // (decisions and trust statement, byte for byte); anything new is verified again.
        let same_evidence =
            under_claim.decisions == input.decisions && under_claim.trust == input.trust;
        let verified = match self.verify(tenant, op, &under_claim).await {
            Ok(()) if same_evidence => Ok(()),
            Ok(()) => self.verify_approvals(tenant, op, &under_claim).await,
            Err(e) => Err(e),
        };
        if let Err(e) = verified {
            self.store
                .release_claim(tenant, op, Some(&owner), &owner, "verification failed")
                .await?;
            return Err(e);
        }
        let network = under_claim.operation.payload.network.as_str();
        let job = Job {
            tenant_id: tenant,
            op_id: op,
            owner: owner.clone(),
            request,
            key: wallet.key.clone(),
            initial_nonce: wallet.initial_nonce,
        };
        // Persisted with the sender's next nonce, in one transaction with the other signatures
        // of this sender that are ready now (see `batch`).
        let persisted = match self
            .lanes
            .persist(network, &wallet.address, job)
            .await
            .map_err(|_| SignerError::Interrupted)?
        {
            // Another signer rotated this wallet out: this signer's configuration is out of
            // date. The claim is given back at once, for a signer holding the active wallet.
            Err(StoreError::WalletNotActive) => {
                self.store
                    .release_claim(tenant, op, Some(&owner), &owner, "wallet not active")
                    .await?;
                return Err(StoreError::WalletNotActive.into());
            }
            other => other?,
        };
        match persisted {
            Ok(attempt) => {
                tracing::info!(%op, nonce = attempt.signed.nonce, released = attempt.released, "withdrawal signed and persisted");
                Ok(Signed {
                    attempt,
                    already_signed: false,
                })
            }
            Err(e) => {
                self.store
                    .release_claim(tenant, op, Some(&owner), &owner, "signing failed")
                    .await?;
                Err(e.into())
            }
        }
    }

    /// The latest persisted attempt, if the operation was signed. One still held back (its
    /// signing commit's answer was lost, or its release failed) is released first when a probe
    /// commit is acknowledged now ([`opledger_store::Store::release_held_of`]); otherwise it is
    /// answered held back, without its bytes.
    async fn stored(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Option<Signed>, SignerError> {
        let Some(mut attempt) = self.store.signed_attempts(tenant, op).await?.pop() else {
            return Ok(None);
        };
        if !attempt.released {
            match self.store.release_held_of(tenant, op).await {
                Ok(released) => attempt.released = released.contains(&attempt.attempt),
                Err(e) => {
                    tracing::warn!(%op, error = %e.log_safe(), "cannot release a held-back attempt");
                }
            }
            if !attempt.released {
                tracing::info!(%op, attempt = attempt.attempt, "held back by the signed-bytes gate: answered without its bytes");
            }
        }
        Ok(Some(Signed {
            attempt,
            already_signed: true,
        }))
    }

    /// Records that `caller` was refused `refusal` on the operation (a security event naming the
    /// caller) and returns the error to answer with.
    pub async fn refuse(
        &self,
        tenant: TenantId,
        op: OperationId,
        caller: &str,
        refusal: Refusal,
    ) -> SignerError {
        let recorded = self
            .store
            .record_security_event(
                tenant,
                op,
                "SIGNER_CALLER_NOT_ALLOWED",
                Actor::Signer,
                caller,
                refusal.detail(),
            )
            .await;
        tracing::warn!(%op, caller, missing = refusal.missing(), reason = %refusal, "caller not allowed");
        match recorded {
            Ok(()) => SignerError::NotAllowed(refusal),
            Err(e) => e.into(),
        }
    }

    /// Persists and returns a fee bump or cancel replacing the latest attempt (same nonce). A fee
    /// bump needs a BROADCAST operation whose latest attempt is older than
    /// `fee_bump_min_age_secs`, a cancel an UNKNOWN one older than `cancel_min_age_secs`; both are
    /// checked under the operation's row lock, and a refusal is recorded against `caller`.
    ///
    /// What is signed comes from the stored attempts, checked by content: the original must be the
    /// approved transfer, the latest must be what its stored kind says, the replacement is signed
    /// by the original's sender (a retiring wallet included) and a fee bump of a cancel is a
    /// cancel.
    pub async fn sign_replacement(
        &self,
        tenant: TenantId,
        op: OperationId,
        kind: AttemptKind,
        caller: &str,
    ) -> Result<Signed, SignerError> {
        let input = self
            .store
            .signing_input(tenant, op)
            .await?
            .ok_or(SignerError::NotFound)?;
        self.verify(tenant, op, &input).await?;
        let payload = &input.operation.payload;
        let network = self
            .config
            .networks
            .get(payload.network.as_str())
            .ok_or(SignerError::NotConfigured("network"))?;
        let fee_cap = payload.fee_cap.get();
        let requested = match kind {
            AttemptKind::FeeBump => ReplacementRequest::FeeBump,
            AttemptKind::Cancel | AttemptKind::Original => ReplacementRequest::Cancel,
        };
        let (states, min_age_secs): (&[OperationState], u64) = match requested {
            ReplacementRequest::FeeBump => (
                &[OperationState::Broadcast],
                self.config.fee_bump_min_age_secs,
            ),
            ReplacementRequest::Cancel => {
                (&[OperationState::Unknown], self.config.cancel_min_age_secs)
            }
        };
        let guard = ReplacementGuard {
            states,
            min_age: Duration::from_secs(min_age_secs),
        };
        let persisted = self
            .store
            .persist_replacement(tenant, op, &guard, |attempts| {
                self.replacement(tenant, payload, network, fee_cap, requested, attempts)
            })
            .await?;
        let attempt = match persisted {
            Ok(attempt) => attempt,
            Err(ReplacementError::Refused(refused)) => {
                let refusal = match refused {
                    GuardRefusal::State(state) => Refusal::State(state),
                    GuardRefusal::TooRecent { age, min_age } => Refusal::Age {
                        age_secs: age.as_secs(),
                        min_age_secs: min_age.as_secs(),
                    },
                };
                return Err(self.refuse(tenant, op, caller, refusal).await);
            }
            Err(ReplacementError::Sign(SignerError::AttemptMismatch(defect))) => {
                self.store
                    .record_security_event(
                        tenant,
                        op,
                        "SIGNER_ATTEMPT_MISMATCH",
                        Actor::Signer,
                        &self.config.instance_id,
                        "a stored attempt does not match its content or the approved payload",
                    )
                    .await?;
                tracing::error!(%op, "refused to sign a replacement: a stored attempt does not match its content");
                return Err(SignerError::AttemptMismatch(defect));
            }
            Err(ReplacementError::Sign(e)) => return Err(e),
        };
        tracing::info!(%op, caller, attempt = attempt.attempt, kind = attempt.signed.kind.as_str(), released = attempt.released, "replacement signed and persisted");
        Ok(Signed {
            attempt,
            already_signed: false,
        })
    }

    /// The replacement of the latest of `attempts` (oldest first), signed: see
    /// [`Signer::sign_replacement`].
    fn replacement(
        &self,
        tenant: TenantId,
        payload: &WithdrawalPayload,
        network: &NetworkConfig,
        fee_cap: u128,
        requested: ReplacementRequest,
        attempts: &[Attempt],
    ) -> Result<NewAttempt, SignerError> {
        let (Some(original), Some(latest)) = (attempts.first(), attempts.last()) else {
            return Err(SignerError::Sign(SignError::Unsupported(
                "no attempt to replace",
            )));
        };
        let decoded_original = evm::decode(&original.signed.raw_tx)?;
        let expected = self.expected_transfer(payload, network, &decoded_original.content())?;
        let decoded_latest = evm::decode(&latest.signed.raw_tx)?;
        let role = evidence::role_of(&decoded_latest.content(), &expected)
            .map_err(AttemptDefect::from)
            .and_then(|role| {
                latest
                    .signed
                    .kind
                    .stored()
                    .check(role)
                    .map_err(AttemptDefect::from)
            })?;
        // The original's sender (recovered from its signature, not read from its row) signs,
        // whichever wallet is the tenant's current one: the domain's rule, which the model checks.
        let network_id = payload.network.as_str();
        let sender = evidence::replacement_sender(
            decoded_original.from.into_array(),
            &self.wallets.senders(tenant, network_id),
        )
        .map_err(|_| SignerError::NoKeyForSender)?;
        let wallet = self
            .wallets
            .by_sender(tenant, network_id, &format!("{:#x}", Address::from(sender)))
            .ok_or(SignerError::NoKeyForSender)?;
        let previous = decoded_latest
            .transfer_request()
            .ok_or(SignError::Unsupported("stored attempt is not a transfer"))?;
        let kind = evidence::replacement_kind(requested, role);
        let request = match (kind, role) {
            (StoredKind::FeeBump, _) => tx::bump(&previous, network.fee_bump_percent, fee_cap)
                .map_err(SignerError::Replacement)?,
            // A cancel of a transfer, or a fee bump of a cancel: a self-transfer of 0 with higher
            // fees, within the cancel budget.
            (StoredKind::Cancel | StoredKind::Original, _) => {
                cancel_request(&previous, network, wallet.key.address()).map_err(|e| match e {
                    SignError::Request(refused) => SignerError::Replacement(refused),
                    other => SignerError::Sign(other),
                })?
            }
        };
        let signed = evm::sign(&request, wallet.key.as_ref())?;
        // What was signed must be what it will be stored as.
        let signed_role = evidence::role_of(&evm::decode(&signed.raw)?.content(), &expected)
            .map_err(AttemptDefect::from)?;
        kind.check(signed_role).map_err(AttemptDefect::from)?;
        let kind = match kind {
            StoredKind::FeeBump => AttemptKind::FeeBump,
            StoredKind::Cancel | StoredKind::Original => AttemptKind::Cancel,
        };
        Ok(new_attempt(kind, request.chain_id, &signed))
    }

    /// The transfer the approved payload must be executed as, by this signer's network
    /// configuration, from the original attempt's sender at its nonce.
    fn expected_transfer(
        &self,
        payload: &WithdrawalPayload,
        network: &NetworkConfig,
        original: &evidence::TxContent,
    ) -> Result<ExpectedTransfer, SignerError> {
        let recipient = evidence::parse_address(payload.destination.as_str())
            .ok_or(SignerError::NotConfigured("destination format"))?;
        let asset = if payload.asset.as_str() == network.native_asset {
            evidence::Asset::Native
        } else {
            let token = network
                .tokens
                .get(payload.asset.as_str())
                .and_then(|t| evidence::parse_address(t))
                .ok_or(SignerError::NotConfigured("asset"))?;
            evidence::Asset::Token(token)
        };
        Ok(ExpectedTransfer {
            chain_id: network.chain_id,
            sender: original.sender,
            nonce: original.nonce,
            recipient,
            asset,
            amount: payload.amount.get(),
        })
    }

    /// Recomputes the payload hash from the stored fields; it must equal the stored hash and the
    /// hash every stored decision names (and there must be at least one decision).
    async fn verify(
        &self,
        tenant: TenantId,
        op: OperationId,
        input: &SigningInput,
    ) -> Result<(), SignerError> {
        let recomputed = input.operation.payload.hash();
        let approved = !input.decisions.is_empty()
            && input
                .decisions
                .iter()
                .all(|d| d.payload_hash.as_slice() == recomputed.as_bytes().as_slice());
        if recomputed == input.operation.payload_hash && approved {
            return Ok(());
        }
        self.store
            .record_security_event(
                tenant,
                op,
                "SIGNER_HASH_MISMATCH",
                Actor::Signer,
                &self.config.instance_id,
                "payload hash recomputed from stored fields differs from the stored or approved hash",
            )
            .await?;
        tracing::error!(%op, "refused to sign: recomputed payload hash does not match");
        Err(SignerError::HashMismatch)
    }

    /// Verifies every stored decision of the operation against the tenant's trust statement,
    /// itself verified against the administrator keys pinned in this signer's configuration, and
    /// evaluates the signed policy. Anything short is a security event and a refusal.
    async fn verify_approvals(
        &self,
        tenant: TenantId,
        op: OperationId,
        input: &SigningInput,
    ) -> Result<(), SignerError> {
        match self.trust.verify(tenant, op, input) {
            Ok(approval) => {
                if let Some(version) = approval.newly_accepted {
                    self.store.record_trust_seen(tenant, version).await?;
                }
                Ok(())
            }
            Err(unverified) => {
                self.store
                    .record_security_event(
                        tenant,
                        op,
                        unverified.event_kind(),
                        Actor::Signer,
                        &self.config.instance_id,
                        unverified.detail(),
                    )
                    .await?;
                tracing::error!(%op, reason = %unverified, "refused to sign: approvals not verified");
                Err(unverified.into())
            }
        }
    }

    async fn claim(
        &self,
        tenant: TenantId,
        op: OperationId,
        owner: &str,
        input: &SigningInput,
    ) -> Result<(), SignerError> {
        let lease = Duration::from_secs(self.config.lease_secs);
        let hash = input.operation.payload_hash;
        match input.operation.state {
            OperationState::Approved => {}
            OperationState::Signing if input.lease_expired => {
                // The previous claimant died before persisting anything: take the claim back.
                self.store
                    .release_claim(tenant, op, None, owner, "expired lease reclaimed")
                    .await?;
            }
            OperationState::Signing => {
                return Err(SignerError::NotSignable {
                    state: OperationState::Signing,
                    retry: true,
                });
            }
            state => {
                return Err(SignerError::NotSignable {
                    state,
                    retry: false,
                });
            }
        }
        match self
            .store
            .claim_for_signing(tenant, op, owner, hash, lease)
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::Conflict {
                current: Some(state),
            }) => Err(SignerError::NotSignable {
                state,
                retry: state == OperationState::Signing,
            }),
            Err(e) => Err(e.into()),
        }
    }

    fn wallet(
        &self,
        tenant: TenantId,
        payload: &WithdrawalPayload,
    ) -> Result<(&Wallet, &NetworkConfig), SignerError> {
        let network = self
            .config
            .networks
            .get(payload.network.as_str())
            .ok_or(SignerError::NotConfigured("network"))?;
        let wallet = self
            .wallets
            .get(tenant, payload.network.as_str())
            .ok_or(SignerError::NotConfigured("wallet"))?;
        Ok((wallet, network))
    }

    /// The wallet and the transfer (nonce left at 0) the payload asks for, within its fee cap.
    fn plan(
        &self,
        tenant: TenantId,
        payload: &WithdrawalPayload,
    ) -> Result<(Wallet, TransferRequest), SignerError> {
        let (wallet, network) = self.wallet(tenant, payload)?;
        // EVM transfers here carry no memo (a native transfer has no calldata, an ERC-20 transfer
        // exactly its `transfer` call): an approved memo could not be executed.
        if payload.memo.is_some() {
            return Err(SignerError::MemoNotExecutable);
        }
        let to: Address = payload
            .destination
            .as_str()
            .parse()
            .map_err(|_| SignerError::NotConfigured("destination format"))?;
        let amount = U256::from(payload.amount.get());
        let (kind, gas_limit) = if payload.asset.as_str() == network.native_asset {
            (
                TransferKind::Native { value: amount },
                network.gas_limit_native,
            )
        } else {
            let token = network
                .tokens
                .get(payload.asset.as_str())
                .ok_or(SignerError::NotConfigured("asset"))?;
            let token: Address = token
                .parse()
                .map_err(|_| SignerError::NotConfigured("token address"))?;
            (
                TransferKind::Erc20 { token, amount },
                network.gas_limit_erc20,
            )
        };
        let fee = |s: &str| {
            s.parse::<u128>()
                .map_err(|_| SignerError::NotConfigured("fees"))
        };
        let request = TransferRequest {
            chain_id: network.chain_id,
            nonce: 0,
            to,
            kind,
            gas_limit,
            max_fee_per_gas: fee(&network.max_fee_per_gas)?,
            max_priority_fee_per_gas: fee(&network.max_priority_fee_per_gas)?,
        };
        tx::build(&request).map_err(SignError::from)?;
        if tx::max_network_fee(&request) > payload.fee_cap.get() {
            return Err(SignerError::FeeCapExceeded);
        }
        Ok((wallet.clone(), request))
    }
}

/// A cancel at the previous attempt's nonce, paying at least 10% more than it (nodes refuse a
/// cheaper replacement), within the network's cancel budget.
fn cancel_request(
    previous: &TransferRequest,
    network: &NetworkConfig,
    from: Address,
) -> Result<TransferRequest, SignError> {
    let budget: u128 = network
        .cancel_max_fee_per_gas
        .parse()
        .map_err(|_| SignError::Unsupported("cancel budget"))?;
    let raise = |fee: u128| fee.saturating_add(fee.div_ceil(10));
    let max_fee = raise(previous.max_fee_per_gas);
    if max_fee > budget {
        let gas = u128::from(network.gas_limit_native);
        return Err(SignError::from(TxError::FeeCapExceeded {
            required: gas.saturating_mul(max_fee),
            fee_cap: gas.saturating_mul(budget),
        }));
    }
    Ok(tx::cancel(
        previous.chain_id,
        previous.nonce,
        from,
        network.gas_limit_native,
        max_fee,
        raise(previous.max_priority_fee_per_gas).min(max_fee),
    ))
}
