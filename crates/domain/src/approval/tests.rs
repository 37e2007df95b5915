use super::trust::TrustParts;
use super::*;
use crate::amount::Amount;
use crate::ids::{OperationId, TenantId};
use crate::payload::{AssetCode, PayloadHash};
use crate::policy::ApprovalRule;
use crate::risk::{RiskFlag, RiskFlags};

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
    flags: RiskFlags,
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
        flags: RiskFlags::EMPTY,
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
            acknowledged: RiskFlags::EMPTY,
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
            risk_flags: self.flags,
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
            required: 2,
            unacknowledged: 0
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
            required: 1,
            unacknowledged: 0
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
        flags: RiskFlags::EMPTY,
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

#[test]
fn a_flagged_withdrawal_counts_only_approvals_that_acknowledge_every_flag_in_the_signed_bytes() {
    let flagged: RiskFlags = [RiskFlag::SameDestinationAndAmount].into_iter().collect();
    let w = World {
        flags: flagged,
        ..world()
    };
    let acknowledging = |signer: &SigningKey| {
        let s = ApprovalStatement {
            acknowledged: flagged,
            ..w.statement(signer, Decision::Approve)
        };
        let sig = s.sign(signer).expect("sign").to_bytes().to_vec();
        (s, sig)
    };
    // Signed without the acknowledgement: verified, but it does not count.
    let silent = w.signed(&key("alice"), Decision::Approve);
    assert_eq!(
        w.evaluate(5, std::slice::from_ref(&silent)),
        Ok(Verdict::Short {
            approvers: 0,
            required: 1,
            unacknowledged: 1
        })
    );
    let alice = acknowledging(&key("alice"));
    assert_eq!(
        w.evaluate(5, std::slice::from_ref(&alice)),
        Ok(Verdict::Met {
            approvers: 1,
            required: 1
        })
    );
    // Two approvers needed, one acknowledged: short, the other named as unacknowledged.
    let bob_silent = w.signed(&key("bob"), Decision::Approve);
    assert_eq!(
        w.evaluate(1000, &[alice.clone(), bob_silent.clone()]),
        Ok(Verdict::Short {
            approvers: 1,
            required: 2,
            unacknowledged: 1
        })
    );
    // A server that adds the acknowledgement to a stored row the approver signed without it
    // breaks the signature: refused, never counted.
    let (mut forged, sig) = bob_silent;
    forged.acknowledged = flagged;
    let bob = key("bob");
    assert_eq!(
        w.evaluate(1000, &[alice.clone(), (forged, sig)]),
        Err(Refusal::BadSignature { key_id: id(&bob) })
    );
    assert_eq!(
        w.evaluate(1000, &[alice, acknowledging(&bob)]),
        Ok(Verdict::Met {
            approvers: 2,
            required: 2
        })
    );
    // A rejection needs no acknowledgement.
    let bob_reject = w.signed(&key("bob"), Decision::Reject);
    assert_eq!(
        w.evaluate(5, &[bob_reject]),
        Ok(Verdict::Rejected { key_id: id(&bob) })
    );
}

#[test]
fn acknowledgements_are_canonical_field_7_items_and_absent_when_empty() {
    let w = world();
    let plain = w.statement(&key("alice"), Decision::Approve);
    let flagged = ApprovalStatement {
        acknowledged: [RiskFlag::SameDestinationAndAmount].into_iter().collect(),
        ..plain
    };
    let bytes = flagged.canonical_bytes();
    assert_eq!(ApprovalStatement::decode(&bytes), Ok(flagged));
    // Field 7 is appended after field 6; without flags the bytes are the old encoding.
    let item = {
        let name = RiskFlag::SameDestinationAndAmount.as_str().as_bytes();
        let mut item = vec![7u8];
        item.extend_from_slice(&u32::try_from(name.len()).expect("len").to_be_bytes());
        item.extend_from_slice(name);
        item
    };
    assert_eq!(bytes, [plain.canonical_bytes(), item.clone()].concat());
    // The same flag twice, or an unknown name, is refused.
    let twice = [bytes.clone(), item].concat();
    assert_eq!(
        ApprovalStatement::decode(&twice),
        Err(StatementError::Order("acknowledged"))
    );
    let unknown = [
        plain.canonical_bytes(),
        vec![7, 0, 0, 0, 3],
        b"NEW".to_vec(),
    ]
    .concat();
    assert_eq!(
        ApprovalStatement::decode(&unknown),
        Err(StatementError::Field("acknowledged"))
    );
}

#[test]
fn a_kyt_providers_key_never_decides_a_withdrawal() {
    let tenant = TenantId::new();
    let trust = TrustStatement::new(
        tenant,
        1,
        TrustParts {
            keys: vec![
                RegisteredKey::new(key("alice").verifying_key(), KeyKind::Approver),
                RegisteredKey::new(key("screener").verifying_key(), KeyKind::Kyt),
            ],
            ..TrustParts::default()
        },
    )
    .expect("trust statement");
    // The kind round-trips through the signed bytes.
    assert_eq!(
        TrustStatement::decode(&trust.canonical_bytes()),
        Ok(trust.clone())
    );
    let w = World {
        tenant,
        op: OperationId::new(),
        hash: PayloadHash::from_bytes([7; 32]),
        trust,
        flags: RiskFlags::EMPTY,
    };
    let screener = key("screener");
    let statement = ApprovalStatement {
        policy_version: 1,
        ..w.statement(&screener, Decision::Approve)
    };
    let sig = statement.sign(&screener).expect("sign").to_bytes().to_vec();
    assert_eq!(
        w.evaluate(5, &[(statement, sig)]),
        Err(Refusal::NotAnApprover {
            key_id: id(&screener)
        })
    );
}
