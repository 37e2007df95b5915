//! Hostile values for the approvals service: mutated signed statements and signatures, ids,
//! risk flags, reasons, page tokens and sizes, assets.

use super::{Case, accepts, run};
use crate::harness::{Suite, Tally};
use crate::values::I32S;
use opledger_domain as domain;
use opledger_proto::v1 as pb;
use opledger_tests::{approval, authed, rejection};
use rand::Rng;
use rand::rngs::StdRng;

/// Mutations of a real signed statement and signature: none may ever verify.
fn statement_mutations(
    rng: &mut StdRng,
    statement: &[u8],
    signature: &[u8],
) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let random = |rng: &mut StdRng, n: usize| -> Vec<u8> { (0..n).map(|_| rng.random()).collect() };
    let mut out = vec![
        ("empty_statement".to_owned(), Vec::new(), signature.to_vec()),
        ("empty_signature".to_owned(), statement.to_vec(), Vec::new()),
        ("zero_signature".to_owned(), statement.to_vec(), vec![0; 64]),
        (
            "random_statement_100k".to_owned(),
            random(rng, 100_000),
            signature.to_vec(),
        ),
        (
            "signature_10k".to_owned(),
            statement.to_vec(),
            random(rng, 10_000),
        ),
        (
            "statement_twice".to_owned(),
            [statement, statement].concat(),
            signature.to_vec(),
        ),
    ];
    for i in 0..6 {
        if statement.len() > 1 {
            let cut = rng.random_range(1..statement.len());
            out.push((
                format!("truncated_{i}"),
                statement[..cut].to_vec(),
                signature.to_vec(),
            ));
        }
        let mut flipped = statement.to_vec();
        if let Some(at) = (!flipped.is_empty()).then(|| rng.random_range(0..flipped.len())) {
            flipped[at] ^= 1 << rng.random_range(0..8);
        }
        out.push((format!("bit_flip_{i}"), flipped, signature.to_vec()));
        let mut bad = signature.to_vec();
        if let Some(at) = (!bad.is_empty()).then(|| rng.random_range(0..bad.len())) {
            bad[at] ^= 1;
        }
        out.push((format!("signature_bit_flip_{i}"), statement.to_vec(), bad));
        let len = rng.random_range(1..512);
        out.push((format!("random_{i}"), random(rng, len), random(rng, 64)));
    }
    out
}

/// Every approvals method with hostile values.
pub async fn batch(
    suite: &Suite,
    tally: &mut Tally,
    rng: &mut StdRng,
    texts: &[(String, String)],
    pending: &pb::Withdrawal,
) -> anyhow::Result<()> {
    let acme = suite.acme();
    let approvals = suite.world.stack.approvals().await?;
    let approver = acme.approver.clone();
    let real = approval(acme.id, pending, 0);
    let mut cases: Vec<Case<pb::ApproveWithdrawalRequest>> = Vec::new();
    for (label, statement, signature) in
        statement_mutations(rng, &real.approval_statement, &real.signature)
    {
        cases.push((
            label,
            pb::ApproveWithdrawalRequest {
                approval_statement: statement,
                signature,
                ..real.clone()
            },
            false,
        ));
    }
    for (l, t) in texts {
        cases.push((
            format!("withdrawal_id={l}"),
            pb::ApproveWithdrawalRequest {
                withdrawal_id: t.clone(),
                ..real.clone()
            },
            false,
        ));
    }
    for flag in I32S {
        cases.push((
            format!("risk_flags=[{flag}]"),
            pb::ApproveWithdrawalRequest {
                acknowledged_risk_flags: vec![flag, flag],
                approval_statement: Vec::new(),
                ..real.clone()
            },
            false,
        ));
    }
    run(tally, "ApproveWithdrawal", cases, |r| {
        let mut c = approvals.clone();
        let r = authed(&approver, r);
        async move { c.approve_withdrawal(r).await }
    })
    .await;

    let real = rejection(acme.id, pending, 0, "hostile suite");
    let mut cases: Vec<Case<pb::RejectWithdrawalRequest>> = Vec::new();
    for (label, statement, signature) in
        statement_mutations(rng, &real.approval_statement, &real.signature)
    {
        cases.push((
            label,
            pb::RejectWithdrawalRequest {
                approval_statement: statement,
                signature,
                ..real.clone()
            },
            false,
        ));
    }
    for (l, t) in texts {
        // A hostile reason beside a broken signature: refused whatever the reason says.
        cases.push((
            format!("reason={l}"),
            pb::RejectWithdrawalRequest {
                reason: t.clone(),
                signature: vec![0; 64],
                ..real.clone()
            },
            false,
        ));
    }
    run(tally, "RejectWithdrawal", cases, |r| {
        let mut c = approvals.clone();
        let r = authed(&approver, r);
        async move { c.reject_withdrawal(r).await }
    })
    .await;

    let mut lists: Vec<Case<pb::ListPendingApprovalsRequest>> = texts
        .iter()
        .map(|(l, t)| {
            (
                format!("page_token={l}"),
                pb::ListPendingApprovalsRequest {
                    page_token: t.clone(),
                    ..Default::default()
                },
                true,
            )
        })
        .collect();
    for n in I32S {
        lists.push((
            format!("page_size={n}"),
            pb::ListPendingApprovalsRequest {
                page_size: n,
                ..Default::default()
            },
            true,
        ));
    }
    run(tally, "ListPendingApprovals", lists, |r| {
        let mut c = approvals.clone();
        let r = authed(&approver, r);
        async move { c.list_pending_approvals(r).await }
    })
    .await;
    let policies = texts
        .iter()
        .map(|(l, t)| {
            (
                format!("asset={l}"),
                pb::GetApprovalPolicyRequest { asset: t.clone() },
                accepts(domain::AssetCode::parse, t),
            )
        })
        .collect();
    run(tally, "GetApprovalPolicy", policies, |r| {
        let mut c = approvals.clone();
        let r = authed(&approver, r);
        async move { c.get_approval_policy(r).await }
    })
    .await;
    Ok(())
}
