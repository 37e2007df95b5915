//! The processor: claims one due work item at a time (`SKIP LOCKED`, so several processors are
//! safe), applies its event and finishes the item in the same transaction. Running an item twice
//! has the effect of running it once: a crash before commit leaves nothing applied and the item
//! due; after commit the item is DONE and never claimed again.
//!
//! What each event does:
//! - `deposit.confirmed`: proposes the credit of the account once per (source, deposit id), with
//!   the deposit's chain evidence when the provider sent it; the account moves only once the
//!   witness attests it (a second principal). The same deposit id with different content is a
//!   dead letter.
//! - `transfer.status`: a hint, never a move ([`crate::hint`]). Naming one of the operation's
//!   transfer attempts (original or fee bump), it records a watch hint (the watcher looks at the
//!   operation now) and is done (`HINTED`); the operation's state, hold and inclusions are
//!   untouched, whatever status it reports and in whatever order the updates arrive: settlement
//!   comes only from chain evidence at final depth. Nothing signed yet: parked until the
//!   operation moves (`AWAITING_SIGNATURE`), then decided again. Naming a foreign hash
//!   (`TX_HASH_MISMATCH`) or one of its cancels (`NOT_A_TRANSFER_ATTEMPT`), or contradicting a
//!   final outcome, REJECTED or VERIFIED_NOT_SENT (`EVIDENCE_CONFLICT`): dead letter.
//! - `custodian.status` (a custodian's own status event, verified with its scheme at the ingress):
//!   a wake-up, never a move ([`wake`]). Naming a SIGNED, BROADCAST or UNKNOWN custodian
//!   withdrawal of the endpoint's tenant, it records a `custodian_hints` row (the executor looks
//!   the withdrawal up at its next pass) and is done (`WOKEN`); its status is never read. Before
//!   the request exists: parked until the withdrawal moves (`AWAITING_REQUEST`). No longer
//!   followed: done (`NOT_FOLLOWED`). While an executor is looking it up: deferred, not counted
//!   as an attempt (`FOLLOW_IN_PROGRESS`), so that a lookup begun before the event cannot absorb
//!   its hint. A withdrawal our signer executes: dead letter (`NOT_A_CUSTODIAN_WITHDRAWAL`). No
//!   reference of ours (Coinbase Prime sends none): recorded, done (`NO_REFERENCE`), nothing
//!   woken. A reference not found for the tenant (another tenant's withdrawal, or none): retried
//!   like any early event, then a dead letter.
//! - `kyt.result`: recorded on the operation; a failing result rejects a REQUESTED operation
//!   (hold released once). A failure after the operation left REQUESTED is a dead letter owned by
//!   compliance: it must not be silently ignored, and it cannot be un-signed.
//!
//! Items that fail (operation not found yet, database errors) are retried with exponential
//! backoff and become dead letters after `max_attempts`.
//!
//! Tracing: each step is an `inbox.process` span, the root of a trace of its own. When the item is
//! about an existing operation of its tenant (`transfer.status`, `kyt.result`), the span records
//! the operation id and, with tracing on, carries a span link to the trace context stored with
//! the operation at its creation: from the processing one reaches the withdrawal's trace by the
//! link, and from the withdrawal one finds the processing by the link or by `op_id`.

use crate::hint::{self, Named, Verdict};
use crate::keys::KeyRing;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::state::{Actor, OperationState, check_transition};
use opledger_grpc::telemetry;
use opledger_store::StoreError;
use opledger_store::credits::DepositEvidence;
use opledger_store::inbox::{CreditOutcome, Finish, WorkTx};
use opledger_store::roles::InboxStore;
use opledger_store::transition::TransitionRequest;
use opledger_webhook::event::{
    self, DepositConfirmed, Event, KytResult, KytVerdict, Parsed, TransferStatus,
};
use opledger_webhook::provider::CUSTODIAN_STATUS;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;
use wake::Wake;

pub mod wake;

/// Processor settings.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Names the processor in transition logs.
    pub worker_id: String,
    /// Attempts before a dead letter.
    pub max_attempts: i32,
    /// First retry delay; doubles per attempt up to 10 minutes.
    pub retry_base: Duration,
    /// Owner of dead letters.
    pub dead_letter_owner: String,
    /// Owner of KYT failures after approval.
    pub compliance_owner: String,
}

/// One processor.
#[derive(Debug, Clone)]
pub struct Processor {
    store: InboxStore,
    ring: Arc<KeyRing>,
    policy: Arc<Policy>,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing was due.
    Idle,
    /// An item was finished (done, parked or dead).
    Finished,
    /// An item failed and will be retried (or became a dead letter).
    Failed,
}

/// Which team owns a dead letter.
#[derive(Debug, Clone, Copy)]
enum Owner {
    DeadLetters,
    Compliance,
}

/// How an applied item ends (see [`Finish`]).
#[derive(Debug, Clone, Copy)]
enum Decision {
    Done(&'static str),
    Parked(i64, &'static str),
    Dead(Owner, &'static str),
}

/// Why applying failed in a way worth retrying.
#[derive(Debug)]
enum Retry {
    /// The operation does not exist (yet) for this tenant.
    OperationNotFound,
    /// The body could not be opened with the configured keys.
    BodyUnreadable,
    /// An executor is looking the custodian withdrawal up right now ([`Wake::FollowInProgress`]):
    /// deferred, not counted as an attempt.
    FollowInProgress,
    /// The store failed or a concurrent move won the race.
    Store(StoreError),
}

impl Retry {
    fn code(&self) -> &'static str {
        match self {
            Retry::OperationNotFound => "OPERATION_NOT_FOUND",
            Retry::BodyUnreadable => "BODY_UNREADABLE",
            Retry::FollowInProgress => "FOLLOW_IN_PROGRESS",
            Retry::Store(StoreError::Conflict { .. }) => "CONCURRENT_CHANGE",
            Retry::Store(_) => "STORE_ERROR",
        }
    }
}

impl From<StoreError> for Retry {
    fn from(e: StoreError) -> Self {
        Retry::Store(e)
    }
}

impl Processor {
    /// A processor over this store and key ring.
    pub fn new(store: InboxStore, ring: Arc<KeyRing>, policy: Policy) -> Processor {
        Processor {
            store,
            ring,
            policy: Arc::new(policy),
        }
    }

    /// Wakes parked items whose operation moved; returns how many.
    pub async fn wake(&self) -> u64 {
        match self.store.wake_parked_work().await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "waking parked inbox items failed");
                0
            }
        }
    }

    /// Claims and processes one due item.
    pub async fn step(&self) -> Step {
        let work = match self.store.claim_work().await {
            Ok(Some(work)) => work,
            Ok(None) => return Step::Idle,
            Err(e) => {
                tracing::warn!(error = %e.log_safe(), "claiming inbox work failed");
                return Step::Idle;
            }
        };
        let span = tracing::info_span!(
            "inbox.process",
            opledger.service = "inbox",
            inbox_id = work.item.inbox_id,
            attempts = work.item.attempts,
            op_id = tracing::field::Empty,
        );
        self.process(work, &span).instrument(span.clone()).await
    }

    /// Applies one claimed item and finishes it (or records the failure), then links `span` (the
    /// item's) to the trace of the operation the item is about, if any.
    async fn process(&self, mut work: WorkTx, span: &tracing::Span) -> Step {
        let inbox_id = work.item.inbox_id;
        let attempts = work.item.attempts;
        let tenant_id = work.item.tenant_id;
        let owner = self.policy.dead_letter_owner.clone();
        let mut about = None;
        let applied = self.apply(&mut work, &mut about).await;
        if let Some(op_id) = about {
            span.record("op_id", tracing::field::display(op_id));
        }
        let step = match applied {
            Ok(decision) => {
                let finish = self.finish_of(decision);
                let (kind, code) = match finish {
                    Finish::Done { outcome } => ("done", outcome),
                    Finish::Parked { outcome, .. } => ("parked", outcome),
                    Finish::Dead { reason, .. } => ("dead_letter", reason),
                };
                let code = code.to_owned();
                match work.finish(finish).await {
                    Ok(()) => {
                        tracing::info!(inbox_id, result = kind, outcome = %code, "inbox item");
                        Step::Finished
                    }
                    Err(e) => {
                        self.failed(tenant_id, inbox_id, attempts, &owner, Retry::Store(e))
                            .await
                    }
                }
            }
            Err(Retry::FollowInProgress) => {
                drop(work);
                self.deferred(tenant_id, inbox_id).await
            }
            Err(retry) => {
                drop(work); // rolls back whatever the attempt did
                self.failed(tenant_id, inbox_id, attempts, &owner, retry)
                    .await
            }
        };
        // After the item's transaction ended: the look-up never holds a second connection.
        if let Some(op_id) = about {
            self.link_operation_trace(span, tenant_id, op_id).await;
        }
        step
    }

    /// Adds to `span` a link to the trace context stored with the operation (the create call's),
    /// when tracing is on. The span keeps its own parent: a link joins the webhook's processing
    /// to the withdrawal's trace without merging the two traces.
    /// A missing or invalid stored context, or a failed look-up, adds nothing.
    async fn link_operation_trace(
        &self,
        span: &tracing::Span,
        tenant_id: TenantId,
        op_id: OperationId,
    ) {
        if telemetry::enabled() {
            let stored = self.store.trace_context(tenant_id, op_id).await;
            // `remote`: the span's parent stays as it is; the operation's context is linked.
            telemetry::propagation::join_operation_trace(
                span,
                true,
                stored.ok().flatten().as_deref(),
            );
        }
    }

    /// Makes the item due again after `retry_base` without counting an attempt: a lookup in
    /// progress ends within the executor's lease, so this never becomes a dead letter.
    async fn deferred(&self, tenant_id: TenantId, inbox_id: i64) -> Step {
        let code = Retry::FollowInProgress.code();
        match self
            .store
            .defer_work(tenant_id, inbox_id, code, self.policy.retry_base)
            .await
        {
            Ok(()) => tracing::info!(inbox_id, reason = code, "inbox item deferred"),
            Err(e) => tracing::warn!(error = %e.log_safe(), "deferring an inbox item failed"),
        }
        Step::Failed
    }

    async fn failed(
        &self,
        tenant_id: TenantId,
        inbox_id: i64,
        attempts: i32,
        owner: &str,
        retry: Retry,
    ) -> Step {
        let shift = u32::try_from(attempts.clamp(0, 20)).unwrap_or(20);
        let delay = self
            .policy
            .retry_base
            .saturating_mul(1_u32 << shift)
            .min(Duration::from_secs(600));
        if let Retry::Store(e) = &retry {
            tracing::warn!(inbox_id, error = %e.log_safe(), "inbox item failed");
        }
        match self
            .store
            .fail_work(
                tenant_id,
                inbox_id,
                retry.code(),
                delay,
                self.policy.max_attempts,
                owner,
            )
            .await
        {
            Ok(true) => tracing::error!(
                inbox_id,
                reason = retry.code(),
                owner,
                "inbox item moved to dead letters"
            ),
            Ok(false) => {
                tracing::info!(
                    inbox_id,
                    reason = retry.code(),
                    "inbox item will be retried"
                )
            }
            Err(e) => tracing::warn!(error = %e.log_safe(), "recording an inbox failure failed"),
        }
        Step::Failed
    }

    /// Applies the item's event in its transaction; sets `about` once the operation the event
    /// names is known to exist for the item's tenant.
    async fn apply(
        &self,
        work: &mut WorkTx,
        about: &mut Option<OperationId>,
    ) -> Result<Decision, Retry> {
        if work.item.event_type.as_deref() == Some(CUSTODIAN_STATUS) {
            // Everything it may do was read at the ingress (our reference); the body is not
            // opened again.
            return self.custodian_status(work, about).await;
        }
        let item = &work.item;
        let Some(sealed) = &item.body else {
            return Ok(self.dead("BODY_PURGED"));
        };
        let body = self
            .ring
            .open_body(item.tenant_id, &item.source, &item.event_id, sealed)
            .map_err(|_| Retry::BodyUnreadable)?;
        let event = match event::parse(&body) {
            Ok(Parsed::Known(event)) => event,
            // Classified as known at the ingress; a parser change since then must not guess.
            _ => return Ok(self.dead("NO_LONGER_PARSEABLE")),
        };
        match event {
            Event::DepositConfirmed(d) => self.deposit_confirmed(work, &d).await,
            Event::TransferStatus(t) => self.transfer_status(work, &t, about).await,
            Event::KytResult(k) => self.kyt_result(work, &k, &body, about).await,
        }
    }

    /// `deposit.confirmed`: proposes the credit once per (source, deposit id), with the deposit's
    /// chain evidence when the provider sent it.
    async fn deposit_confirmed(
        &self,
        work: &mut WorkTx,
        d: &DepositConfirmed,
    ) -> Result<Decision, Retry> {
        let evidence = d.chain().map(|c| DepositEvidence {
            network: c.network.as_str().to_owned(),
            tx_hash: c.tx_hash,
            log_index: c.log_index,
            recipient: c.recipient,
        });
        let outcome = work
            .propose_deposit(
                d.deposit_id().as_str(),
                d.account(),
                d.asset(),
                d.amount(),
                evidence.as_ref(),
            )
            .await?;
        Ok(match outcome {
            CreditOutcome::Proposed => Decision::Done("CREDIT_PROPOSED"),
            CreditOutcome::AlreadyProposed => Decision::Done("ALREADY_PROPOSED"),
            CreditOutcome::Conflicting => self.dead("DEPOSIT_CONFLICT"),
        })
    }

    /// `transfer.status`: a hint, never a move ([`hint::decide`]); sets `about` once the
    /// operation is known to exist for the item's tenant.
    async fn transfer_status(
        &self,
        work: &mut WorkTx,
        t: &TransferStatus,
        about: &mut Option<OperationId>,
    ) -> Result<Decision, Retry> {
        let op_id = t.operation_id();
        let (state, version) = work
            .operation(op_id)
            .await?
            .ok_or(Retry::OperationNotFound)?;
        *about = Some(op_id);
        let attempts = work.attempts(op_id).await?;
        let named = Named::find(&attempts, &t.tx_hash_hex());
        Ok(match hint::decide(state, named) {
            Verdict::Hint => {
                // In this transaction: the hint and the item's end commit together.
                work.record_watch_hint(op_id).await?;
                Decision::Done("HINTED")
            }
            Verdict::AwaitSignature => Decision::Parked(version, "AWAITING_SIGNATURE"),
            Verdict::Dead(refusal) => self.dead(refusal.code()),
        })
    }

    /// A custodian's status event: a wake-up for the executor's lookup, never a move
    /// ([`wake::decide`]); sets `about` once the withdrawal is known to exist for the item's
    /// tenant.
    async fn custodian_status(
        &self,
        work: &mut WorkTx,
        about: &mut Option<OperationId>,
    ) -> Result<Decision, Retry> {
        let Some(op_id) = work.item.op_id else {
            return Ok(Decision::Done("NO_REFERENCE"));
        };
        let (state, version, executor) = work
            .withdrawal(op_id)
            .await?
            .ok_or(Retry::OperationNotFound)?;
        *about = Some(op_id);
        let following = work.custodian_follow_in_progress(op_id).await?;
        let wake = wake::decide(executor, state, following);
        Ok(match wake {
            Wake::Hint => {
                // In this transaction: the hint and the item's end commit together.
                work.record_custodian_hint(op_id).await?;
                Decision::Done(wake.outcome())
            }
            Wake::FollowInProgress => return Err(Retry::FollowInProgress),
            Wake::AwaitRequest => Decision::Parked(version, wake.outcome()),
            Wake::NotFollowed => Decision::Done(wake.outcome()),
            Wake::NotCustodian => self.dead(wake.outcome()),
        })
    }

    /// `kyt.result`: recorded on the operation (`body` is the item's opened body); a failing
    /// result rejects a REQUESTED operation. Sets `about` once the operation is known to exist
    /// for the item's tenant.
    async fn kyt_result(
        &self,
        work: &mut WorkTx,
        k: &KytResult,
        body: &[u8],
        about: &mut Option<OperationId>,
    ) -> Result<Decision, Retry> {
        let op_id = k.operation_id();
        let (state, _) = work
            .operation(op_id)
            .await?
            .ok_or(Retry::OperationNotFound)?;
        *about = Some(op_id);
        let pass = k.result() == KytVerdict::Pass;
        let recorded = work
            .record_screening(op_id, k.provider_ref().as_str(), pass, body)
            .await?;
        if !recorded {
            return Ok(Decision::Done("ALREADY_RECORDED"));
        }
        if pass || state == OperationState::Rejected {
            return Ok(Decision::Done("RECORDED"));
        }
        if check_transition(state, OperationState::Rejected, Actor::WebhookProcessor).is_ok() {
            let request = TransitionRequest::new(
                item_tenant(work),
                op_id,
                state,
                OperationState::Rejected,
                Actor::WebhookProcessor,
                &self.policy.worker_id,
                "kyt screening failed",
            );
            work.transition(&request).await?;
            return Ok(Decision::Done("REJECTED"));
        }
        Ok(Decision::Dead(Owner::Compliance, "KYT_FAIL_AFTER_APPROVAL"))
    }

    fn dead(&self, reason: &'static str) -> Decision {
        Decision::Dead(Owner::DeadLetters, reason)
    }

    fn finish_of(&self, decision: Decision) -> Finish<'_> {
        match decision {
            Decision::Done(outcome) => Finish::Done { outcome },
            Decision::Parked(version, outcome) => Finish::Parked { version, outcome },
            Decision::Dead(owner, reason) => Finish::Dead {
                owner: match owner {
                    Owner::DeadLetters => &self.policy.dead_letter_owner,
                    Owner::Compliance => &self.policy.compliance_owner,
                },
                reason,
            },
        }
    }
}

fn item_tenant(work: &WorkTx) -> TenantId {
    work.item.tenant_id
}
