//! What the pipeline benchmark checks after each phase, in SQL and on chain: every withdrawal
//! CONFIRMED with exactly one attempt, the ledger's invariants, the hot wallets' nonces, and work
//! done more than once.

use std::collections::BTreeMap;

use super::setup::store_err;
use super::types::{Bench, Duplicates, Sender};
use super::witness::WitnessTotals;

/// What a phase's checks found.
pub(super) struct Checked {
    /// Work done more than once.
    pub(super) duplicates: Duplicates,
    /// Transitions made by each broadcaster, watcher and reconciler instance.
    pub(super) per_instance: Vec<(String, String, i64)>,
    /// Each violation as a sentence (empty: all hold).
    pub(super) failures: Vec<String>,
}

impl Bench {
    /// Every check of a phase of `n` withdrawals over `senders` that ended in `states`, given
    /// what its witnesses did and how many client calls failed.
    pub(super) async fn check(
        &self,
        senders: &[Sender],
        n: usize,
        states: &BTreeMap<String, i64>,
        witness: &WitnessTotals,
        client_errors: usize,
        first_error: Option<&str>,
    ) -> anyhow::Result<Checked> {
        let tenants: Vec<uuid::Uuid> = senders.iter().map(|s| s.tenant.as_uuid()).collect();
        let mut failures = self.verify(senders, n, states).await?;
        let duplicates = self.duplicates(&tenants).await?;
        if duplicates.total() != 0 {
            failures.push(format!("duplicate work: {duplicates:?}"));
        }
        let per_instance: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT actor_id, actor, count(*) FROM operation_transitions \
             WHERE tenant_id = ANY($1) AND actor IN ('broadcaster', 'chain_watcher', 'reconciler') \
             GROUP BY actor_id, actor ORDER BY actor_id, actor",
        )
        .bind(&tenants)
        .fetch_all(&self.owner)
        .await?;
        // No release is proposed on the happy path; a refusal would mean the witness's evidence
        // contradicts an honest reconciler's.
        if witness.refused_total() > 0 {
            failures.push(format!(
                "the witness refused {} proposed releases (by reason: {:?})",
                witness.refused_total(),
                witness.refused
            ));
        }
        if client_errors > 0 {
            failures.push(format!(
                "{client_errors} create or approve calls failed (first: {})",
                first_error.unwrap_or("-")
            ));
        }
        Ok(Checked {
            duplicates,
            per_instance,
            failures,
        })
    }

    /// Work of the phase's withdrawals done more than once.
    async fn duplicates(&self, tenants: &[uuid::Uuid]) -> anyhow::Result<Duplicates> {
        let raws: Vec<(String,)> = sqlx::query_as(
            "SELECT encode(raw_tx, 'hex') FROM tx_attempts WHERE tenant_id = ANY($1)",
        )
        .bind(tenants)
        .fetch_all(&self.owner)
        .await?;
        let mut out = Duplicates::default();
        if let Some(recorder) = &self.recorder {
            let sent = recorder.sent_transactions();
            let (mut sends, mut unsent) = (0, 0);
            for (raw,) in &raws {
                match sent.get(raw).copied().unwrap_or(0) {
                    0 => unsent += 1,
                    n => sends += n - 1,
                }
            }
            (out.sends, out.unsent) = (Some(sends), Some(unsent));
        }
        /// How many rows of `$from` matching `$filter` there are beyond each withdrawal's first.
        macro_rules! beyond_first {
            ($filter:literal, $from:literal) => {
                concat!(
                    "SELECT coalesce(sum(n - 1), 0)::bigint FROM (SELECT count(*) AS n FROM ",
                    $from,
                    " WHERE tenant_id = ANY($1) AND ",
                    $filter,
                    " GROUP BY tenant_id, op_id) x"
                )
            };
        }
        for (query, field) in [
            (beyond_first!("true", "tx_attempts"), &mut out.attempts),
            (
                beyond_first!(
                    "from_state = 'SIGNED' AND to_state IN ('BROADCAST', 'UNKNOWN')",
                    "operation_transitions"
                ),
                &mut out.broadcasts,
            ),
            (
                beyond_first!("to_state = 'CONFIRMED'", "operation_transitions"),
                &mut out.confirmations,
            ),
            (
                beyond_first!("kind = 'SETTLE'", "ledger_entries"),
                &mut out.settlements,
            ),
        ] {
            let (n,): (i64,) = sqlx::query_as(query)
                .bind(tenants)
                .fetch_one(&self.owner)
                .await?;
            *field = n;
        }
        Ok(out)
    }

    /// What must hold after a phase; each violation as a sentence (empty: all hold).
    async fn verify(
        &self,
        senders: &[Sender],
        n: usize,
        states: &BTreeMap<String, i64>,
    ) -> anyhow::Result<Vec<String>> {
        let mut failures = Vec::new();
        let n = i64::try_from(n)?;
        let tenants: Vec<uuid::Uuid> = senders.iter().map(|s| s.tenant.as_uuid()).collect();
        let confirmed = states.get("CONFIRMED").copied().unwrap_or(0);
        let total: i64 = states.values().sum();
        if confirmed != n || total != n {
            // Why the others are not: each one's last move (actor and reason) and escalation.
            let why: Vec<(String, String, String, String)> = sqlx::query_as(
                "SELECT o.state, COALESCE(t.actor, '-'), COALESCE(t.reason, '-'), \
                   COALESCE((SELECT string_agg(e.reason_code || '/' || e.owner, ',') \
                     FROM escalations e WHERE e.tenant_id = o.tenant_id AND e.op_id = o.op_id), '-') \
                 FROM withdrawal_ops o LEFT JOIN LATERAL ( \
                   SELECT actor, reason FROM operation_transitions x \
                   WHERE x.tenant_id = o.tenant_id AND x.op_id = o.op_id \
                   ORDER BY x.transition_id DESC LIMIT 1) t ON true \
                 WHERE o.tenant_id = ANY($1) AND o.state <> 'CONFIRMED'",
            )
            .bind(&tenants)
            .fetch_all(&self.owner)
            .await?;
            failures.push(format!(
                "{confirmed} of {total} withdrawals CONFIRMED, expected all {n} (states {states:?}; \
                 the others' last move and escalations: {why:?})"
            ));
        }
        let (ops, with_one): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE attempts = 1) FROM ( \
               SELECT o.op_id, count(a.op_id) AS attempts FROM withdrawal_ops o \
               LEFT JOIN tx_attempts a USING (tenant_id, op_id) \
               WHERE o.tenant_id = ANY($1) GROUP BY o.tenant_id, o.op_id) x",
        )
        .bind(&tenants)
        .fetch_one(&self.owner)
        .await?;
        if with_one != ops {
            failures.push(format!(
                "{with_one} of {ops} withdrawals have exactly one tx_attempts row"
            ));
        }
        let violations = self.setup.check_invariants().await.map_err(store_err)?;
        if !violations.is_empty() {
            failures.push(format!("ledger invariants violated: {violations:?}"));
        }
        for sender in senders {
            let (count,): (i64,) =
                sqlx::query_as("SELECT count(*) FROM withdrawal_ops WHERE tenant_id = $1")
                    .bind(sender.tenant.as_uuid())
                    .fetch_one(&self.owner)
                    .await?;
            let nonce = self.node.nonce(&sender.address).await?;
            if i64::try_from(nonce)? != count {
                failures.push(format!(
                    "hot wallet {} has on-chain nonce {nonce}, expected {count} (its withdrawals)",
                    sender.address
                ));
            }
        }
        Ok(failures)
    }
}
