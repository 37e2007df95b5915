//! Deciding from evidence. Order of authority (OpenZeppelin relayer, op txmgr): the receipt of
//! the latest attempt, then of every earlier attempt, then the sender's nonce at a block deep
//! enough to be final. Any RPC failure yields no verdict. Absence of evidence never releases a
//! hold: an unconsumed nonce leads to a cancel replacement, and the chain decides which one mines.

use chrono::Utc;
use opledger_chain::{Receipt, Rpc, SubmitClass};
use opledger_domain::state::{Actor, OperationState};
use opledger_grpc::telemetry;
use opledger_grpc::telemetry::grpc::TracedChannel;
use opledger_proto::v1 as pb;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_store::broadcast::{Inclusion, Unresolved};
use opledger_store::signing::{Attempt, AttemptKind};
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreError};
use std::collections::HashMap;
use std::time::Duration;
use tracing::Instrument as _;

/// One network as the reconciler reads it.
#[derive(Debug, Clone)]
pub struct Network {
    /// Its JSON-RPC endpoint.
    pub rpc: Rpc,
    /// Confirmations that make an inclusion final (the including block counted).
    pub confirmations: u64,
}

/// What examining one operation established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// A node did not answer (or answered nonsense): nothing concluded, nothing changed.
    NoVerdict,
    /// A transfer attempt is included with enough confirmations: CONFIRMED, hold settled.
    Confirmed,
    /// A transfer attempt is included but not yet final: back to BROADCAST for the watcher.
    Included,
    /// A cancel is included with enough confirmations, or the nonce was consumed by another
    /// final transaction: the transfer cannot happen. VERIFIED_NOT_SENT, hold released.
    VerifiedNotSent,
    /// The included attempt reverted: FAILED_TERMINAL for an owner, hold kept.
    Reverted,
    /// Not found and the nonce is unconsumed, but not for long: wait.
    Waiting,
    /// Not found, nonce unconsumed for too long: a cancel replacement was signed (persisted by
    /// the signer) and its stored bytes submitted.
    CancelSubmitted(SubmitClass),
    /// UNKNOWN for longer than the escalation window without a verdict: FAILED_TERMINAL with an
    /// owner and a reason code, hold kept, for a person to resolve.
    Escalated,
}

/// How long the reconciler waits before acting without a verdict.
#[derive(Debug, Clone)]
pub struct Policy {
    /// An attempt not found with its nonce unconsumed for this long gets a cancel replacement.
    pub cancel_after: Duration,
    /// When UNKNOWN operations are escalated, and to whom.
    pub escalation: Escalation,
}

/// Who takes over what automation cannot resolve, and after how long.
#[derive(Debug, Clone)]
pub struct Escalation {
    /// The owning team recorded on the escalation.
    pub owner: String,
    /// Seconds an operation may stay UNKNOWN without a verdict.
    pub after_secs: u64,
}

/// What the chain says about an operation, established without changing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evidence {
    /// A node did not answer: nothing can be concluded.
    NoAnswer,
    /// This attempt is included (`is_final` once it has the required confirmations).
    Included {
        /// The included attempt (a transfer or a cancel).
        attempt: Attempt,
        /// Its receipt.
        receipt: Receipt,
        /// True with the required confirmations.
        is_final: bool,
    },
    /// None of the attempts is included and the sender's nonce is consumed at a final depth.
    NonceConsumedElsewhere,
    /// None of the attempts is included and the nonce is unconsumed.
    NotFound {
        /// The latest attempt.
        latest: Attempt,
    },
}

/// Why an operation could not be examined (it is retried on the next pass).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// No RPC endpoint for the operation's network.
    #[error("no rpc endpoint configured for network {0}")]
    NoRpc(String),
    /// The signer refused or could not be reached.
    #[error("signer: {0}")]
    Signer(String),
    /// The requested resolution is not what the evidence shows.
    #[error("the chain evidence shows {shows}, not the requested outcome")]
    EvidenceMismatch {
        /// What the evidence shows.
        shows: &'static str,
    },
    /// The operation is not UNKNOWN or FAILED_TERMINAL.
    #[error("withdrawal is not unresolved")]
    NotUnresolved,
    /// The store failed.
    #[error("store: {}", .0.log_safe())]
    Store(#[from] StoreError),
}

impl Evidence {
    /// A short description for operators (no identifiers).
    pub fn describe(&self) -> &'static str {
        match self {
            Evidence::NoAnswer => "nothing: the node did not answer",
            Evidence::Included {
                attempt,
                receipt,
                is_final,
            } => match (attempt.signed.kind, receipt.succeeded, is_final) {
                (_, false, _) => "an included attempt that reverted",
                (AttemptKind::Cancel, true, true) => "a final cancel",
                (AttemptKind::Cancel, true, false) => "a cancel not yet final",
                (AttemptKind::Original | AttemptKind::FeeBump, true, true) => "a final transfer",
                (AttemptKind::Original | AttemptKind::FeeBump, true, false) => {
                    "a transfer not yet final"
                }
            },
            Evidence::NonceConsumedElsewhere => "the nonce consumed by another transaction",
            Evidence::NotFound { .. } => "no attempt included and the nonce unconsumed",
        }
    }
}

/// The reconciler.
#[derive(Debug, Clone)]
pub struct Reconciler {
    store: Store,
    networks: HashMap<String, Network>,
    signer: SignerServiceClient<TracedChannel>,
    signer_token: String,
    cancel_after: Duration,
    escalation: Escalation,
    worker_id: String,
}

impl Reconciler {
    /// A reconciler over this store, networks and signer.
    pub fn new(
        store: Store,
        networks: HashMap<String, Network>,
        signer: SignerServiceClient<TracedChannel>,
        signer_token: String,
        policy: Policy,
        worker_id: String,
    ) -> Reconciler {
        let Policy {
            cancel_after,
            escalation,
        } = policy;
        Reconciler {
            store,
            networks,
            signer,
            signer_token,
            cancel_after,
            escalation,
            worker_id,
        }
    }

    /// One pass over up to `limit` unresolved operations; returns what each yielded.
    pub async fn tick(&self, stale_secs: u64, limit: u32) -> Vec<Finding> {
        let unresolved = match self.store.unresolved(stale_secs, limit).await {
            Ok(unresolved) => unresolved,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read unresolved operations");
                return Vec::new();
            }
        };
        let mut findings = Vec::with_capacity(unresolved.len());
        for op in &unresolved {
            // Each examination is a step of the operation's trace.
            let span = tracing::info_span!(
                "reconciler.examine",
                opledger.service = "reconciler",
                op_id = %op.op_id,
                from_state = op.state.as_str(),
                finding = tracing::field::Empty,
            );
            if telemetry::enabled() {
                let stored = self.store.trace_context(op.tenant_id, op.op_id).await;
                telemetry::parent_on(&span, stored.ok().flatten().as_deref());
            }
            let finding = async {
                let finding = match self.reconcile(op).await {
                    Ok(finding) => finding,
                    Err(e) => {
                        tracing::warn!(op_id = %op.op_id, error = %e, "reconciliation deferred");
                        Finding::NoVerdict
                    }
                };
                self.escalate_if_overdue(op, finding).await
            }
            .instrument(span.clone())
            .await;
            span.record("finding", tracing::field::debug(finding));
            findings.push(finding);
        }
        findings
    }

    /// A window with no verdict ends in FAILED_TERMINAL with an owner; the hold stays.
    async fn escalate_if_overdue(&self, op: &Unresolved, finding: Finding) -> Finding {
        let undecided = matches!(
            finding,
            Finding::NoVerdict | Finding::Waiting | Finding::CancelSubmitted(_)
        );
        if !undecided {
            return finding;
        }
        let overdue = match self
            .store
            .seconds_since_change(op.tenant_id, op.op_id)
            .await
        {
            Ok(secs) => secs >= self.escalation.after_secs,
            Err(_) => false,
        };
        if !overdue {
            return finding;
        }
        let request = TransitionRequest::new(
            op.tenant_id,
            op.op_id,
            OperationState::Unknown,
            OperationState::FailedTerminal,
            Actor::Reconciler,
            &self.worker_id,
            "no verdict within the reconciliation window",
        );
        match self
            .store
            .escalate(&request, &self.escalation.owner, "NO_VERDICT_WITHIN_WINDOW")
            .await
        {
            Ok(()) => {
                tracing::error!(op_id = %op.op_id, owner = %self.escalation.owner, "escalated: FAILED_TERMINAL, hold kept");
                Finding::Escalated
            }
            Err(e) => {
                tracing::warn!(op_id = %op.op_id, error = %e.log_safe(), "escalation deferred");
                finding
            }
        }
    }

    /// What the chain says about an operation's attempts, without changing anything.
    pub async fn evidence(&self, op: &Unresolved) -> Result<Evidence, ReconcileError> {
        let network = self
            .networks
            .get(&op.network)
            .ok_or_else(|| ReconcileError::NoRpc(op.network.clone()))?;
        let attempts = self.store.attempts(op.tenant_id, op.op_id).await?;
        let (Some(first), Some(latest)) = (attempts.first(), attempts.last()) else {
            return Ok(Evidence::NoAnswer);
        };
        let Some(head) = network.rpc.block_number().await else {
            return Ok(Evidence::NoAnswer);
        };
        for attempt in attempts.iter().rev() {
            match network.rpc.receipt(&attempt.signed.tx_hash).await {
                Err(()) => return Ok(Evidence::NoAnswer),
                Ok(None) => continue,
                Ok(Some(receipt)) => {
                    let is_final =
                        head.saturating_sub(receipt.block_number) + 1 >= network.confirmations;
                    return Ok(Evidence::Included {
                        attempt: attempt.clone(),
                        receipt,
                        is_final,
                    });
                }
            }
        }
        // None of our attempts is included. Is the nonce consumed at a final depth?
        let final_block = (head + 1).saturating_sub(network.confirmations);
        match network
            .rpc
            .transaction_count(&first.signed.sender, final_block)
            .await
        {
            None => Ok(Evidence::NoAnswer),
            Some(count) if count > first.signed.nonce => Ok(Evidence::NonceConsumedElsewhere),
            Some(_) => Ok(Evidence::NotFound {
                latest: latest.clone(),
            }),
        }
    }

    /// An operator's resolution of an UNKNOWN or FAILED_TERMINAL operation: applied only when the
    /// evidence, re-examined now, shows exactly `outcome`.
    pub async fn resolve(
        &self,
        op: &Unresolved,
        outcome: OperationState,
        operator: &str,
        reason: &str,
    ) -> Result<OperationState, ReconcileError> {
        if !matches!(
            op.state,
            OperationState::Unknown | OperationState::FailedTerminal
        ) {
            return Err(ReconcileError::NotUnresolved);
        }
        let evidence = self.evidence(op).await?;
        let shows = evidence.describe();
        let request = TransitionRequest::new(
            op.tenant_id,
            op.op_id,
            op.state,
            outcome,
            Actor::Operator,
            operator,
            reason,
        );
        match (&evidence, outcome) {
            (
                Evidence::Included {
                    attempt,
                    receipt,
                    is_final: true,
                },
                OperationState::Confirmed,
            ) if receipt.succeeded && attempt.signed.kind != AttemptKind::Cancel => {
                let inclusion = Inclusion {
                    tenant_id: op.tenant_id,
                    op_id: op.op_id,
                    tx_hash: attempt.signed.tx_hash.clone(),
                    block_number: receipt.block_number,
                    block_hash: receipt.block_hash.clone(),
                };
                self.store.confirm(&request, &inclusion).await?;
            }
            (
                Evidence::Included {
                    attempt,
                    receipt,
                    is_final: true,
                },
                OperationState::VerifiedNotSent,
            ) if receipt.succeeded && attempt.signed.kind == AttemptKind::Cancel => {
                self.store.transition(&request).await?;
            }
            (Evidence::NonceConsumedElsewhere, OperationState::VerifiedNotSent) => {
                self.store.transition(&request).await?;
            }
            (
                Evidence::Included {
                    attempt,
                    receipt,
                    is_final: false,
                },
                OperationState::Broadcast,
            ) if receipt.succeeded && attempt.signed.kind != AttemptKind::Cancel => {
                self.store.transition(&request).await?;
            }
            _ => return Err(ReconcileError::EvidenceMismatch { shows }),
        }
        tracing::info!(op_id = %op.op_id, to = outcome.as_str(), "resolved by an operator");
        Ok(outcome)
    }

    /// Examines one operation and moves it only as far as the evidence allows.
    pub async fn reconcile(&self, op: &Unresolved) -> Result<Finding, ReconcileError> {
        let latest = match self.evidence(op).await? {
            Evidence::NoAnswer => return Ok(Finding::NoVerdict),
            Evidence::Included {
                attempt,
                receipt,
                is_final,
            } => {
                return self.included(op, &attempt, receipt, is_final).await;
            }
            Evidence::NonceConsumedElsewhere => {
                self.settle_as(
                    op,
                    OperationState::VerifiedNotSent,
                    "nonce consumed by another transaction",
                )
                .await?;
                return Ok(Finding::VerifiedNotSent);
            }
            Evidence::NotFound { latest } => latest,
        };
        if op.state == OperationState::Broadcast {
            self.move_op(
                op,
                OperationState::Broadcast,
                OperationState::Unknown,
                "not found on chain",
            )
            .await?;
        }
        let age = (Utc::now() - latest.created_at)
            .to_std()
            .unwrap_or(Duration::ZERO);
        if age < self.cancel_after {
            return Ok(Finding::Waiting);
        }
        let network = self
            .networks
            .get(&op.network)
            .ok_or_else(|| ReconcileError::NoRpc(op.network.clone()))?;
        let cancel = if latest.signed.kind == AttemptKind::Cancel {
            // Rebroadcasting stored bytes is always safe.
            latest
        } else {
            self.sign_cancel(op).await?
        };
        let class = network
            .rpc
            .send_raw_transaction(&cancel.signed.raw_tx)
            .await;
        tracing::info!(op_id = %op.op_id, class = class.as_str(), "cancel replacement submitted");
        Ok(Finding::CancelSubmitted(class))
    }

    async fn included(
        &self,
        op: &Unresolved,
        attempt: &Attempt,
        receipt: Receipt,
        is_final: bool,
    ) -> Result<Finding, ReconcileError> {
        if !is_final {
            if op.state == OperationState::Unknown {
                self.move_op(
                    op,
                    OperationState::Unknown,
                    OperationState::Broadcast,
                    "included, awaiting confirmations",
                )
                .await?;
            }
            return Ok(Finding::Included);
        }
        if !receipt.succeeded {
            self.move_op(
                op,
                op.state,
                OperationState::FailedTerminal,
                "REVERTED: the included attempt reverted",
            )
            .await?;
            return Ok(Finding::Reverted);
        }
        match attempt.signed.kind {
            AttemptKind::Cancel => {
                self.settle_as(
                    op,
                    OperationState::VerifiedNotSent,
                    "cancel replacement included",
                )
                .await?;
                Ok(Finding::VerifiedNotSent)
            }
            AttemptKind::Original | AttemptKind::FeeBump => {
                let request = TransitionRequest::new(
                    op.tenant_id,
                    op.op_id,
                    op.state,
                    OperationState::Confirmed,
                    Actor::Reconciler,
                    &self.worker_id,
                    "transfer included with the required confirmations",
                );
                let inclusion = Inclusion {
                    tenant_id: op.tenant_id,
                    op_id: op.op_id,
                    tx_hash: attempt.signed.tx_hash.clone(),
                    block_number: receipt.block_number,
                    block_hash: receipt.block_hash.clone(),
                };
                self.store.confirm(&request, &inclusion).await?;
                tracing::info!(op_id = %op.op_id, "reconciled: confirmed");
                Ok(Finding::Confirmed)
            }
        }
    }

    /// VERIFIED_NOT_SENT is reached from UNKNOWN; a BROADCAST operation passes through UNKNOWN.
    async fn settle_as(
        &self,
        op: &Unresolved,
        to: OperationState,
        reason: &str,
    ) -> Result<(), ReconcileError> {
        let mut from = op.state;
        if from == OperationState::Broadcast {
            self.move_op(op, from, OperationState::Unknown, reason)
                .await?;
            from = OperationState::Unknown;
        }
        self.move_op(op, from, to, reason).await
    }

    async fn move_op(
        &self,
        op: &Unresolved,
        from: OperationState,
        to: OperationState,
        reason: &str,
    ) -> Result<(), ReconcileError> {
        let request = TransitionRequest::new(
            op.tenant_id,
            op.op_id,
            from,
            to,
            Actor::Reconciler,
            &self.worker_id,
            reason,
        );
        match self.store.transition(&request).await {
            Ok(_) => {
                tracing::info!(op_id = %op.op_id, from = from.as_str(), to = to.as_str(), "reconciled");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Asks the signer for a CANCEL replacement and returns it as persisted in the store.
    async fn sign_cancel(&self, op: &Unresolved) -> Result<Attempt, ReconcileError> {
        let mut request = tonic::Request::new(pb::SignReplacementRequest {
            tenant_id: op.tenant_id.to_string(),
            withdrawal_id: op.op_id.to_string(),
            kind: pb::AttemptKind::Cancel as i32,
        });
        if let Ok(value) = format!("Bearer {}", self.signer_token).parse() {
            request.metadata_mut().insert("authorization", value);
        }
        self.signer
            .clone()
            .sign_replacement(request)
            .await
            .map_err(|s| {
                ReconcileError::Signer(
                    opledger_grpc::status::reason_of(&s)
                        .unwrap_or_else(|| format!("{:?}", s.code())),
                )
            })?;
        // Only stored bytes are ever submitted.
        self.store
            .attempts(op.tenant_id, op.op_id)
            .await?
            .pop()
            .filter(|a| a.signed.kind == AttemptKind::Cancel)
            .ok_or(ReconcileError::Signer(
                "the cancel was not persisted".to_owned(),
            ))
    }
}
