//! Judging the BROADCAST operations of a network at a pinned block: each operation's verdict by
//! the domain's decision core, and the step it allows.

use opledger_chain::evidence::{B256, Pinned, Query, no_evidence, reason_label};
use opledger_domain::evidence::{NoVerdict, Step, Verdict, decide, watcher_step};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_evm::evidence::{Judgements, StoredAttempt};
use opledger_store::broadcast::{Inclusion, Watching};
use opledger_store::signing::Attempt;
use std::collections::HashMap;
use std::sync::Mutex;

/// An operation's verdict, and the step it allows.
pub(super) struct Judged {
    pub(super) op: Watching,
    pub(super) verdict: Verdict,
    pub(super) step: Step,
}

/// The verdicts on `ops` at `pinned`, and the watcher's steps: the chain is read for all of them
/// at once (a few batched requests per endpoint, not one per operation).
pub(super) async fn judge_all(
    ops: Vec<Watching>,
    pinned: &Pinned,
    network: &str,
    judgements: &Mutex<HashMap<String, Judgements<(TenantId, OperationId)>>>,
) -> Vec<Judged> {
    let prepared = judge_attempts(ops, network, judgements);
    // One query per operation that has an original attempt and a decodable sender, in order.
    let queries: Vec<Query> = prepared
        .iter()
        .filter_map(|(op, judged)| {
            Some(Query {
                sender: judged.sender?,
                nonce: op.attempts.first()?.signed.nonce,
                attempts: judged.hashes.clone(),
            })
        })
        .collect();
    let mut readings = pinned.read_all(&queries).await.into_iter();
    prepared
        .into_iter()
        .map(|(op, judged)| {
            let verdict = match (op.attempts.first(), judged.sender) {
                (None, _) => Verdict::NeverSigned,
                (Some(original), Some(_)) => {
                    let reading = readings
                        .next()
                        .unwrap_or(Err(opledger_domain::evidence::NoAgreement::Disagreement));
                    decide(&judged.roles, original.signed.nonce, &reading)
                }
                // Undecodable: every role is a defect, whatever the chain says.
                (Some(original), None) => decide(
                    &judged.roles,
                    original.signed.nonce,
                    &Err(opledger_domain::evidence::NoAgreement::Disagreement),
                ),
            };
            if let Verdict::NoVerdict(NoVerdict::NoAgreement(no)) = verdict
                && let Some(network) = op.attempts.first().map(|a| a.network.clone())
            {
                no_evidence().record(&network, reason_label(&no));
            }
            Judged {
                step: watcher_step(verdict),
                verdict,
                op,
            }
        })
        .collect()
}

/// Each operation of `network` with the judgement of its attempts (kept from the network's last
/// pass where unchanged).
fn judge_attempts(
    ops: Vec<Watching>,
    network: &str,
    judgements: &Mutex<HashMap<String, Judgements<(TenantId, OperationId)>>>,
) -> Vec<(Watching, opledger_evm::evidence::Judged)> {
    let mut all = judgements
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let kept = all.entry(network.to_owned()).or_default();
    let prepared: Vec<(Watching, opledger_evm::evidence::Judged)> = ops
        .into_iter()
        .map(|op| {
            let stored: Vec<StoredAttempt<'_>> =
                op.attempts.iter().map(Attempt::as_stored).collect();
            let judged = kept.judge(
                &(op.tenant_id, op.op_id),
                &stored,
                &op.destination,
                op.amount,
            );
            (op, judged)
        })
        .collect();
    kept.end_pass();
    prepared
}

/// The inclusion row for attempt `attempt` of `op` at `inclusion`.
pub(super) fn inclusion_of(
    op: &Watching,
    attempt: usize,
    inclusion: opledger_domain::evidence::Inclusion,
) -> Option<Inclusion> {
    let attempt = op.attempts.get(attempt)?;
    Some(Inclusion {
        tenant_id: op.tenant_id,
        op_id: op.op_id,
        tx_hash: attempt.signed.tx_hash.clone(),
        block_number: inclusion.block.number,
        block_hash: format!("{:#x}", B256::from(inclusion.block.hash)),
    })
}
