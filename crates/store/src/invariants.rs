//! Ledger and operation invariants, checkable in SQL after any run (tests, fault harness, ops).

use crate::{Result, Store};

/// The invariants and a query per invariant returning the offending rows as text (empty = holds).
pub const CHECKS: &[(&str, &str)] = &[
    (
        "every journal entry balances to zero per asset",
        "SELECT entry_id::text FROM ledger_postings GROUP BY tenant_id, entry_id, asset \
         HAVING sum(amount) <> 0",
    ),
    (
        "available equals the sum of available postings",
        "SELECT a.account FROM ledger_accounts a LEFT JOIN ledger_postings p \
           ON p.tenant_id = a.tenant_id AND p.account = a.account AND p.asset = a.asset \
           AND p.bucket = 'available' \
         GROUP BY a.tenant_id, a.account, a.asset, a.available \
         HAVING a.available <> coalesce(sum(p.amount), 0)",
    ),
    (
        "held equals the sum of held postings",
        "SELECT a.account FROM ledger_accounts a LEFT JOIN ledger_postings p \
           ON p.tenant_id = a.tenant_id AND p.account = a.account AND p.asset = a.asset \
           AND p.bucket = 'held' \
         GROUP BY a.tenant_id, a.account, a.asset, a.held \
         HAVING a.held <> coalesce(sum(p.amount), 0)",
    ),
    (
        "held equals the sum of open holds",
        "SELECT a.account FROM ledger_accounts a LEFT JOIN ledger_holds h \
           ON h.tenant_id = a.tenant_id AND h.account = a.account AND h.asset = a.asset \
           AND h.status = 'OPEN' \
         GROUP BY a.tenant_id, a.account, a.asset, a.held \
         HAVING a.held <> coalesce(sum(h.amount), 0)",
    ),
    (
        "every operation has exactly one hold and one payload",
        "SELECT o.op_id::text FROM withdrawal_ops o \
         LEFT JOIN ledger_holds h USING (tenant_id, op_id) \
         LEFT JOIN withdrawal_payloads p USING (tenant_id, op_id) \
         WHERE h.op_id IS NULL OR p.op_id IS NULL",
    ),
    (
        "every hold belongs to an operation",
        "SELECT h.op_id::text FROM ledger_holds h LEFT JOIN withdrawal_ops o USING (tenant_id, op_id) \
         WHERE o.op_id IS NULL",
    ),
    (
        "hold status agrees with operation state",
        "SELECT o.op_id::text FROM withdrawal_ops o JOIN ledger_holds h USING (tenant_id, op_id) \
         WHERE (o.state IN ('REJECTED', 'VERIFIED_NOT_SENT')) <> (h.status = 'RELEASED') \
            OR (o.state = 'CONFIRMED') <> (h.status = 'SETTLED')",
    ),
    (
        "each hold was resolved at most once",
        "SELECT op_id::text FROM ledger_entries WHERE op_id IS NOT NULL GROUP BY tenant_id, op_id \
         HAVING count(*) FILTER (WHERE kind = 'HOLD') <> 1 \
            OR count(*) FILTER (WHERE kind IN ('RELEASE', 'SETTLE')) \
               - count(*) FILTER (WHERE kind = 'REOPEN') NOT IN (0, 1)",
    ),
    (
        "the transition log ends in the operation's state and version",
        "SELECT o.op_id::text FROM withdrawal_ops o JOIN LATERAL ( \
           SELECT to_state, version FROM operation_transitions t \
           WHERE t.tenant_id = o.tenant_id AND t.op_id = o.op_id \
           ORDER BY transition_id DESC LIMIT 1) last ON true \
         WHERE last.to_state <> o.state OR last.version <> o.version",
    ),
];

/// One broken invariant with up to ten offending rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which invariant.
    pub invariant: &'static str,
    /// Offending identifiers (entry ids, operation ids, account names).
    pub rows: Vec<String>,
}

impl Store {
    /// Runs every invariant check; an empty result means all hold.
    pub async fn check_invariants(&self) -> Result<Vec<Violation>> {
        let mut violations = Vec::new();
        for (invariant, sql) in CHECKS {
            let rows: Vec<(String,)> =
                sqlx::query_as(sqlx::AssertSqlSafe(format!("{sql} LIMIT 10")))
                    .fetch_all(&self.pool)
                    .await?;
            if !rows.is_empty() {
                violations.push(Violation {
                    invariant,
                    rows: rows.into_iter().map(|(r,)| r).collect(),
                });
            }
        }
        Ok(violations)
    }
}
