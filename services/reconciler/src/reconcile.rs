//! Deciding from evidence. What the chain says is read by a quorum of independent endpoints at
//! one pinned block (`opledger_chain::evidence`); what it means is decided by the domain's pure
//! functions (`opledger_domain::evidence::{decide, next_step, resolution_allowed}`), the same ones
//! the model checker drives. This module only gathers the evidence and carries out the one step
//! the verdict allows: a settlement needs our transfer at final depth, a release our own cancel at
//! final depth, and a nonce consumed without any of our attempts goes to security. Any failure to
//! read yields no verdict; absence of evidence never releases a hold.

use chrono::Utc;
use opledger_chain::evidence::{B256, EvidenceReader, Pinned, Pins, no_evidence, reason_label};
use opledger_chain::{Rpc, SubmitClass};
use opledger_domain::evidence::{
    AttemptDefect, Escalation, EscalationOwner, Hash32, NoAgreement, NoVerdict, Resolution, Role,
    Step, Timing, Verdict, decide, next_step, resolution_allowed,
};
use opledger_domain::state::{Actor, OperationState};
use opledger_domain::witness::{Principal, ReleaseEvidence};
use opledger_evm::evidence::StoredAttempt;
use opledger_grpc::telemetry;
use opledger_grpc::telemetry::grpc::TracedChannel;
use opledger_proto::v1 as pb;
use opledger_proto::v1::signer_service_client::SignerServiceClient;
use opledger_store::broadcast::{Inclusion, Unresolved};
use opledger_store::pass::PassLocks;
use opledger_store::signing::{Attempt, AttemptKind};
use opledger_store::transition::TransitionRequest;
use opledger_store::{Store, StoreError};
use std::collections::HashMap;
use std::time::Duration;
use tracing::Instrument as _;

/// One network as the reconciler reads it.
#[derive(Debug, Clone)]
pub struct Network {
    /// Where cancel replacements are submitted.
    pub rpc: Rpc,
    /// The quorum of endpoints whose agreement is evidence, with the network's finality.
    pub evidence: EvidenceReader,
}

/// What examining one operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// The evidence allowed no verdict (no agreement, lag, an inconsistent reading): nothing
    /// changed.
    NoVerdict,
    /// A transfer attempt is included at final depth: CONFIRMED, hold settled.
    Confirmed,
    /// A transfer attempt is included but not yet final: back to BROADCAST for the watcher.
    Included,
    /// Our own cancel is included at final depth: VERIFIED_NOT_SENT, hold released (the witness
    /// attested the same evidence).
    VerifiedNotSent,
    /// Our own cancel is included at final depth and the release is proposed with that evidence:
    /// the operation stays UNKNOWN, its hold held, until the witness attests the same evidence.
    AwaitingWitness,
    /// Nothing to do yet (an attempt waiting to be mined, a cancel waiting for finality).
    Waiting,
    /// None of our attempts is included, the nonce is unconsumed and the cancel window passed: a
    /// cancel replacement was signed (persisted by the signer), or the stored one resubmitted.
    CancelSubmitted(SubmitClass),
    /// FAILED_TERMINAL with an owner and this reason code, hold kept: a reverted attempt, a nonce
    /// consumed without us, an attempt that is not what it is stored as, or no verdict within
    /// the window.
    Escalated(&'static str),
}

/// How long the reconciler waits before acting without a verdict.
#[derive(Debug, Clone)]
pub struct Policy {
    /// An attempt not found with its nonce unconsumed for this long gets a cancel replacement.
    pub cancel_after: Duration,
    /// When UNKNOWN operations are escalated, and to whom.
    pub escalation: EscalationPolicy,
}

/// Who takes over what automation cannot resolve, and after how long.
#[derive(Debug, Clone)]
pub struct EscalationPolicy {
    /// The owning team recorded on escalations for payments (no verdict, a reverted attempt).
    pub owner: String,
    /// The owning team recorded on escalations for security (a nonce consumed without us, an
    /// attempt that contradicts its row).
    pub security_owner: String,
    /// Seconds an operation may stay without a verdict before it is escalated.
    pub after_secs: u64,
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
    /// The release is proposed with its evidence; the witness has not attested it yet, so the
    /// hold is kept (nothing else changed).
    #[error("the release awaits the witness's attestation")]
    AwaitingWitness,
    /// The store failed.
    #[error("store: {}", .0.log_safe())]
    Store(#[from] StoreError),
}

/// A short description of a verdict for operators (no identifiers).
pub fn describe(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::NoVerdict(NoVerdict::NoAgreement(_)) => {
            "nothing: the endpoints did not answer or did not agree"
        }
        Verdict::NoVerdict(NoVerdict::Inconsistent) => "nothing: the reading is inconsistent",
        Verdict::NoVerdict(NoVerdict::NonceMovedNotFinal) => {
            "nothing yet: the nonce moved, not at final depth"
        }
        Verdict::Tampered { .. } => "an attempt that is not what it is stored as",
        Verdict::Settled { .. } => "a final transfer",
        Verdict::Pending {
            role: Role::Transfer,
            ..
        } => "a transfer not yet final",
        Verdict::Pending {
            role: Role::Cancel, ..
        } => "a cancel not yet final",
        Verdict::Cancelled { .. } => "a final cancel",
        Verdict::Reverted { .. } => "a final attempt that reverted",
        Verdict::NonceMovedWithoutUs => "the nonce consumed at final depth by none of our attempts",
        Verdict::NotIncluded => "no attempt included and the nonce unconsumed",
        Verdict::NeverSigned => "no signed attempt",
    }
}

/// The evidence gathered about one operation: its attempts, oldest first, and the verdict.
#[derive(Debug, Clone)]
pub struct Assessment {
    /// Its attempts as stored.
    pub attempts: Vec<Attempt>,
    /// The role of each attempt, from its content (or why it has none).
    pub roles: Vec<Result<Role, AttemptDefect>>,
    /// Each attempt's transaction hash, computed from its bytes.
    pub hashes: Vec<Hash32>,
    /// What the agreed evidence establishes.
    pub verdict: Verdict,
}

/// The reconciler.
#[derive(Debug, Clone)]
pub struct Reconciler {
    store: Store,
    networks: HashMap<String, Network>,
    signer: SignerServiceClient<TracedChannel>,
    signer_token: String,
    cancel_after: Duration,
    escalation: EscalationPolicy,
    worker_id: String,
    pass_locks: Option<PassLocks>,
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
            pass_locks: None,
        }
    }

    /// The same reconciler examining each operation only under its pass lock
    /// ([`PassLocks::try_lock`], the broadcasters' too), so that of several reconcilers on one
    /// database only one decides and acts on it at a time (one cancel, not one per replica).
    pub fn with_pass_locks(mut self, locks: PassLocks) -> Reconciler {
        self.pass_locks = Some(locks);
        self
    }

    /// [`Reconciler::reconcile_at`] under the operation's pass lock when there are pass locks:
    /// an operation another replica is examining, or that moved since it was read, waits for the
    /// next pass.
    async fn examine(
        &self,
        op: &Unresolved,
        pinned: Option<Result<Pinned, NoAgreement>>,
    ) -> Result<Finding, ReconcileError> {
        let Some(locks) = &self.pass_locks else {
            return self.reconcile_at(op, pinned).await;
        };
        let Some(lock) = locks.try_lock(op.tenant_id, op.op_id).await? else {
            return Ok(Finding::Waiting);
        };
        let finding = if lock.state == op.state {
            self.reconcile_at(op, pinned).await
        } else {
            Ok(Finding::Waiting)
        };
        lock.release().await;
        finding
    }

    /// One pass over up to `limit` unresolved operations; returns what each yielded. Each
    /// network is pinned once per pass: every operation of it is read at the same block.
    pub async fn tick(&self, stale_secs: u64, limit: u32) -> Vec<Finding> {
        let unresolved = match self.store.unresolved(stale_secs, limit).await {
            Ok(unresolved) => unresolved,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "cannot read unresolved operations");
                return Vec::new();
            }
        };
        let mut pins = Pins::default();
        let mut findings = Vec::with_capacity(unresolved.len());
        for op in &unresolved {
            let reader = self.networks.get(&op.network).map(|n| &n.evidence);
            let pinned = pins.get(&op.network, reader).await;
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
                match self.examine(op, pinned).await {
                    Ok(finding) => finding,
                    Err(e) => {
                        tracing::warn!(op_id = %op.op_id, error = %e, "reconciliation deferred");
                        Finding::NoVerdict
                    }
                }
            }
            .instrument(span.clone())
            .await;
            span.record("finding", tracing::field::debug(finding));
            findings.push(finding);
        }
        findings
    }

    /// What the chain says about an operation's attempts, read now at a fresh pinned block,
    /// without changing anything.
    pub async fn assess(&self, op: &Unresolved) -> Result<Assessment, ReconcileError> {
        self.assess_at(op, None).await
    }

    async fn assess_at(
        &self,
        op: &Unresolved,
        pinned: Option<Result<Pinned, NoAgreement>>,
    ) -> Result<Assessment, ReconcileError> {
        let network = self
            .networks
            .get(&op.network)
            .ok_or_else(|| ReconcileError::NoRpc(op.network.clone()))?;
        let attempts = self.store.attempts(op.tenant_id, op.op_id).await?;
        let Some(original) = attempts.first() else {
            return Ok(Assessment {
                attempts,
                roles: Vec::new(),
                hashes: Vec::new(),
                verdict: Verdict::NeverSigned,
            });
        };
        // A held-back attempt has no bytes for this login (the signed-bytes gate): nothing is
        // judged by content until the signer releases it.
        if attempts.iter().any(|a| !a.released) {
            no_evidence().record(&op.network, "inconsistent");
            return Ok(Assessment {
                attempts,
                roles: Vec::new(),
                hashes: Vec::new(),
                verdict: Verdict::NoVerdict(NoVerdict::Inconsistent),
            });
        }
        let operation = self
            .store
            .get_withdrawal(op.tenant_id, op.op_id)
            .await?
            .ok_or(StoreError::NotFound { what: "withdrawal" })?;
        let payload = &operation.payload;
        let stored: Vec<StoredAttempt<'_>> = attempts.iter().map(Attempt::as_stored).collect();
        let judged = opledger_evm::evidence::judge(
            &stored,
            payload.destination.as_str(),
            payload.amount.get(),
        );
        let roles = judged.roles;
        let pinned = match pinned {
            Some(pinned) => pinned,
            None => network.evidence.pin().await.map_err(|e| e.no_agreement()),
        };
        let nonce = original.signed.nonce;
        let mut verdict = match &pinned {
            Ok(pinned) => {
                pinned
                    .verdict(&roles, judged.sender, nonce, &judged.hashes)
                    .await
            }
            Err(no) => decide(&roles, nonce, &Err(*no)),
        };
        // Attempts read before the chain: a replacement persisted (and mined) in between would
        // look like a nonce moved without us. Read them again; any change is no verdict now.
        if !matches!(verdict, Verdict::NoVerdict(_) | Verdict::Tampered { .. })
            && self.store.attempts(op.tenant_id, op.op_id).await?.len() != attempts.len()
        {
            verdict = Verdict::NoVerdict(NoVerdict::Inconsistent);
        }
        match verdict {
            Verdict::NoVerdict(NoVerdict::NoAgreement(no)) => {
                no_evidence().record(&op.network, reason_label(&no));
            }
            Verdict::NoVerdict(NoVerdict::Inconsistent) => {
                no_evidence().record(&op.network, "inconsistent");
            }
            _ => {}
        }
        Ok(Assessment {
            attempts,
            roles,
            hashes: judged.hashes.iter().map(|h| h.0).collect(),
            verdict,
        })
    }

    /// An operator's resolution of an UNKNOWN or FAILED_TERMINAL operation: applied only when the
    /// evidence, read now by the quorum, supports exactly `outcome`
    /// ([`opledger_domain::evidence::resolution_allowed`]).
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
        let assessment = self.assess(op).await?;
        let verdict = assessment.verdict;
        let shows = describe(&verdict);
        let resolution = match outcome {
            OperationState::Confirmed => Resolution::Confirmed,
            OperationState::VerifiedNotSent => Resolution::VerifiedNotSent,
            OperationState::Broadcast => Resolution::Broadcast,
            _ => return Err(ReconcileError::EvidenceMismatch { shows }),
        };
        if !resolution_allowed(verdict, resolution) {
            return Err(ReconcileError::EvidenceMismatch { shows });
        }
        let request = TransitionRequest::new(
            op.tenant_id,
            op.op_id,
            op.state,
            outcome,
            Actor::Operator,
            operator,
            reason,
        );
        match verdict {
            Verdict::Settled { attempt, inclusion } => {
                let inclusion = self.inclusion(op, &assessment.attempts, attempt, inclusion)?;
                self.store.confirm(&request, &inclusion).await?;
            }
            _ => {
                if outcome == OperationState::VerifiedNotSent
                    && !self
                        .propose(op, &assessment, Principal::Operator, operator)
                        .await?
                {
                    return Err(ReconcileError::AwaitingWitness);
                }
                self.store.transition(&request).await?;
            }
        }
        tracing::info!(op_id = %op.op_id, to = outcome.as_str(), "resolved by an operator");
        Ok(outcome)
    }

    /// Examines one operation (at a fresh pinned block) and moves it only as far as the evidence
    /// allows.
    pub async fn reconcile(&self, op: &Unresolved) -> Result<Finding, ReconcileError> {
        self.reconcile_at(op, None).await
    }

    async fn reconcile_at(
        &self,
        op: &Unresolved,
        pinned: Option<Result<Pinned, NoAgreement>>,
    ) -> Result<Finding, ReconcileError> {
        let assessment = self.assess_at(op, pinned).await?;
        let verdict = assessment.verdict;
        let latest_role = assessment
            .roles
            .last()
            .and_then(|r| r.ok())
            .unwrap_or(Role::Transfer);
        let latest_age = assessment
            .attempts
            .last()
            .map(|a| {
                (Utc::now() - a.created_at)
                    .to_std()
                    .unwrap_or(Duration::ZERO)
            })
            .unwrap_or(Duration::ZERO);
        let mut state = op.state;
        // At most two steps: a move that keeps the hold (BROADCAST -> UNKNOWN), then what the same
        // evidence allows from there.
        for _ in 0..2 {
            let unchanged_secs = self
                .store
                .seconds_since_change(op.tenant_id, op.op_id)
                .await?;
            let timing = Timing {
                latest_attempt_age_secs: latest_age.as_secs(),
                latest_role,
                unchanged_secs,
                cancel_after_secs: self.cancel_after.as_secs(),
                escalate_after_secs: self.escalation.after_secs,
            };
            match next_step(state, verdict, timing) {
                Step::Wait => {
                    return Ok(match verdict {
                        Verdict::NoVerdict(_) => Finding::NoVerdict,
                        _ => Finding::Waiting,
                    });
                }
                Step::Confirm { attempt, inclusion } => {
                    let inclusion = self.inclusion(op, &assessment.attempts, attempt, inclusion)?;
                    let request = self.request(
                        op,
                        state,
                        OperationState::Confirmed,
                        "transfer included at final depth, agreed by the quorum",
                    );
                    self.store.confirm(&request, &inclusion).await?;
                    tracing::info!(op_id = %op.op_id, "reconciled: confirmed");
                    return Ok(Finding::Confirmed);
                }
                Step::Release => return self.release(op, state, &assessment).await,
                Step::Move(to) => {
                    let reason = match to {
                        OperationState::Broadcast => "transfer included, awaiting final depth",
                        _ => "not included, or a cancel included: the reconciler follows it",
                    };
                    self.move_op(op, state, to, reason).await?;
                    if to == OperationState::Broadcast {
                        return Ok(Finding::Included);
                    }
                    state = to;
                }
                Step::Escalate(escalation) => {
                    self.escalate(op, state, escalation).await?;
                    return Ok(Finding::Escalated(escalation.reason_code));
                }
                Step::SignCancel => {
                    let cancel = self.sign_cancel(op).await?;
                    return Ok(self
                        .submit(op, &cancel)
                        .await?
                        .map_or(Finding::Waiting, Finding::CancelSubmitted));
                }
                Step::ResubmitCancel => {
                    // Rebroadcasting stored bytes is always safe.
                    let Some(latest) = assessment.attempts.last() else {
                        return Ok(Finding::NoVerdict);
                    };
                    return Ok(self
                        .submit(op, latest)
                        .await?
                        .map_or(Finding::Waiting, Finding::CancelSubmitted));
                }
            }
        }
        Ok(Finding::Waiting)
    }

    fn request<'a>(
        &'a self,
        op: &Unresolved,
        from: OperationState,
        to: OperationState,
        reason: &'a str,
    ) -> TransitionRequest<'a> {
        TransitionRequest::new(
            op.tenant_id,
            op.op_id,
            from,
            to,
            Actor::Reconciler,
            &self.worker_id,
            reason,
        )
    }

    /// The inclusion to record for attempt `attempt` at `inclusion`.
    fn inclusion(
        &self,
        op: &Unresolved,
        attempts: &[Attempt],
        attempt: usize,
        inclusion: opledger_domain::evidence::Inclusion,
    ) -> Result<Inclusion, ReconcileError> {
        let attempt = attempts.get(attempt).ok_or(StoreError::Corrupt {
            what: "attempt index",
        })?;
        Ok(Inclusion {
            tenant_id: op.tenant_id,
            op_id: op.op_id,
            tx_hash: attempt.signed.tx_hash.clone(),
            block_number: inclusion.block.number,
            block_hash: format!("{:#x}", B256::from(inclusion.block.hash)),
        })
    }

    /// FAILED_TERMINAL with the escalation's owner and reason code, hold kept; an escalation to
    /// security is also a security event.
    async fn escalate(
        &self,
        op: &Unresolved,
        from: OperationState,
        escalation: Escalation,
    ) -> Result<(), ReconcileError> {
        let owner = match escalation.owner {
            EscalationOwner::Operations => &self.escalation.owner,
            EscalationOwner::Security => &self.escalation.security_owner,
        };
        let request = self.request(
            op,
            from,
            OperationState::FailedTerminal,
            escalation.reason_code,
        );
        self.store
            .escalate(&request, owner, escalation.reason_code)
            .await?;
        if escalation.owner == EscalationOwner::Security {
            self.store
                .record_security_event(
                    op.tenant_id,
                    op.op_id,
                    escalation.reason_code,
                    Actor::Reconciler,
                    &self.worker_id,
                    "chain evidence points to a compromised key or a tampered attempt",
                )
                .await?;
        }
        tracing::error!(op_id = %op.op_id, owner = %owner, reason = escalation.reason_code, "escalated: FAILED_TERMINAL, hold kept");
        Ok(())
    }

    /// VERIFIED_NOT_SENT is reached from UNKNOWN; a BROADCAST operation passes through UNKNOWN.
    /// The release is proposed with the cancel's evidence first, and the move (which releases the
    /// hold) is made only once the witness has attested the same evidence: until then the
    /// operation stays UNKNOWN with its hold, and the next pass looks again.
    async fn release(
        &self,
        op: &Unresolved,
        from: OperationState,
        assessment: &Assessment,
    ) -> Result<Finding, ReconcileError> {
        const REASON: &str = "our cancel included at final depth, agreed by the quorum";
        let witnessed = self
            .propose(op, assessment, Principal::Reconciler, &self.worker_id)
            .await?;
        let mut from = from;
        if from == OperationState::Broadcast {
            self.move_op(op, from, OperationState::Unknown, REASON)
                .await?;
            from = OperationState::Unknown;
        }
        if !witnessed {
            tracing::info!(op_id = %op.op_id, "release proposed: awaiting the witness, hold kept");
            return Ok(Finding::AwaitingWitness);
        }
        self.move_op(op, from, OperationState::VerifiedNotSent, REASON)
            .await?;
        Ok(Finding::VerifiedNotSent)
    }

    /// Records the release's evidence (the final cancel, or for an operator a final reverted
    /// attempt) as `principal`'s proposal, and answers whether the database would release the
    /// hold now: true when the operation was never signed or the witness attested that evidence.
    async fn propose(
        &self,
        op: &Unresolved,
        assessment: &Assessment,
        principal: Principal,
        principal_id: &str,
    ) -> Result<bool, ReconcileError> {
        let found = match assessment.verdict {
            Verdict::Cancelled { attempt, inclusion }
            | Verdict::Reverted {
                attempt, inclusion, ..
            } => Some((attempt, inclusion.block)),
            _ => None,
        };
        if let Some((attempt, block)) = found {
            let tx_hash = *assessment.hashes.get(attempt).ok_or(StoreError::Corrupt {
                what: "attempt index",
            })?;
            let evidence = ReleaseEvidence { tx_hash, block };
            self.store
                .propose_release(op.tenant_id, op.op_id, principal, principal_id, &evidence)
                .await?;
        }
        Ok(self.store.release_witnessed(op.tenant_id, op.op_id).await?)
    }

    async fn move_op(
        &self,
        op: &Unresolved,
        from: OperationState,
        to: OperationState,
        reason: &str,
    ) -> Result<(), ReconcileError> {
        let request = self.request(op, from, to, reason);
        self.store.transition(&request).await?;
        tracing::info!(op_id = %op.op_id, from = from.as_str(), to = to.as_str(), "reconciled");
        Ok(())
    }

    /// Submits exactly the stored bytes of `attempt`; `None` (nothing sent) while the
    /// signed-bytes gate holds it back (its signing commit not seen acknowledged yet).
    async fn submit(
        &self,
        op: &Unresolved,
        attempt: &Attempt,
    ) -> Result<Option<SubmitClass>, ReconcileError> {
        if !attempt.released {
            tracing::info!(op_id = %op.op_id, "cancel held back by the signed-bytes gate: not submitted yet");
            return Ok(None);
        }
        let network = self
            .networks
            .get(&op.network)
            .ok_or_else(|| ReconcileError::NoRpc(op.network.clone()))?;
        let class = network
            .rpc
            .send_raw_transaction(&attempt.signed.raw_tx)
            .await;
        tracing::info!(op_id = %op.op_id, class = class.as_str(), "cancel replacement submitted");
        Ok(Some(class))
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
