use super::trust::TrustParts;
use super::*;
use crate::amount::Amount;
use crate::ids::{OperationId, TenantId};
use crate::payload::{AssetCode, PayloadHash};
use crate::policy::ApprovalRule;

pub(super) fn key(name: &str) -> SigningKey {
    let seed: [u8; 32] = Sha256::digest(format!("opledger unit test key {name}")).into();
    SigningKey::from_bytes(&seed)
}

pub(super) fn id(k: &SigningKey) -> KeyId {
    KeyId::of(&k.verifying_key())
}

pub(super) fn eth() -> AssetCode {
    AssetCode::parse("ETH").expect("asset")
}

struct World {
    tenant: TenantId,
    op: OperationId,
    hash: PayloadHash,
    trust: TrustStatement,
}

fn world() -> World {
    let tenant = TenantId::new();
    let trust = TrustStatement::new(
        tenant,
        3,
        TrustParts {
            keys: vec![
                RegisteredKey::new(key("alice").verifying_key(), KeyKind::Approver),
                RegisteredKey::new(key("bob").verifying_key(), KeyKind::Approver),
                RegisteredKey::new(key("risk").verifying_key(), KeyKind::Service),
            ],
            revoked: vec![id(&key("mallory"))],
            rules: vec![(eth(), rule(0, 1)), (eth(), rule(1000, 2))],
            automated: vec![AutomatedApprover {
                asset: eth(),
                key_id: id(&key("risk")),
                below: Amount::new(100),
            }],
            kyt_required: vec![],
            credit_rules: vec![],
        },
    )
    .expect("trust statement");
    World {
        tenant,
        op: OperationId::new(),
        hash: PayloadHash::from_bytes([7; 32]),
        trust,
    }
}

pub(super) fn rule(min: u128, required: u32) -> ApprovalRule {
    ApprovalRule {
        min_amount: Amount::new(min),
        required_approvals: required,
    }
}

impl World {
    fn statement(&self, signer: &SigningKey, decision: Decision) -> ApprovalStatement {
        ApprovalStatement {
            tenant_id: self.tenant,
            operation_id: self.op,
            payload_hash: self.hash,
            decision,
            approver_key_id: id(signer),
            policy_version: 3,
        }
    }

    fn signed(&self, signer: &SigningKey, decision: Decision) -> (ApprovalStatement, Vec<u8>) {
        let s = self.statement(signer, decision);
        let sig = s.sign(signer).expect("sign");
        (s, sig.to_bytes().to_vec())
    }

    fn facts(&self, amount: u128) -> (AssetCode, Amount) {
        (eth(), Amount::new(amount))
    }

    fn evaluate(
        &self,
        amount: u128,
        decisions: &[(ApprovalStatement, Vec<u8>)],
    ) -> Result<Verdict, Refusal> {
        let (asset, amount) = self.facts(amount);
        let op = OperationFacts {
            tenant_id: self.tenant,
            operation_id: self.op,
            payload_hash: self.hash,
            asset: &asset,
            amount,
        };
        let approvals: Vec<ApprovalFacts<'_>> = decisions
            .iter()
            .map(|(statement, signature)| ApprovalFacts {
                statement: *statement,
                signature,
            })
            .collect();
        evaluate(&self.trust, &op, &approvals)
    }
}

#[test]
fn approval_statements_round_trip_and_refuse_any_other_bytes() {
    let w = world();
    let s = w.statement(&key("alice"), Decision::Approve);
    let bytes = s.canonical_bytes();
    assert_eq!(ApprovalStatement::decode(&bytes), Ok(s));
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert_eq!(
        ApprovalStatement::decode(&trailing),
        Err(StatementError::Malformed)
    );
    assert_eq!(
        ApprovalStatement::decode(&bytes[..bytes.len() - 1]),
        Err(StatementError::Malformed)
    );
    let mut other_domain = bytes.clone();
    other_domain[0] ^= 1;
    assert_eq!(
        ApprovalStatement::decode(&other_domain),
        Err(StatementError::Domain)
    );
    assert!(
        s.sign(&key("bob")).is_err(),
        "a key may only sign statements naming it"
    );
}

#[test]
fn distinct_registered_approvers_meet_the_quorum_and_one_key_counts_once() {
    let w = world();
    let alice = w.signed(&key("alice"), Decision::Approve);
    let bob = w.signed(&key("bob"), Decision::Approve);
    assert_eq!(
        w.evaluate(5, std::slice::from_ref(&alice)),
        Ok(Verdict::Met {
            approvers: 1,
            required: 1
        })
    );
    assert_eq!(
        w.evaluate(1000, &[alice.clone(), alice.clone()]),
        Ok(Verdict::Short {
            approvers: 1,
            required: 2
        })
    );
    assert_eq!(
        w.evaluate(1000, &[alice, bob]),
        Ok(Verdict::Met {
            approvers: 2,
            required: 2
        })
    );
}

#[test]
fn forged_copied_revoked_and_unknown_approvals_refuse_the_withdrawal() {
    let w = world();
    let (alice, sig) = w.signed(&key("alice"), Decision::Approve);
    let mut forged = sig.clone();
    forged[0] ^= 1;
    let alice_id = id(&key("alice"));
    assert_eq!(
        w.evaluate(5, &[(alice, forged)]),
        Err(Refusal::BadSignature { key_id: alice_id })
    );
    // The same signature claimed for another operation: the statement no longer verifies, and
    // a statement naming the other operation is for another operation.
    let mut copied = alice;
    copied.operation_id = OperationId::new();
    assert_eq!(
        w.evaluate(5, &[(copied, sig.clone())]),
        Err(Refusal::OtherOperation { key_id: alice_id })
    );
    let mut other_hash = alice;
    other_hash.payload_hash = PayloadHash::from_bytes([8; 32]);
    assert!(matches!(
        w.evaluate(5, &[(other_hash, sig.clone())]),
        Err(Refusal::OtherOperation { .. })
    ));
    let mallory = w.signed(&key("mallory"), Decision::Approve);
    assert_eq!(
        w.evaluate(5, &[mallory]),
        Err(Refusal::RevokedKey {
            key_id: id(&key("mallory"))
        })
    );
    let eve = w.signed(&key("eve"), Decision::Approve);
    assert_eq!(
        w.evaluate(5, &[eve]),
        Err(Refusal::UnknownKey {
            key_id: id(&key("eve"))
        })
    );
    let mut newer = alice;
    newer.policy_version = 4;
    let newer_sig = newer.sign(&key("alice")).expect("sign").to_bytes().to_vec();
    assert_eq!(
        w.evaluate(5, &[(newer, newer_sig)]),
        Err(Refusal::UnknownPolicyVersion { named: 4, held: 3 })
    );
    // A valid approval next to a forged one: still refused.
    let bob = w.signed(&key("bob"), Decision::Approve);
    assert!(w.evaluate(5, &[bob, (alice, vec![0; 64])]).is_err());
}

#[test]
fn a_service_key_counts_only_below_its_automated_limit() {
    let w = world();
    let risk = w.signed(&key("risk"), Decision::Approve);
    assert_eq!(
        w.evaluate(99, std::slice::from_ref(&risk)),
        Ok(Verdict::Met {
            approvers: 1,
            required: 1
        })
    );
    assert_eq!(
        w.evaluate(100, &[risk]),
        Ok(Verdict::Short {
            approvers: 0,
            required: 1
        })
    );
}

#[test]
fn a_verified_rejection_wins() {
    let w = world();
    let alice = w.signed(&key("alice"), Decision::Approve);
    let bob = w.signed(&key("bob"), Decision::Reject);
    assert_eq!(
        w.evaluate(5, &[alice, bob]),
        Ok(Verdict::Rejected {
            key_id: id(&key("bob"))
        })
    );
}

#[test]
fn trust_statements_verify_only_with_a_pinned_key_and_for_their_tenant() {
    let w = world();
    let admin = key("admin");
    let bytes = w.trust.canonical_bytes();
    let sig = w.trust.sign(&admin);
    let pinned = [key("other admin").verifying_key(), admin.verifying_key()];
    assert_eq!(
        TrustStatement::verify_signed(&bytes, &sig, w.tenant, &pinned).as_ref(),
        Ok(&w.trust)
    );
    assert_eq!(
        TrustStatement::verify_signed(&bytes, &sig, w.tenant, &pinned[..1]),
        Err(StatementError::Signature)
    );
    assert!(matches!(
        TrustStatement::verify_signed(&bytes, &sig, TenantId::new(), &pinned),
        Err(StatementError::Inconsistent(_))
    ));
    let mut tampered = bytes.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    assert_eq!(
        TrustStatement::verify_signed(&tampered, &sig, w.tenant, &pinned),
        Err(StatementError::Signature)
    );
}

#[test]
fn trust_statements_refuse_inconsistent_content() {
    let tenant = TenantId::new();
    let alice = RegisteredKey::new(key("alice").verifying_key(), KeyKind::Approver);
    let refused = |parts: TrustParts| TrustStatement::new(tenant, 1, parts).is_err();
    assert!(refused(TrustParts {
        keys: vec![alice, alice],
        ..TrustParts::default()
    }));
    assert!(refused(TrustParts {
        keys: vec![alice],
        revoked: vec![alice.key_id],
        ..TrustParts::default()
    }));
    assert!(refused(TrustParts {
        rules: vec![(eth(), rule(10, 1))],
        ..TrustParts::default()
    }));
    assert!(refused(TrustParts {
        keys: vec![alice],
        automated: vec![AutomatedApprover {
            asset: eth(),
            key_id: alice.key_id,
            below: Amount::new(5),
        }],
        ..TrustParts::default()
    }));
    assert!(TrustStatement::new(tenant, 0, TrustParts::default()).is_err());
    let mut wrong_id = alice;
    wrong_id.key_id = id(&key("bob"));
    assert!(refused(TrustParts {
        keys: vec![wrong_id],
        ..TrustParts::default()
    }));
}

#[test]
fn an_operator_key_never_decides_a_withdrawal() {
    let tenant = TenantId::new();
    let trust = TrustStatement::new(
        tenant,
        1,
        TrustParts {
            keys: vec![
                RegisteredKey::new(key("alice").verifying_key(), KeyKind::Approver),
                RegisteredKey::new(key("erin").verifying_key(), KeyKind::Operator),
            ],
            ..TrustParts::default()
        },
    )
    .expect("trust statement");
    let w = World {
        tenant,
        op: OperationId::new(),
        hash: PayloadHash::from_bytes([7; 32]),
        trust,
    };
    let statement = |signer: &SigningKey, decision| ApprovalStatement {
        policy_version: 1,
        ..w.statement(signer, decision)
    };
    let signed = |signer: &SigningKey, decision| {
        let s = statement(signer, decision);
        let sig = s.sign(signer).expect("sign").to_bytes().to_vec();
        (s, sig)
    };
    let erin = id(&key("erin"));
    let alice = signed(&key("alice"), Decision::Approve);
    for decision in [Decision::Approve, Decision::Reject] {
        let operator = signed(&key("erin"), decision);
        assert_eq!(
            w.evaluate(5, std::slice::from_ref(&operator)),
            Err(Refusal::NotAnApprover { key_id: erin }),
            "{decision:?}"
        );
        // Next to a valid approval, the operator's row still refuses the withdrawal.
        assert_eq!(
            w.evaluate(5, &[alice.clone(), operator]),
            Err(Refusal::NotAnApprover { key_id: erin })
        );
    }
    assert_eq!(
        w.evaluate(5, &[alice]),
        Ok(Verdict::Met {
            approvers: 1,
            required: 1
        })
    );
    // An automated approver must be a SERVICE key, never an operator.
    assert!(
        TrustStatement::new(
            tenant,
            1,
            TrustParts {
                keys: vec![RegisteredKey::new(
                    key("erin").verifying_key(),
                    KeyKind::Operator
                )],
                automated: vec![AutomatedApprover {
                    asset: eth(),
                    key_id: erin,
                    below: Amount::new(5),
                }],
                ..TrustParts::default()
            },
        )
        .is_err()
    );
}
