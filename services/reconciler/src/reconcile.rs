//! Deciding from evidence. What the chain says is read by a quorum of independent endpoints at
//! one pinned block (`opledger_chain::evidence`); what it means is decided by the domain's pure
//! functions (`opledger_domain::evidence::{decide, next_step, resolution_allowed}`), the same ones
//! the model checker drives. This module only gathers the evidence and carries out the one step
//! the verdict allows: a settlement needs our transfer at final depth, a release our own cancel at
//! final depth, and a nonce consumed without any of our attempts goes to security. Any failure to
//! read yields no verdict; absence of evidence never releases a hold.

mod act;
mod assess;
mod types;

pub use types::{Assessment, Finding, ReconcileError, describe};

use chrono::Utc;
use opledger_chain::Rpc;
use opledger_chain::evidence::{EvidenceReader, Pinned, Pins};
use opledger_domain::evidence::{NoAgreement, Role, Step, Timing, Verdict, next_step};
use opledger_domain::state::OperationState;
use opledger_grpc::client::SignerClient;
use opledger_grpc::telemetry;
use opledger_store::broadcast::Unresolved;
use opledger_store::pass::PassLocks;
use opledger_store::roles::ReconcilerStore;
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

/// The reconciler.
#[derive(Debug, Clone)]
pub struct Reconciler {
    store: ReconcilerStore,
    networks: HashMap<String, Network>,
    signer: SignerClient,
    cancel_after: Duration,
    escalation: EscalationPolicy,
    worker_id: String,
    pass_locks: Option<PassLocks>,
}

impl Reconciler {
    /// A reconciler over this store, networks and signer.
    pub fn new(
        store: ReconcilerStore,
        networks: HashMap<String, Network>,
        signer: SignerClient,
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
        let (latest_role, latest_age) = latest_attempt(&assessment);
        let mut state = op.state;
        // At most two steps: a move that keeps the hold (BROADCAST -> UNKNOWN), then what the same
        // evidence allows from there.
        for _ in 0..2 {
            let timing = self.timing(op, latest_role, latest_age).await?;
            match next_step(state, verdict, timing) {
                Step::Wait => {
                    return Ok(match verdict {
                        Verdict::NoVerdict(_) => Finding::NoVerdict,
                        _ => Finding::Waiting,
                    });
                }
                Step::Confirm { attempt, inclusion } => {
                    return self
                        .confirm(op, state, &assessment.attempts, attempt, inclusion)
                        .await;
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
                    return self.submit_cancel(op, &cancel).await;
                }
                Step::ResubmitCancel => {
                    // Rebroadcasting stored bytes is always safe.
                    let Some(latest) = assessment.attempts.last() else {
                        return Ok(Finding::NoVerdict);
                    };
                    return self.submit_cancel(op, latest).await;
                }
            }
        }
        Ok(Finding::Waiting)
    }

    /// The timing [`next_step`] decides on: the latest attempt's role and age, and how long the
    /// operation has been unchanged (read now).
    async fn timing(
        &self,
        op: &Unresolved,
        latest_role: Role,
        latest_age: Duration,
    ) -> Result<Timing, ReconcileError> {
        let unchanged_secs = self
            .store
            .seconds_since_change(op.tenant_id, op.op_id)
            .await?;
        Ok(Timing {
            latest_attempt_age_secs: latest_age.as_secs(),
            latest_role,
            unchanged_secs,
            cancel_after_secs: self.cancel_after.as_secs(),
            escalate_after_secs: self.escalation.after_secs,
        })
    }
}

/// The latest attempt's role (a transfer when it has none) and age (zero without attempts).
fn latest_attempt(assessment: &Assessment) -> (Role, Duration) {
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
    (latest_role, latest_age)
}
