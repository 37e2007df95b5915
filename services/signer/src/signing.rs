//! The signing procedure: verify, claim, sign, persist, answer. No step trusts a value it did not
//! recompute from the stored fields.

use crate::batch::{Job, Lanes};
use crate::config::{Capability, Config, NetworkConfig};
use crate::trust::TrustRoots;
use crate::wallets::{Wallet, Wallets};
use alloy_primitives::{Address, U256};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::WithdrawalPayload;
use opledger_domain::state::{Actor, OperationState};
use opledger_evm::signer::{self as evm, SignError};
use opledger_evm::tx::{self, TransferKind, TransferRequest, TxError};
use opledger_store::signing::{
    Attempt, AttemptKind, GuardRefusal, NewAttempt, ReplacementError, ReplacementGuard,
    SigningInput,
};
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

    /// Signs an APPROVED withdrawal once; any later call returns the persisted attempt.
    pub async fn sign_withdrawal(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Signed, SignerError> {
        if let Some(stored) = self.stored(tenant, op).await? {
            return Ok(stored);
        }
        let input = self
            .store
            .signing_input(tenant, op)
            .await?
            .ok_or(SignerError::NotFound)?;
        let state = input.operation.state;
        if !matches!(state, OperationState::Approved | OperationState::Signing) {
            // Signed by a concurrent call between our two reads: answer with its artifact.
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
        let persisted = self
            .lanes
            .persist(network, &wallet.address, job)
            .await
            .map_err(|_| SignerError::Interrupted)??;
        match persisted {
            Ok(attempt) => {
                tracing::info!(%op, nonce = attempt.signed.nonce, "withdrawal signed and persisted");
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

    /// The latest persisted attempt, if the operation was signed.
    async fn stored(
        &self,
        tenant: TenantId,
        op: OperationId,
    ) -> Result<Option<Signed>, SignerError> {
        Ok(self
            .store
            .attempts(tenant, op)
            .await?
            .pop()
            .map(|attempt| Signed {
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
        let (wallet, network) = self.wallet(tenant, payload)?;
        let fee_cap = payload.fee_cap.get();
        let key = wallet.key.clone();
        let (states, min_age_secs): (&[OperationState], u64) = match kind {
            AttemptKind::FeeBump => (
                &[OperationState::Broadcast],
                self.config.fee_bump_min_age_secs,
            ),
            AttemptKind::Cancel | AttemptKind::Original => {
                (&[OperationState::Unknown], self.config.cancel_min_age_secs)
            }
        };
        let guard = ReplacementGuard {
            states,
            min_age: Duration::from_secs(min_age_secs),
        };
        let persisted = self
            .store
            .persist_replacement(tenant, op, &guard, |latest| {
                let previous = evm::decode(&latest.signed.raw_tx)?
                    .transfer_request()
                    .ok_or(SignError::Unsupported("stored attempt is not a transfer"))?;
                let request = match kind {
                    AttemptKind::FeeBump => tx::bump(&previous, network.fee_bump_percent, fee_cap)
                        .map_err(SignError::from)?,
                    AttemptKind::Cancel | AttemptKind::Original => {
                        cancel_request(&previous, network, key.address())?
                    }
                };
                let signed = evm::sign(&request, key.as_ref())?;
                Ok::<_, SignError>(new_attempt(kind, request.chain_id, &signed))
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
            Err(ReplacementError::Sign(SignError::Request(refused))) => {
                return Err(SignerError::Replacement(refused));
            }
            Err(ReplacementError::Sign(other)) => return Err(SignerError::Sign(other)),
        };
        tracing::info!(%op, caller, attempt = attempt.attempt, kind = kind.as_str(), "replacement signed and persisted");
        Ok(Signed {
            attempt,
            already_signed: false,
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
                        "approvals do not verify against the tenant's pinned trust root",
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

pub(crate) fn new_attempt(
    kind: AttemptKind,
    chain_id: u64,
    signed: &evm::SignedTransaction,
) -> NewAttempt {
    NewAttempt {
        kind,
        chain_id,
        sender: format!("{:#x}", signed.from),
        nonce: signed.nonce,
        tx_hash: format!("{:#x}", signed.hash),
        raw_tx: signed.raw.clone(),
        gas_limit: signed.gas_limit,
        max_fee_per_gas: signed.max_fee_per_gas,
        max_priority_fee_per_gas: signed.max_priority_fee_per_gas,
    }
}
