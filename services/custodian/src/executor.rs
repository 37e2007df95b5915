//! One pass of the executor over the custodian withdrawals that are due, each moved by the pure
//! decisions of `opledger_domain::custodian` and nothing else:
//! - APPROVED: checked (payload hash recomputed, an EVM destination, no memo), claimed, its
//!   request built from the stored payload and persisted with its hash in the same transaction
//!   that moves it SIGNED, then sent once ([`Round::First`]);
//! - SIGNED found again (an executor stopped between steps): a send without an answer may have
//!   reached the provider, so it is UNKNOWN; without a send, the first send is made;
//! - BROADCAST and UNKNOWN: the provider's record is looked up by our reference and stored; in
//!   flight it is followed; not found after the consistency window, the same stored request is
//!   sent again ([`Round::Resend`]); terminal without a hash, a release is proposed and applied
//!   only once the witness attested it; a hash is the chain's to decide.
//!
//! A provider without lookup (`no_lookup`) is followed through the transaction its accepted
//! answer named (read by its id); an ambiguous answer leaves the withdrawal UNKNOWN for an
//! operator, who binds the transaction to follow. Nothing here ever uses a second reference or releases on its own word.

use crate::accounts::{Account, Accounts};
use crate::chain::Chains;
use opledger_custodian::{LookupFailure, LookupOutcome, TransferRequest};
use opledger_domain::custodian::token::RequestBound;
use opledger_domain::custodian::{
    Lookup, Next, Round, SubmitAnswer, Window, after_lookup, after_submit,
};
use opledger_domain::state::{Actor, OperationState as S};
use opledger_store::StoreError;
use opledger_store::custodian::{CustodianDue, StoredRequest, custodian_move};
use opledger_store::roles::CustodianStore;
use opledger_trust::{Evidence, TrustRoots};
use std::collections::BTreeSet;

mod pass;
mod settle;
use std::time::Duration;

/// Who owns what the executor escalates.
const OWNER: &str = "operations";

/// The executor of one instance.
#[derive(Debug)]
pub struct Executor {
    store: CustodianStore,
    accounts: Accounts,
    trust: TrustRoots,
    chains: Chains,
    executor_id: String,
    follow_every: Duration,
    lease: Duration,
    stuck_after: Duration,
    /// Networks whose evidence had no agreement when last asked for a request's bound: their
    /// APPROVED withdrawals are held back from the queue (nothing can be sent on them) until a
    /// later pass finds agreement again.
    held_back: std::sync::Mutex<BTreeSet<String>>,
}

/// The bound of a request stored in this pass, by network: read once per network and pass.
type Bounds = std::collections::HashMap<String, Option<RequestBound>>;

/// How often and how long an executor follows a withdrawal.
#[derive(Debug, Clone, Copy)]
pub struct Cadence {
    /// Between two lookups of one withdrawal.
    pub follow_every: Duration,
    /// How long an instance holds a withdrawal while it sends or looks it up.
    pub lease: Duration,
    /// How long after its request was stored a withdrawal whose provider record is final with a
    /// transaction the chain does not show final is escalated to an operator (its funds stay
    /// held).
    pub stuck_after: Duration,
}

impl Executor {
    /// An executor over `store` sending through `accounts`, verifying approvals with `trust`.
    pub fn new(
        store: CustodianStore,
        accounts: Accounts,
        trust: TrustRoots,
        executor_id: String,
        cadence: Cadence,
    ) -> Executor {
        Executor {
            store,
            accounts,
            trust,
            chains: Chains::default(),
            executor_id,
            follow_every: cadence.follow_every,
            lease: cadence.lease,
            stuck_after: cadence.stuck_after,
            held_back: std::sync::Mutex::default(),
        }
    }

    /// This executor settling its providers' transactions from `chains` (a network without a
    /// reader is unwatched).
    pub fn with_chains(mut self, chains: Chains) -> Executor {
        self.chains = chains;
        self
    }

    async fn handle(&self, due: CustodianDue, bounds: &Bounds) -> Result<(), StoreError> {
        let op = &due.operation;
        let Some(account) = self.accounts.get(op) else {
            // Another instance (or a later configuration) executes it.
            return Ok(());
        };
        match op.state {
            S::Approved => match bounds.get(due.operation.payload.network.as_str()) {
                Some(bound) => self.start(&due, account, *bound).await,
                // No agreement on its chain now: nothing is claimed or sent.
                None => Ok(()),
            },
            S::Signing => {
                // Claimed, then stopped before its request was stored (the store is atomic with
                // SIGNED): nothing was sent; claimable again.
                let mut back = self.moved(&due, S::Signing, S::Approved, "claim expired");
                back.lease_guard = opledger_store::transition::LeaseGuard::Expired;
                ignore_conflict(self.store.transition(&back).await)
            }
            S::Signed | S::Broadcast | S::Unknown => {
                let (t, o) = (op.payload.tenant_id, op.op_id);
                if !self
                    .store
                    .take_custodian_lease(t, o, &self.executor_id, self.lease)
                    .await?
                {
                    return Ok(());
                }
                let done = self.follow(&due, account).await;
                self.store
                    .release_custodian_lease(t, o, &self.executor_id)
                    .await?;
                done
            }
            _ => Ok(()),
        }
    }

    /// Verifies the approvals of an APPROVED withdrawal as the signer does: every stored
    /// decision against the tenant's trust statement signed by a pinned key, and its policy.
    /// False (and a security event) when they do not verify.
    async fn approvals_verified(&self, due: &CustodianDue) -> Result<bool, StoreError> {
        let op = &due.operation;
        let (t, o) = (op.payload.tenant_id, op.op_id);
        let Some(input) = self.store.signing_input(t, o).await? else {
            return Ok(false);
        };
        let evidence = Evidence::from(&input);
        let why = if !evidence.payload_hash_approved() {
            "no decision, or a decision naming another payload hash than the stored fields'"
        } else {
            match self.trust.verify(t, o, &evidence) {
                Ok(_) => return Ok(true),
                Err(why) => why.detail(),
            }
        };
        self.store
            .record_security_event(
                t,
                o,
                "CUSTODIAN_APPROVALS_NOT_VERIFIED",
                Actor::Custodian,
                &self.executor_id,
                why,
            )
            .await?;
        Ok(false)
    }

    /// Checks, claims, persists (with `bound`, the chain its payout must come after) and sends an
    /// APPROVED withdrawal.
    async fn start(
        &self,
        due: &CustodianDue,
        account: &Account,
        bound: Option<RequestBound>,
    ) -> Result<(), StoreError> {
        let op = &due.operation;
        if !self.approvals_verified(due).await? {
            tracing::error!(op = %op.op_id, "refused: approvals not verified");
            let end = self.moved(
                due,
                S::Approved,
                S::FailedTerminal,
                "APPROVALS_NOT_VERIFIED",
            );
            return ignore_conflict(
                self.store
                    .escalate(&end, "security", "APPROVALS_NOT_VERIFIED")
                    .await,
            );
        }
        let request = match crate::accounts::transfer(op) {
            Ok(request) => request,
            Err(refusal) => return self.refuse_before_claim(due, refusal).await,
        };
        let body = match account.custodian.request(&request) {
            Ok(body) => body,
            Err(_) => {
                return self
                    .refuse_before_claim(due, "CUSTODIAN_REQUEST_INVALID")
                    .await;
            }
        };
        let mut claim = self.moved(due, S::Approved, S::Signing, "claimed for the custodian");
        claim.expected_hash = Some(op.payload_hash);
        claim.lease_for = Some(self.lease);
        match self.store.transition(&claim).await {
            Ok(_) => {}
            // Another instance claimed it first.
            Err(StoreError::Conflict { .. }) => return Ok(()),
            Err(e) => return Err(e),
        }
        let stored = StoredRequest {
            account: account.name.clone(),
            profile: account.custodian.profile(),
            body: body.bytes,
            body_sha256: body.sha256,
            bound,
        };
        let mut persist = self.moved(due, S::Signing, S::Signed, "request persisted");
        persist.expected_hash = Some(op.payload_hash);
        persist.lease_guard = opledger_store::transition::LeaseGuard::HeldBy(&self.executor_id);
        persist.lease_for = Some(self.lease);
        self.store
            .persist_custodian_request(&persist, &stored)
            .await?;
        opledger_failpoint::hit("custodian.after_persist");
        self.send(due, account, &request, &stored.body, S::Signed)
            .await
    }

    /// Ends an APPROVED withdrawal whose payload this executor cannot execute as approved.
    async fn refuse_before_claim(
        &self,
        due: &CustodianDue,
        reason: &'static str,
    ) -> Result<(), StoreError> {
        let op = &due.operation;
        tracing::error!(op = %op.op_id, reason, "custodian withdrawal not executable");
        let end = self.moved(due, S::Approved, S::FailedTerminal, reason);
        ignore_conflict(self.store.escalate(&end, OWNER, reason).await)
    }

    /// Sends the stored request from `state` and moves by the answer. The send is recorded first
    /// and only under this instance's live lease, and one meant as the first only while no send
    /// is recorded; its number (not what this instance read earlier) says whether it is the
    /// first: a refusal concludes only the first send (`crates/model` checks this with two
    /// instances whose leases lapse).
    async fn send(
        &self,
        due: &CustodianDue,
        account: &Account,
        request: &TransferRequest,
        body: &[u8],
        state: S,
    ) -> Result<(), StoreError> {
        let (t, o) = (due.operation.payload.tenant_id, due.operation.op_id);
        // What is sent is derived again from the hash-checked payload and must be the stored
        // bytes: a body the database holds is never trusted alone (another login may have
        // written it).
        if !account
            .custodian
            .request(request)
            .is_ok_and(|derived| derived.bytes == body)
        {
            return self.body_differs(due).await;
        }
        let first = state == S::Signed;
        let Some(send_no) = self
            .store
            .begin_custodian_send(t, o, &self.executor_id, first)
            .await?
        else {
            // Another instance holds it, or it moved: nothing is sent.
            return Ok(());
        };
        let round = if send_no == 1 {
            Round::First
        } else {
            Round::Resend
        };
        opledger_failpoint::hit("custodian.before_send");
        let (answer, provider_id) = match account.custodian.submit(request.reference, body).await {
            Ok(submission) => (submission.answer, submission.provider_id),
            Err(e) => {
                // Nothing left this process, but the send is recorded: handled as ambiguous.
                tracing::error!(op = %o, error = %e, "custodian request not sent");
                (
                    SubmitAnswer::Ambiguous(opledger_domain::custodian::Ambiguity::Unreadable),
                    None,
                )
            }
        };
        opledger_failpoint::hit("custodian.after_send");
        self.store
            .record_custodian_answer(t, o, send_no, answer.as_str(), provider_id.as_deref())
            .await?;
        let next = after_submit(account.custodian.profile(), round, answer);
        self.apply(due, state, next, None).await
    }

    /// Follows a withdrawal the provider may hold.
    async fn follow(&self, due: &CustodianDue, account: &Account) -> Result<(), StoreError> {
        let op = &due.operation;
        let Some(stored) = &due.request else {
            return Err(StoreError::Corrupt {
                what: "custodian request",
            });
        };
        let request = match crate::accounts::transfer(op) {
            Ok(request) => request,
            Err(_) => return Err(StoreError::Corrupt { what: "payload" }),
        };
        if op.state == S::Signed {
            return if due.sends == 0 {
                self.send(due, account, &request, &stored.body, S::Signed)
                    .await
            } else {
                // A send was made and its outcome not applied: it may have arrived.
                self.apply(due, S::Signed, Next::LookUp, None).await
            };
        }
        let profile = account.custodian.profile();
        if !profile.has_lookup() {
            return match due.followed() {
                None => self.apply(due, op.state, Next::Operator, None).await,
                Some((provider_id, since)) => {
                    self.follow_bound(due, account, &request, provider_id, since)
                        .await
                }
            };
        }
        let outcome = account.custodian.lookup(&request).await;
        let record_id = self.store_record(due, &outcome).await?;
        if outcome.mismatch().is_some() {
            return self.mismatch(due).await;
        }
        let window = match due.since_last_send {
            Some(secs) if secs < account.custodian.consistency_window().as_secs_f64() => {
                Window::Inside
            }
            _ => Window::Passed,
        };
        let next = after_lookup(profile, outcome.lookup, window);
        if next == Next::ResendSameReference {
            return self
                .send(due, account, &request, &stored.body, op.state)
                .await;
        }
        self.conclude(due, &request, &outcome, next, record_id)
            .await
    }

    /// Follows a `no_lookup` withdrawal through the provider transaction it follows (the one the
    /// provider's answer named, or an operator bound, `since` seconds ago), read by its id and,
    /// when it says nothing was broadcast, from the provider's list, as a lookup would return it:
    /// decided as any record (a hash is the chain's; terminal without one is proposed for
    /// release, which the witness attests only from its own read). Not found, recreated or
    /// unreadable: nothing is concluded.
    async fn follow_bound(
        &self,
        due: &CustodianDue,
        account: &Account,
        request: &TransferRequest,
        provider_id: &str,
        since: Option<f64>,
    ) -> Result<(), StoreError> {
        let (t, o) = (due.operation.payload.tenant_id, due.operation.op_id);
        let age = Duration::from_secs_f64(due.since_request.unwrap_or(0.0).max(0.0));
        let store = &self.store;
        let outcome = opledger_custodian::list_bound(
            account.custodian.as_ref(),
            request,
            age,
            due.since_last_send
                .map(|secs| Duration::from_secs_f64(secs.max(0.0))),
            provider_id,
            |ids| async move { store.bound_elsewhere(t, o, &ids).await },
        )
        .await?;
        if outcome.mismatch().is_some() {
            return self.mismatch(due).await;
        }
        let record_id = self.store_record(due, &outcome).await?;
        let next = match outcome.lookup {
            Lookup::Found(record) => opledger_domain::custodian::after_record(record),
            _ => Next::Follow,
        };
        let escalation = match outcome.failure {
            // The followed transaction says nothing was broadcast, but another listed one may be
            // this withdrawal's payment: an operator sorts the bindings out; nothing is released.
            Some(LookupFailure::Ambiguous) => Some("CUSTODIAN_BINDING_AMBIGUOUS"),
            // The provider recreated the transaction under a new id: an operator binds the new
            // one (the old one concludes nothing).
            Some(LookupFailure::Recreated) => Some("CUSTODIAN_TRANSACTION_RECREATED"),
            // Followed long ago and still nothing concluded (in flight, not found, unreadable).
            _ if matches!(next, Next::Follow)
                && since.is_some_and(|secs| secs > self.stuck_after.as_secs_f64()) =>
            {
                Some("CUSTODIAN_BINDING_UNRESOLVED")
            }
            _ => None,
        };
        if let Some(reason) = escalation {
            self.store
                .record_custodian_escalation(t, o, OWNER, reason)
                .await?;
        }
        if !matches!(outcome.lookup, Lookup::Found(_)) {
            return Ok(());
        }
        self.conclude(due, request, &outcome, next, record_id).await
    }

    /// Applies `next`, decided on the record `outcome` read, and settles from the chain when the
    /// record names a transaction.
    async fn conclude(
        &self,
        due: &CustodianDue,
        request: &TransferRequest,
        outcome: &LookupOutcome,
        next: Next,
        record_id: Option<i64>,
    ) -> Result<(), StoreError> {
        self.apply(due, due.operation.state, next, record_id)
            .await?;
        if let (Next::Chain(hash), Some(record)) = (next, &outcome.record) {
            self.settle(due, request, hash, record.status).await?;
        }
        Ok(())
    }

    /// Applies `next` to a withdrawal in `state`.
    async fn apply(
        &self,
        due: &CustodianDue,
        state: S,
        next: Next,
        record_id: Option<i64>,
    ) -> Result<(), StoreError> {
        let op = &due.operation;
        let (t, o) = (op.payload.tenant_id, op.op_id);
        let target = match (next, state) {
            (Next::Follow | Next::Chain(_), S::Signed | S::Unknown) => S::Broadcast,
            (Next::LookUp, S::Signed) => S::Unknown,
            (Next::Operator, S::Signed) => {
                self.store
                    .record_custodian_escalation(t, o, OWNER, "CUSTODIAN_NO_LOOKUP")
                    .await?;
                S::Unknown
            }
            (Next::Operator, _) => {
                return self
                    .store
                    .record_custodian_escalation(t, o, OWNER, "CUSTODIAN_NO_LOOKUP")
                    .await;
            }
            (Next::Refused, S::Signed) => {
                let end = self.moved(due, S::Signed, S::FailedTerminal, "CUSTODIAN_REFUSED");
                return ignore_conflict(
                    self.store.escalate(&end, OWNER, "CUSTODIAN_REFUSED").await,
                );
            }
            (Next::NotSent, _) => return self.not_sent(due, state, record_id).await,
            _ => return Ok(()),
        };
        let reason = match next {
            Next::Chain(_) => "custodian broadcast",
            Next::Follow => "custodian accepted",
            _ => "custodian outcome unknown",
        };
        ignore_conflict(
            self.store
                .transition(&self.moved(due, state, target, reason))
                .await,
        )
    }

    /// A terminal record without a hash: proposed for release, released once the witness
    /// attested it from its own lookup.
    async fn not_sent(
        &self,
        due: &CustodianDue,
        state: S,
        record_id: Option<i64>,
    ) -> Result<(), StoreError> {
        let op = &due.operation;
        let (t, o) = (op.payload.tenant_id, op.op_id);
        if let Some(record_id) = record_id {
            self.store
                .propose_custodian_release(t, o, record_id, &self.executor_id)
                .await?;
        }
        if state == S::Broadcast {
            let back = self.moved(due, S::Broadcast, S::Unknown, "custodian record terminal");
            ignore_conflict(self.store.transition(&back).await)?;
        }
        if !self.store.release_witnessed(t, o).await? {
            return Ok(());
        }
        let release = self.moved(
            due,
            S::Unknown,
            S::VerifiedNotSent,
            "custodian record terminal without a transaction, witnessed",
        );
        ignore_conflict(self.store.transition(&release).await)
    }

    fn moved<'a>(
        &'a self,
        due: &CustodianDue,
        from: S,
        to: S,
        reason: &'a str,
    ) -> opledger_store::transition::TransitionRequest<'a> {
        custodian_move(
            due.operation.payload.tenant_id,
            due.operation.op_id,
            from,
            to,
            &self.executor_id,
            reason,
        )
    }
}

/// A lost race (another instance moved first) is not a failure.
fn ignore_conflict<T>(result: Result<T, StoreError>) -> Result<(), StoreError> {
    match result {
        Ok(_) | Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
