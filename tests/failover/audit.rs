//! After the system converged, what the clients were told against the database and the chain:
//! every acknowledged create, approval and webhook present; one operation per idempotency key,
//! one approval per operation and signature, one nonce per operation and one operation per
//! nonce, one event per webhook id and one credit proposal per deposit (pending: no chain
//! evidence, no operator statement, issue 25) and no credit applied without evidence, no two
//! moves of one operation from
//! the same version; at most one transfer per operation on chain, CONFIRMED only with it and a
//! settled hold, VERIFIED_NOT_SENT only on a cancel or a consumed nonce; ledger invariants;
//! every operation terminal.

use crate::load::Tally;
use crate::system::System;
use opledger_tests::signer::HOT_WALLET;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Counts of one audit.
#[derive(Debug, Default)]
pub struct Audit {
    /// Everything found wrong.
    pub violations: Vec<String>,
    /// Operations by final state.
    pub states: BTreeMap<String, u64>,
    /// Transfers mined (successful receipts of ORIGINAL or FEE_BUMP attempts).
    pub transfers: u64,
    /// Operations paid more than once.
    pub double_payouts: u64,
    /// Holds released without a cancel or consumed nonce.
    pub releases_without_evidence: u64,
    /// Credits applied (`ledger_credits`) that are neither an owner credit (no proposal under
    /// their credit id) nor attested by the witness (`credit_attestations`).
    pub credits_without_evidence: u64,
}

async fn states(sys: &System) -> anyhow::Result<BTreeMap<String, String>> {
    Ok(sqlx::query_as::<_, (uuid::Uuid, String)>(
        "SELECT op_id, state FROM withdrawal_ops WHERE tenant_id = $1",
    )
    .bind(sys.acme.id.as_uuid())
    .fetch_all(sys.stack.admin.pool())
    .await?
    .into_iter()
    .map(|(id, s)| (id.to_string(), s))
    .collect())
}

/// Waits until every acknowledged withdrawal is final (an approved one CONFIRMED or
/// VERIFIED_NOT_SENT) and the inbox has no work left.
pub async fn converge(sys: &System, tally: &Tally, timeout: Duration) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let pending = match states(sys).await {
            Ok(states) => tally
                .ops
                .iter()
                .filter(|(id, op)| {
                    let state = states.get(*id).map_or("MISSING", String::as_str);
                    if op.approved {
                        state != "CONFIRMED" && state != "VERIFIED_NOT_SENT"
                    } else {
                        state != "REQUESTED"
                    }
                })
                .map(|(id, _)| format!("{id}:{}", states.get(id).map_or("MISSING", String::as_str)))
                .collect::<Vec<_>>(),
            Err(e) => vec![format!("states unreadable: {e}")],
        };
        let work: Result<(i64,), _> = sqlx::query_as(
            "SELECT count(*) FROM inbox_work WHERE tenant_id = $1 AND status <> 'DONE'",
        )
        .bind(sys.acme.id.as_uuid())
        .fetch_one(sys.stack.admin.pool())
        .await;
        let work_left = work.map_or(-1, |(n,)| n);
        if pending.is_empty() && work_left == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "did not converge in {timeout:?}: {} operations pending ({}), {work_left} inbox items",
            pending.len(),
            pending
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Rows a query returns as text (an empty result is what every check wants).
async fn offenders(sys: &System, sql: &'static str) -> anyhow::Result<Vec<String>> {
    Ok(sqlx::query_as::<_, (String,)>(sql)
        .bind(sys.acme.id.as_uuid())
        .fetch_all(sys.stack.admin.pool())
        .await?
        .into_iter()
        .map(|(r,)| r)
        .collect())
}

/// Each idempotency mechanism's own evidence, as SQL that must return no row.
const ONCE_EACH: [(&str, &str); 6] = [
    (
        "one approval per operation and approver key (approvals by signature and operation)",
        "SELECT op_id::text FROM approvals WHERE tenant_id = $1 \
         GROUP BY op_id HAVING count(*) <> 1",
    ),
    (
        "one nonce per operation (signing by operation)",
        "SELECT op_id::text FROM tx_attempts WHERE tenant_id = $1 \
         GROUP BY op_id HAVING count(DISTINCT nonce) <> 1",
    ),
    (
        "one operation per nonce of the hot wallet",
        "SELECT sender || ':' || nonce FROM tx_attempts WHERE tenant_id = $1 \
         GROUP BY sender, nonce HAVING count(DISTINCT op_id) <> 1",
    ),
    (
        "one event per webhook id (webhooks by event id)",
        "SELECT event_id FROM inbox_events WHERE tenant_id = $1 \
         GROUP BY event_id HAVING count(*) <> 1",
    ),
    (
        "no two moves of one operation from the same version (transitions by conditional update)",
        "SELECT op_id::text FROM operation_transitions WHERE tenant_id = $1 \
         GROUP BY op_id HAVING count(*) <> count(DISTINCT version)",
    ),
    (
        "each once-only move at most once per operation",
        "SELECT op_id::text || ' ' || to_state FROM operation_transitions WHERE tenant_id = $1 \
         AND to_state IN ('APPROVED', 'SIGNED', 'CONFIRMED', 'VERIFIED_NOT_SENT', 'REJECTED') \
         AND from_state IN ('REQUESTED', 'SIGNING', 'BROADCAST', 'UNKNOWN') \
         GROUP BY op_id, from_state, to_state HAVING count(*) > 1",
    ),
];

async fn hot_nonce(sys: &System) -> anyhow::Result<u64> {
    let value = sys
        .node
        .rpc("eth_getTransactionCount", json!([HOT_WALLET, "latest"]))
        .await?;
    let text = value.as_str().unwrap_or("0x0").trim_start_matches("0x");
    Ok(u64::from_str_radix(text, 16)?)
}

/// Audits the converged system against `tally`.
pub async fn audit(sys: &System, tally: &Tally, label: &str) -> anyhow::Result<Audit> {
    let mut out = Audit::default();
    let mut violations = Vec::new();
    let mut violation = |v: String| violations.push(format!("{label}: {v}"));
    for v in sys
        .stack
        .admin
        .check_invariants()
        .await
        .map_err(|e| anyhow::anyhow!(e.log_safe()))?
    {
        violation(format!("invariant {} violated: {:?}", v.invariant, v.rows));
    }
    for (what, sql) in ONCE_EACH {
        let rows = offenders(sys, sql).await?;
        if !rows.is_empty() {
            violation(format!("not {what}: {rows:?}"));
        }
    }
    let states = states(sys).await?;
    let keys = u64::try_from(states.len()).unwrap_or(u64::MAX);
    if keys != tally.keys {
        violation(format!(
            "{keys} operations for {} idempotency keys (create by key)",
            tally.keys
        ));
    }
    let attempts = opledger_tests::audit::attempts(sys.stack.admin.pool(), sys.acme.id).await?;
    let holds = opledger_tests::audit::holds(sys.stack.admin.pool(), sys.acme.id).await?;
    let chain_nonce = hot_nonce(sys).await?;
    let mut by_op: BTreeMap<String, Vec<(&String, &String, i64)>> = BTreeMap::new();
    for (op, hash, kind, nonce) in &attempts {
        by_op
            .entry(op.to_string())
            .or_default()
            .push((hash, kind, *nonce));
    }
    let mut mined_nonces = BTreeSet::new();
    let mut paid: BTreeMap<String, u128> = BTreeMap::new();
    let mut lost = Vec::new();
    for (id, op) in &tally.ops {
        let Some(state) = states.get(id) else {
            lost.push(id.clone());
            continue;
        };
        *out.states.entry(state.clone()).or_default() += 1;
        let (mut transfers, mut cancels, mut nonce) = (0, 0, None);
        for (hash, kind, n) in by_op.get(id).into_iter().flatten() {
            nonce = Some(*n);
            let receipt = sys
                .node
                .rpc("eth_getTransactionReceipt", json!([hash]))
                .await?;
            if receipt.is_null() {
                continue;
            }
            mined_nonces.insert(*n);
            if receipt["status"] == json!("0x1") {
                if kind.as_str() == "CANCEL" {
                    cancels += 1;
                } else {
                    transfers += 1;
                }
            }
        }
        out.transfers += transfers;
        if transfers > 1 {
            out.double_payouts += 1;
            violation(format!("{id} paid {transfers} times"));
        }
        let hold = holds.get(id).map_or("NONE", String::as_str);
        match state.as_str() {
            "CONFIRMED" => {
                if transfers != 1 || hold != "SETTLED" {
                    violation(format!(
                        "{id} CONFIRMED with {transfers} mined transfers, hold {hold}"
                    ));
                }
                *paid.entry(op.to.clone()).or_default() += op.amount;
            }
            "VERIFIED_NOT_SENT" => {
                let consumed =
                    nonce.is_some_and(|n| u64::try_from(n).unwrap_or(u64::MAX) < chain_nonce);
                if transfers != 0 || !(cancels == 1 || consumed) {
                    out.releases_without_evidence += 1;
                    violation(format!("{id} released without evidence"));
                }
                if hold != "RELEASED" {
                    violation(format!("{id} VERIFIED_NOT_SENT, hold {hold}"));
                }
            }
            other => {
                if op.approved || other != "REQUESTED" {
                    violation(format!("{id} not final: {other}"));
                }
            }
        }
    }
    if !lost.is_empty() {
        violation(format!(
            "{} acknowledged operations lost: {:?}",
            lost.len(),
            lost.iter().take(5).collect::<Vec<_>>()
        ));
    }
    for (to, amount) in &paid {
        let balance = sys.node.balance(to).await?;
        if balance != *amount {
            violation(format!("a destination holds {balance}, confirmed {amount}"));
        }
    }
    if chain_nonce != u64::try_from(mined_nonces.len()).unwrap_or(u64::MAX) {
        violation(format!(
            "hot wallet nonce {chain_nonce}, but {} nonces mined by our attempts",
            mined_nonces.len()
        ));
    }
    let events: BTreeSet<String> =
        sqlx::query_as::<_, (String,)>("SELECT event_id FROM inbox_events WHERE tenant_id = $1")
            .bind(sys.acme.id.as_uuid())
            .fetch_all(sys.stack.admin.pool())
            .await?
            .into_iter()
            .map(|(e,)| e)
            .collect();
    let missing: Vec<&String> = tally
        .webhooks
        .keys()
        .filter(|e| !events.contains(*e))
        .collect();
    if !missing.is_empty() {
        violation(format!("{} acknowledged webhooks lost", missing.len()));
    }
    // Every acknowledged deposit proposed exactly once under its deposit id, with its amount,
    // and nothing else; pending (no witness may attest a deposit without evidence), so the
    // treasury's pending balance is their sum.
    let deposits: BTreeSet<&String> = tally.webhooks.values().collect();
    let proposed: BTreeMap<Vec<u8>, (String, bool)> = sqlx::query_as::<_, (Vec<u8>, String, bool)>(
        "SELECT p.credit_id, p.amount::text, \
           EXISTS (SELECT 1 FROM credit_attestations t \
                   WHERE t.tenant_id = p.tenant_id AND t.credit_id = p.credit_id) \
           OR EXISTS (SELECT 1 FROM credit_refusals r \
                      WHERE r.tenant_id = p.tenant_id AND r.credit_id = p.credit_id) \
         FROM credit_proposals p WHERE p.tenant_id = $1 AND p.kind = 'DEPOSIT'",
    )
    .bind(sys.acme.id.as_uuid())
    .fetch_all(sys.stack.admin.pool())
    .await?
    .into_iter()
    .map(|(id, amount, decided)| (id, (amount, decided)))
    .collect();
    let mut expected_pending: u128 = 0;
    for deposit in &deposits {
        let id = opledger_store::inbox::deposit_credit_digest(&sys.endpoint.source, deposit);
        let amount = tally.deposit_amounts.get(*deposit).copied();
        match (proposed.get(id.as_slice()), amount) {
            (None, _) => violation(format!("acknowledged deposit {deposit} never proposed")),
            (Some((stored, _)), Some(sent)) if *stored != sent.to_string() => {
                violation(format!(
                    "deposit {deposit} proposed for {stored}, sent {sent}"
                ));
            }
            (Some((_, true)), _) => violation(format!(
                "deposit {deposit} without evidence was attested or refused"
            )),
            (Some(_), _) => expected_pending += amount.unwrap_or(0),
        }
    }
    if proposed.len() != deposits.len() {
        violation(format!(
            "{} deposit proposals for {} distinct deposits",
            proposed.len(),
            deposits.len()
        ));
    }
    let pending =
        opledger_tests::inbox::pending(&sys.stack, sys.acme.id, "treasury", "ETH").await?;
    if pending != expected_pending {
        violation(format!(
            "treasury pending {pending}, deposits proposed {expected_pending}"
        ));
    }
    let (credits, owner, without_evidence): (i64, i64, i64) = sqlx::query_as(
        "SELECT count(*), \
           count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM credit_proposals p \
             WHERE p.tenant_id = l.tenant_id AND p.credit_id = l.idempotency_key_hash)), \
           count(*) FILTER (WHERE EXISTS (SELECT 1 FROM credit_proposals p \
               WHERE p.tenant_id = l.tenant_id AND p.credit_id = l.idempotency_key_hash) \
             AND NOT EXISTS (SELECT 1 FROM credit_attestations t \
               WHERE t.tenant_id = l.tenant_id AND t.credit_id = l.idempotency_key_hash)) \
         FROM ledger_credits l WHERE l.tenant_id = $1",
    )
    .bind(sys.acme.id.as_uuid())
    .fetch_one(sys.stack.admin.pool())
    .await?;
    if without_evidence > 0 {
        out.credits_without_evidence = u64::try_from(without_evidence).unwrap_or(u64::MAX);
        violation(format!(
            "{without_evidence} credits applied without the witness's attestation"
        ));
    }
    // One credit funded the tenant at the start (the owner's); the deposits stay pending.
    if (credits, owner) != (1, 1) {
        violation(format!(
            "{credits} credits applied ({owner} by the owner), expected only the opening balance"
        ));
    }
    out.violations = violations;
    Ok(out)
}
