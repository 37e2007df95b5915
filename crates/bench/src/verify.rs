//! What the signer's approval verification costs per withdrawal: the quorum decision
//! (`opledger_domain::approval::evaluate`: one Ed25519 verification per stored approval) and the
//! trust statement's own signature check, against the payload-hash recomputation the signer did
//! before signed approvals existed, measured in the same run on the same machine.

use crate::report::summarize;
use clap::Parser;
use opledger_domain::Amount;
use opledger_domain::approval::{
    ApprovalFacts, ApprovalStatement, Decision, KeyId, KeyKind, OperationFacts, RegisteredKey,
    Signature, SigningKey, TrustParts, TrustStatement, VerifyingKey, evaluate, signature,
};
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{
    AccountName, AssetCode, Destination, NetworkId, PayloadHash, WithdrawalPayload,
};
use opledger_domain::policy::ApprovalRule;
use opledger_domain::risk::RiskFlags;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Arguments of `opledger-bench verify`.
#[derive(Parser, Debug)]
pub struct Args {
    /// Timed repetitions of each measurement.
    #[arg(long, default_value_t = 20_000)]
    pub iterations: usize,
    /// Approvals per withdrawal to measure (each a distinct registered approver key).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub approvals: Vec<u32>,
}

fn key(i: u32) -> SigningKey {
    let mut seed = [0_u8; 32];
    seed[..4].copy_from_slice(&i.to_be_bytes());
    seed[31] = 0x5a;
    SigningKey::from_bytes(&seed)
}

fn time(iterations: usize, mut f: impl FnMut()) -> crate::report::Summary {
    let mut latencies = Vec::with_capacity(iterations);
    let started = Instant::now();
    for _ in 0..iterations {
        let t = Instant::now();
        f();
        latencies.push(t.elapsed());
    }
    summarize(latencies, 0, started.elapsed())
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// What the measurements run on: one withdrawal, its tenant's trust statement (with the
/// approver keys) signed by the tenant's admin key, and one signed approval per approver.
struct Fixture {
    tenant: TenantId,
    op: OperationId,
    payload: WithdrawalPayload,
    hash: PayloadHash,
    trust: TrustStatement,
    trust_bytes: Vec<u8>,
    trust_signature: Signature,
    pinned: [VerifyingKey; 1],
    signed: Vec<(ApprovalStatement, Vec<u8>)>,
}

impl Fixture {
    /// A withdrawal of a new tenant whose trust statement requires `most` (at most 10) of `most`
    /// registered approvers, each of whom signed an approval of it.
    fn new(most: u32) -> anyhow::Result<Fixture> {
        let tenant = TenantId::new();
        let op = OperationId::new();
        let payload = WithdrawalPayload {
            tenant_id: tenant,
            source_account: AccountName::parse("treasury")?,
            asset: AssetCode::parse("ETH")?,
            network: NetworkId::parse("anvil")?,
            destination: Destination::parse("0x70997970c51812dc3a010c7d01b50e0d17dc79c8")?,
            memo: None,
            amount: Amount::new(1_000_000),
            fee_cap: Amount::new(1_000_000_000_000_000),
            policy_version: 1,
        };
        let approvers: Vec<SigningKey> = (0..most).map(key).collect();
        let admin = key(1_000);
        let trust = TrustStatement::new(
            tenant,
            1,
            TrustParts {
                keys: approvers
                    .iter()
                    .map(|k| RegisteredKey::new(k.verifying_key(), KeyKind::Approver))
                    .collect(),
                rules: vec![(
                    payload.asset.clone(),
                    ApprovalRule {
                        min_amount: Amount::ZERO,
                        required_approvals: most.min(10),
                    },
                )],
                ..TrustParts::default()
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let trust_bytes = trust.canonical_bytes();
        let trust_signature = trust.sign(&admin);
        let pinned = [admin.verifying_key()];
        let hash = payload.hash();
        let signed: Vec<(ApprovalStatement, Vec<u8>)> = approvers
            .iter()
            .map(|k| {
                let statement = ApprovalStatement {
                    tenant_id: tenant,
                    operation_id: op,
                    payload_hash: hash,
                    decision: Decision::Approve,
                    approver_key_id: KeyId::of(&k.verifying_key()),
                    policy_version: 1,
                    acknowledged: RiskFlags::EMPTY,
                };
                let sig = statement.sign(k).map_err(|e| anyhow::anyhow!("{e}"))?;
                Ok((statement, sig.to_bytes().to_vec()))
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Fixture {
            tenant,
            op,
            payload,
            hash,
            trust,
            trust_bytes,
            trust_signature,
            pinned,
            signed,
        })
    }
}

/// Runs the measurements and prints one line each.
pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.iterations > 0, "--iterations must be at least 1");
    let most = args.approvals.iter().copied().max().unwrap_or(1).max(1);
    let fixture = Fixture::new(most)?;
    let Fixture {
        tenant,
        payload,
        trust_bytes,
        trust_signature,
        pinned,
        ..
    } = &fixture;
    println!(
        "machine: {} cores; {} iterations each; Ed25519 (ed25519-dalek, verify_strict)",
        std::thread::available_parallelism().map_or(1, usize::from),
        args.iterations
    );
    let baseline = time(args.iterations, || {
        black_box(black_box(payload).hash());
    });
    println!(
        "baseline: payload hash recomputed  p50 {:.2} us  p99 {:.2} us",
        us(baseline.p50),
        us(baseline.p99)
    );
    let trust_check = time(args.iterations, || {
        let sig = signature(&trust_signature.to_bytes()).ok();
        let verified =
            sig.and_then(|s| TrustStatement::verify_signed(trust_bytes, &s, *tenant, pinned).ok());
        black_box(verified);
    });
    println!(
        "trust statement decoded and verified  p50 {:.2} us  p99 {:.2} us  ({:.1}x the hash; \
         once per tenant and version: the signer caches it)",
        us(trust_check.p50),
        us(trust_check.p99),
        us(trust_check.p50) / us(baseline.p50).max(1e-9)
    );
    quorums(&args, &fixture, baseline.p50);
    Ok(())
}

/// The quorum decision for each approval count of `args`, against the hash's median `hash_p50`.
fn quorums(args: &Args, fixture: &Fixture, hash_p50: Duration) {
    let Fixture {
        tenant,
        op,
        payload,
        hash,
        trust,
        signed,
        ..
    } = fixture;
    let facts = OperationFacts {
        tenant_id: *tenant,
        operation_id: *op,
        payload_hash: *hash,
        asset: &payload.asset,
        amount: payload.amount,
        risk_flags: RiskFlags::EMPTY,
    };
    for &n in &args.approvals {
        let n = n.max(1) as usize;
        let approvals: Vec<ApprovalFacts<'_>> = signed[..n.min(signed.len())]
            .iter()
            .map(|(statement, signature)| ApprovalFacts {
                statement: *statement,
                signature,
            })
            .collect();
        let summary = time(args.iterations, || {
            black_box(evaluate(trust, &facts, black_box(&approvals)).ok());
        });
        println!(
            "quorum of {n} signed approval(s) evaluated  p50 {:.2} us  p99 {:.2} us  \
             ({:.2} us per approval; {:.1}x the hash)",
            us(summary.p50),
            us(summary.p99),
            us(summary.p50) / n as f64,
            us(summary.p50) / us(hash_p50).max(1e-9)
        );
    }
}
