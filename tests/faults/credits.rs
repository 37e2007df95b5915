//! The credits of a harness run (issue 25): a deposit webhook only proposes a credit, and the
//! account moves only when the witness attests it. The harness's deposits carry no chain evidence
//! and no operator signs them, so every one must stay pending, proposed exactly once; the only
//! credit applied is the owner's opening balance; and no credit is ever applied without the
//! witness's attestation (`credits_without_evidence`, in the summary line).

use crate::audit::Tally;
use crate::cluster::Cluster;
use std::collections::{BTreeMap, BTreeSet};

impl Tally {
    /// Credits: every acknowledged deposit proposed exactly once (one `credit_proposals` row under
    /// its deposit id, with its amount) and nothing else proposed; the proposals pending (no chain
    /// evidence, no operator statement: no witness may attest them), so the treasury's pending
    /// balance is their sum; and every applied credit either the owner's opening balance or
    /// attested by the witness (`credits_without_evidence`).
    pub async fn audit_credits(&mut self, c: &Cluster, label: &str) -> anyhow::Result<()> {
        let pool = c.stack.admin.pool();
        let deposits: BTreeSet<&String> = self.webhooks.values().collect();
        let proposed: BTreeMap<Vec<u8>, (String, bool)> =
            sqlx::query_as::<_, (Vec<u8>, String, bool)>(
                "SELECT p.credit_id, p.amount::text, \
                   EXISTS (SELECT 1 FROM credit_attestations t \
                           WHERE t.tenant_id = p.tenant_id AND t.credit_id = p.credit_id) \
                   OR EXISTS (SELECT 1 FROM credit_refusals r \
                              WHERE r.tenant_id = p.tenant_id AND r.credit_id = p.credit_id) \
                 FROM credit_proposals p WHERE p.tenant_id = $1 AND p.kind = 'DEPOSIT'",
            )
            .bind(c.acme.id.as_uuid())
            .fetch_all(pool)
            .await?
            .into_iter()
            .map(|(id, amount, decided)| (id, (amount, decided)))
            .collect();
        let mut expected_pending: u128 = 0;
        for deposit in &deposits {
            let id = opledger_store::inbox::deposit_credit_digest(&c.endpoint.source, deposit);
            let amount = self.deposit_amounts.get(*deposit).copied();
            match (proposed.get(id.as_slice()), amount) {
                (None, _) => self.violations.push(format!(
                    "{label}: acknowledged deposit {deposit} never proposed"
                )),
                (Some((stored, _)), Some(sent)) if *stored != sent.to_string() => {
                    self.violations.push(format!(
                        "{label}: deposit {deposit} proposed for {stored}, sent {sent}"
                    ));
                }
                (Some((_, true)), _) => self.violations.push(format!(
                    "{label}: deposit {deposit} without evidence was attested or refused"
                )),
                (Some(_), _) => expected_pending += amount.unwrap_or(0),
            }
        }
        if proposed.len() != deposits.len() {
            self.violations.push(format!(
                "{label}: {} deposit proposals for {} distinct deposits",
                proposed.len(),
                deposits.len()
            ));
        }
        let pending =
            opledger_tests::inbox::pending(&c.stack, c.acme.id, "treasury", "ETH").await?;
        if pending != expected_pending {
            self.violations.push(format!(
                "{label}: treasury pending {pending}, deposits proposed {expected_pending}"
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
        .bind(c.acme.id.as_uuid())
        .fetch_one(pool)
        .await?;
        if without_evidence > 0 {
            self.credits_without_evidence += u64::try_from(without_evidence).unwrap_or(u64::MAX);
            self.violations.push(format!(
                "{label}: {without_evidence} credits applied without the witness's attestation"
            ));
        }
        // One credit funded the tenant at the start (the owner's); the deposits stay pending.
        if (credits, owner) != (1, 1) {
            self.violations.push(format!(
                "{label}: {credits} credits applied ({owner} by the owner), expected only the \
                 opening balance"
            ));
        }
        Ok(())
    }
}
