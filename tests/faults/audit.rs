//! What the clients did (and were told), and the audit that compares it with the database and the
//! chain after the system converged: every acknowledged operation and webhook present, at most
//! one on-chain transfer per operation, every hold resolved at most once and only on evidence,
//! ledger conservation, destinations paid exactly what was confirmed; and no duplicate work by
//! the two instances of each worker: replacements of one operation never made twice at once,
//! no operation settled or released twice in the ledger, one credit proposal per deposit (the
//! harness's deposits carry no chain evidence and no operator signs them, so they stay pending:
//! issue 25), no credit applied without evidence, and every submission of every signed
//! transaction counted.

use crate::cluster::Cluster;
use opledger_proto::v1 as pb;
use opledger_tests::authed;
use opledger_tests::signer::HOT_WALLET;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tonic::Code;

/// What a client asked for and was acknowledged.
#[derive(Debug, Clone)]
pub struct Op {
    /// Destination (lowercase).
    pub to: String,
    /// Amount in wei.
    pub amount: u128,
    /// Approved (so it must end paid or proven unpaid).
    pub approved: bool,
    /// Rejected (so it must end REJECTED, released).
    pub rejected: bool,
}

/// Counters of one harness run.
#[derive(Debug, Default)]
pub struct Tally {
    /// Operations acknowledged.
    pub ops: BTreeMap<String, Op>,
    /// Acknowledged webhooks: event id -> deposit id.
    pub webhooks: BTreeMap<String, String>,
    /// Amounts of the deposits sent: deposit id -> amount.
    pub deposit_amounts: BTreeMap<String, u128>,
    /// Processes killed (failpoint aborts and SIGKILLs).
    pub kills: u64,
    /// Of which by failpoint.
    pub failpoint_kills: u64,
    /// anvil reorganizations.
    pub reorgs: u64,
    /// Webhooks delivered more than once.
    pub duplicate_webhooks: u64,
    /// Webhooks delivered after a later one.
    pub reordered_webhooks: u64,
    /// Calls whose outcome the client could not know (transport error, UNAVAILABLE, 5xx).
    pub indeterminate: u64,
    /// Of which, on retry, turned out to have happened (replayed / duplicate).
    pub indeterminate_happened: u64,
    /// Of which, on retry, had not happened and happened now.
    pub indeterminate_now: u64,
    /// Audits run.
    pub audits: u64,
    /// Everything found wrong.
    pub violations: Vec<String>,
    /// Transfers of one operation mined more than once.
    pub double_payouts: u64,
    /// Holds released without chain evidence or a pre-signing decision.
    pub releases_without_evidence: u64,
    /// Credits applied (`ledger_credits`) that are neither an owner credit (no proposal under
    /// their credit id) nor attested by the witness (`credit_attestations`).
    pub credits_without_evidence: u64,
    /// Released holds of signed withdrawals, each with the reconciler's proposal and the
    /// witness's attestation of the same evidence (at the latest audit).
    pub witnessed_releases: u64,
    /// Operations seen UNKNOWN at an audit's start (resolved by the reconciler since).
    pub unknown_resolved: u64,
    /// Transfers dropped from the node's pool that ended VERIFIED_NOT_SENT by their own final
    /// cancel.
    pub dropped_cancelled: u64,
    /// At the latest audit: signed attempts, how many of them were submitted, all their
    /// `eth_sendRawTransaction` calls, and the calls beyond each attempt's first.
    pub sends: Sends,
    /// Replacements found racing (operation, attempt), each reported once.
    pub races: BTreeSet<(uuid::Uuid, i32)>,
}

/// Submissions of our signed transactions, as the JSON-RPC proxy in front of the node counted
/// them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Sends {
    /// Signed attempts.
    pub attempts: u64,
    /// Attempts submitted at least once.
    pub submitted: u64,
    /// `eth_sendRawTransaction` calls carrying one of them.
    pub calls: u64,
    /// Calls beyond each attempt's first (after a lost answer, a restart, a race).
    pub repeated: u64,
    /// The most calls one attempt got.
    pub most: u64,
}

fn transient(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::Unknown
            | Code::Internal
            | Code::Cancelled
            | Code::DeadlineExceeded
    )
}

const RETRY_FOR: Duration = Duration::from_secs(60);

/// How one client call ended.
pub enum Answer<T> {
    /// Answered; `already` when the effect had happened before this call (a replay).
    Done {
        /// What the call returned.
        value: T,
        /// The effect had happened before this call.
        already: bool,
    },
    /// No answer (transport error, UNAVAILABLE, 5xx): the outcome is unknown, retry.
    Unanswered(anyhow::Error),
    /// A definite refusal.
    Refused(anyhow::Error),
}

impl<T> Answer<T> {
    fn from_status(status: tonic::Status) -> Answer<T> {
        if transient(&status) {
            Answer::Unanswered(status.into())
        } else {
            Answer::Refused(status.into())
        }
    }
}

/// An approver's decision on a REQUESTED withdrawal.
#[derive(Debug, Clone, Copy)]
pub enum Decision {
    /// Approve its payload hash.
    Approve,
    /// Reject it (the hold is released).
    Reject,
}

/// One approval or rejection through approvals instance `at` (`None`: the next in turn), unless
/// the withdrawal already left REQUESTED that way.
pub async fn decide_at(c: &Cluster, id: &str, decision: Decision, at: Option<usize>) -> Answer<()> {
    let w = match c.withdrawal(id).await {
        Ok(w) => w,
        Err(e) => {
            return match e.downcast::<tonic::Status>() {
                Ok(status) => Answer::from_status(status),
                Err(e) => Answer::Unanswered(e),
            };
        }
    };
    let done_state = match decision {
        Decision::Approve => w.state != pb::WithdrawalState::Requested as i32,
        Decision::Reject => w.state == pb::WithdrawalState::Rejected as i32,
    };
    if done_state {
        return Answer::Done {
            value: (),
            already: true,
        };
    }
    let (name, mut approvals) = match c.approvals_at(at) {
        Ok(client) => client,
        Err(e) => return Answer::Unanswered(e),
    };
    let answer = match decision {
        Decision::Approve => approvals
            .approve_withdrawal(authed(
                &c.acme.approver,
                opledger_tests::approval(c.acme.id, &w, 0),
            ))
            .await
            .map(|_| ()),
        Decision::Reject => approvals
            .reject_withdrawal(authed(
                &c.acme.approver,
                opledger_tests::rejection(c.acme.id, &w, 0, "fault harness"),
            ))
            .await
            .map(|_| ()),
    };
    match answer {
        Ok(()) => {
            c.answered_by(&name);
            Answer::Done {
                value: (),
                already: false,
            }
        }
        Err(status) => Answer::from_status(status),
    }
}

/// The create request of a withdrawal.
pub fn create_request(key: &str, amount: u128, to: &str) -> pb::CreateWithdrawalRequest {
    pb::CreateWithdrawalRequest {
        idempotency_key: key.to_owned(),
        payload: Some(opledger_tests::payload(&amount.to_string(), to)),
    }
}

/// The body of a deposit webhook to `treasury`.
pub fn deposit_body(deposit_id: &str, amount: u128) -> String {
    opledger_tests::inbox::deposit(deposit_id, "treasury", "ETH", &amount.to_string())
}

impl Tally {
    /// Repeats `call` until it gets an answer, as a client that got none must (same key, same
    /// webhook id), for up to [`RETRY_FOR`]; `uncertain` when an earlier call got no answer.
    /// Counts indeterminate outcomes and, once answered, whether the retry found the effect
    /// already there.
    async fn until_answered<T, F, Fut>(
        &mut self,
        mut uncertain: bool,
        mut call: F,
    ) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Answer<T>>,
    {
        let deadline = tokio::time::Instant::now() + RETRY_FOR;
        if uncertain {
            self.indeterminate += 1;
        }
        loop {
            match call().await {
                Answer::Done { value, already } => {
                    if uncertain {
                        if already {
                            self.indeterminate_happened += 1;
                        } else {
                            self.indeterminate_now += 1;
                        }
                    }
                    return Ok(value);
                }
                Answer::Refused(e) => return Err(e),
                Answer::Unanswered(e) => {
                    anyhow::ensure!(
                        tokio::time::Instant::now() < deadline,
                        "no answer for {RETRY_FOR:?}: {e:?}"
                    );
                    if !uncertain {
                        self.indeterminate += 1;
                        uncertain = true;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    /// Creates a withdrawal with `key`, retrying with the same key until the outcome is known;
    /// `uncertain` when an earlier call with this key got no answer.
    pub async fn create(
        &mut self,
        c: &Cluster,
        key: &str,
        amount: u128,
        to: &str,
        uncertain: bool,
    ) -> anyhow::Result<String> {
        let request = create_request(key, amount, to);
        let id = self
            .until_answered(uncertain, || async {
                let (name, answer) = match c.operations_at(None) {
                    Ok((name, mut client)) => (
                        name,
                        client
                            .create_withdrawal(authed(&c.acme.client, request.clone()))
                            .await,
                    ),
                    Err(e) => return Answer::Unanswered(e),
                };
                match answer {
                    Ok(answer) => {
                        c.answered_by(&name);
                        let answer = answer.into_inner();
                        match answer.withdrawal {
                            Some(w) => Answer::Done {
                                value: w.withdrawal_id,
                                already: answer.replayed,
                            },
                            None => Answer::Refused(anyhow::anyhow!("no withdrawal")),
                        }
                    }
                    Err(status) => Answer::from_status(status),
                }
            })
            .await?;
        self.ops.insert(
            id.clone(),
            Op {
                to: to.to_owned(),
                amount,
                approved: false,
                rejected: false,
            },
        );
        Ok(id)
    }

    /// Approves a withdrawal (its payload hash), retrying until it is approved; `uncertain` when
    /// an earlier call got no answer.
    pub async fn approve(&mut self, c: &Cluster, id: &str, uncertain: bool) -> anyhow::Result<()> {
        self.until_answered(uncertain, || decide_at(c, id, Decision::Approve, None))
            .await?;
        if let Some(op) = self.ops.get_mut(id) {
            op.approved = true;
        }
        Ok(())
    }

    /// Rejects a REQUESTED withdrawal, retrying until it is rejected; `uncertain` when an earlier
    /// call got no answer.
    pub async fn reject(&mut self, c: &Cluster, id: &str, uncertain: bool) -> anyhow::Result<()> {
        self.until_answered(uncertain, || decide_at(c, id, Decision::Reject, None))
            .await?;
        if let Some(op) = self.ops.get_mut(id) {
            op.rejected = true;
        }
        Ok(())
    }

    /// Delivers a deposit webhook like a Standard Webhooks sender: until a 2xx; `uncertain` when
    /// an earlier delivery got no answer.
    pub async fn deposit(
        &mut self,
        c: &Cluster,
        event_id: &str,
        deposit_id: &str,
        amount: u128,
        uncertain: bool,
    ) -> anyhow::Result<()> {
        let body = deposit_body(deposit_id, amount);
        self.deposit_amounts.insert(deposit_id.to_owned(), amount);
        self.until_answered(uncertain, || async {
            let (name, sender) = c.sender_at(None);
            match sender.send(&c.endpoint, event_id, &body).await {
                Ok((200, text)) => {
                    c.answered_by(&name);
                    Answer::Done {
                        value: (),
                        already: text.contains("\"duplicate\""),
                    }
                }
                Ok((status, text)) if status < 500 => {
                    Answer::Refused(anyhow::anyhow!("webhook refused: {status} {text}"))
                }
                Ok((status, _)) => Answer::Unanswered(anyhow::anyhow!("HTTP {status}")),
                Err(e) => Answer::Unanswered(e),
            }
        })
        .await?;
        self.webhooks
            .insert(event_id.to_owned(), deposit_id.to_owned());
        Ok(())
    }

    /// Waits until every acknowledged operation and webhook reached its final state.
    pub async fn converge(&mut self, c: &mut Cluster, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut saw_unknown = BTreeSet::new();
        loop {
            c.heal(false).await?;
            let states = states(c).await?;
            for (id, state) in &states {
                if state == "UNKNOWN" {
                    saw_unknown.insert(id.clone());
                }
            }
            let pending: Vec<String> = self
                .ops
                .iter()
                .filter(|(id, op)| {
                    let state = states.get(*id).map_or("MISSING", String::as_str);
                    let done = if op.rejected {
                        state == "REJECTED"
                    } else if op.approved {
                        state == "CONFIRMED" || state == "VERIFIED_NOT_SENT"
                    } else {
                        state == "REQUESTED"
                    };
                    !done
                })
                .map(|(id, _)| format!("{id}:{}", states.get(id).map_or("MISSING", String::as_str)))
                .collect();
            let (work_left,): (i64,) = sqlx::query_as(
                "SELECT count(*) FROM inbox_work WHERE tenant_id = $1 AND status <> 'DONE'",
            )
            .bind(c.acme.id.as_uuid())
            .fetch_one(c.stack.admin.pool())
            .await?;
            if pending.is_empty() && work_left == 0 {
                self.unknown_resolved += u64::try_from(saw_unknown.len()).unwrap_or(0);
                return Ok(());
            }
            // Not converging is a violation in itself; stop here rather than pile up more work.
            if tokio::time::Instant::now() >= deadline {
                let pool = c.node.txpool_status().await?;
                let latest = hot_nonce(c).await?;
                let pending_nonce = c
                    .node
                    .rpc("eth_getTransactionCount", json!([HOT_WALLET, "pending"]))
                    .await?;
                // Why the broadcaster is not moving them, if it is backing off.
                let backoff: Vec<(String, i32, String, f64)> = sqlx::query_as(
                    "SELECT op_id::text, failures, last_reason, \
                       extract(epoch FROM next_attempt_at - now())::float8 \
                     FROM broadcast_backoff WHERE tenant_id = $1 ORDER BY op_id LIMIT 5",
                )
                .bind(c.acme.id.as_uuid())
                .fetch_all(c.stack.admin.pool())
                .await?;
                anyhow::bail!(
                    "did not converge in {timeout:?}: {} operations pending ({}), {work_left} \
                     inbox items; chain: hot wallet nonce {latest} (pending {pending_nonce}), \
                     txpool {} pending, {} queued; broadcaster back-off (op, failures, last \
                     reason, s until the next attempt): {backoff:?}",
                    pending.len(),
                    pending
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", "),
                    pool.pending,
                    pool.queued
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Compares the database and the chain with what the clients were told; records violations.
    pub async fn audit(&mut self, c: &Cluster, label: &str) -> anyhow::Result<()> {
        self.audits += 1;
        let before = self.violations.len();
        let invariants = c
            .stack
            .admin
            .check_invariants()
            .await
            .map_err(|e| anyhow::anyhow!(e.log_safe()))?;
        for v in invariants {
            self.violations.push(format!(
                "{label}: invariant {} violated: {:?}",
                v.invariant, v.rows
            ));
        }
        let states = states(c).await?;
        let attempts = opledger_tests::audit::attempts(c.stack.admin.pool(), c.acme.id).await?;
        let holds = opledger_tests::audit::holds(c.stack.admin.pool(), c.acme.id).await?;
        let witnessed: BTreeSet<String> = sqlx::query_scalar::<_, uuid::Uuid>(
            "SELECT DISTINCT p.op_id FROM release_proposals p \
             JOIN release_attestations t USING (tenant_id, op_id, tx_hash, block_number, block_hash) \
             WHERE p.tenant_id = $1",
        )
        .bind(c.acme.id.as_uuid())
        .fetch_all(c.stack.admin.pool())
        .await?
        .into_iter()
        .map(|op| op.to_string())
        .collect();
        self.witnessed_releases = 0;
        let mut mined_nonces = BTreeSet::new();
        let mut paid: BTreeMap<String, u128> = BTreeMap::new();
        for (id, op) in &self.ops {
            let Some(state) = states.get(id) else {
                self.violations
                    .push(format!("{label}: acknowledged operation {id} lost"));
                continue;
            };
            let mut transfers = 0;
            let mut cancels = 0;
            let mut nonce = None;
            for (op_id, hash, kind, n) in attempts.iter().filter(|a| a.0.to_string() == *id) {
                let _ = op_id;
                nonce = Some(*n);
                let receipt = c
                    .node
                    .rpc("eth_getTransactionReceipt", json!([hash]))
                    .await?;
                if receipt.is_null() {
                    continue;
                }
                mined_nonces.insert(*n);
                if receipt["status"] == json!("0x1") {
                    if kind == "CANCEL" {
                        cancels += 1;
                    } else {
                        transfers += 1;
                    }
                }
            }
            if transfers > 1 {
                self.double_payouts += 1;
                self.violations
                    .push(format!("{label}: {id} paid {transfers} times"));
            }
            let hold = holds.get(id).map_or("NONE", String::as_str);
            match state.as_str() {
                "CONFIRMED" => {
                    if transfers != 1 {
                        self.violations.push(format!(
                            "{label}: {id} CONFIRMED with {transfers} mined transfers"
                        ));
                    }
                    if hold != "SETTLED" {
                        self.violations
                            .push(format!("{label}: {id} CONFIRMED, hold {hold}"));
                    }
                    *paid.entry(op.to.clone()).or_default() += op.amount;
                }
                "VERIFIED_NOT_SENT" => {
                    let chain_nonce = hot_nonce(c).await?;
                    let consumed =
                        nonce.is_some_and(|n| u64::try_from(n).unwrap_or(u64::MAX) < chain_nonce);
                    if transfers != 0 || !(cancels == 1 || consumed) {
                        self.releases_without_evidence += 1;
                        self.violations
                            .push(format!("{label}: {id} released without evidence"));
                    }
                    let signed = attempts.iter().any(|a| a.0.to_string() == *id);
                    if signed && hold == "RELEASED" {
                        if witnessed.contains(id) {
                            self.witnessed_releases += 1;
                        } else {
                            self.releases_without_evidence += 1;
                            self.violations
                                .push(format!("{label}: {id} released without the witness"));
                        }
                    }
                    if hold != "RELEASED" {
                        self.violations
                            .push(format!("{label}: {id} VERIFIED_NOT_SENT, hold {hold}"));
                    }
                }
                "REJECTED" => {
                    if nonce.is_some() {
                        self.releases_without_evidence += 1;
                        self.violations
                            .push(format!("{label}: {id} rejected after signing"));
                    }
                    if hold != "RELEASED" {
                        self.violations
                            .push(format!("{label}: {id} REJECTED, hold {hold}"));
                    }
                }
                _ => {
                    if transfers > 0 && hold != "SETTLED" && state != "BROADCAST" {
                        self.violations
                            .push(format!("{label}: {id} {state} but mined"));
                    }
                }
            }
        }
        for (to, amount) in &paid {
            let balance = c.node.balance(to).await?;
            if balance != *amount {
                self.violations.push(format!(
                    "{label}: a destination holds {balance}, confirmed {amount}"
                ));
            }
        }
        let chain_nonce = hot_nonce(c).await?;
        if chain_nonce != u64::try_from(mined_nonces.len()).unwrap_or(u64::MAX) {
            self.violations.push(format!(
                "{label}: hot wallet nonce {chain_nonce}, but {} nonces mined by our attempts",
                mined_nonces.len()
            ));
        }
        let events: BTreeSet<String> = sqlx::query_as::<_, (String,)>(
            "SELECT event_id FROM inbox_events WHERE tenant_id = $1",
        )
        .bind(c.acme.id.as_uuid())
        .fetch_all(c.stack.admin.pool())
        .await?
        .into_iter()
        .map(|(e,)| e)
        .collect();
        for event in self.webhooks.keys() {
            if !events.contains(event) {
                self.violations
                    .push(format!("{label}: acknowledged webhook {event} lost"));
            }
        }
        self.audit_credits(c, label).await?;
        self.duplicate_work(c, label).await?;
        if self.violations.len() > before {
            eprintln!("audit {label}: {:?}", &self.violations[before..]);
        }
        Ok(())
    }
}

async fn states(c: &Cluster) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(sqlx::query_as::<_, (uuid::Uuid, String)>(
        "SELECT op_id, state FROM withdrawal_ops WHERE tenant_id = $1",
    )
    .bind(c.acme.id.as_uuid())
    .fetch_all(c.stack.admin.pool())
    .await?
    .into_iter()
    .map(|(id, s)| (id.to_string(), s))
    .collect())
}

async fn hot_nonce(c: &Cluster) -> anyhow::Result<u64> {
    let value = c
        .node
        .rpc("eth_getTransactionCount", json!([HOT_WALLET, "latest"]))
        .await?;
    let text = value.as_str().unwrap_or("0x0").trim_start_matches("0x");
    Ok(u64::from_str_radix(text, 16)?)
}
