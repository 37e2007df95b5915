use super::tests::{eth, id, key};
use super::trust::TrustParts;
use super::*;
use crate::amount::Amount;
use crate::ids::TenantId;
use crate::payload::{AccountName, AssetCode};

fn usdc() -> AssetCode {
    AssetCode::parse("USDC").expect("asset")
}

fn account(name: &str) -> AccountName {
    AccountName::parse(name).expect("account")
}

fn credit_rule(min: u128, required: u32) -> CreditRule {
    CreditRule {
        min_amount: Amount::new(min),
        required_operators: required,
    }
}

/// A tenant at trust version 3: operators erin and frank, approver alice, service risk, revoked
/// operator mallory; ETH credits from 1000 on need two operators, USDC has no credit rules.
struct World {
    tenant: TenantId,
    credit_id: [u8; 32],
    account: AccountName,
    trust: TrustStatement,
}

fn world() -> World {
    let tenant = TenantId::new();
    let trust = TrustStatement::new(
        tenant,
        3,
        TrustParts {
            keys: vec![
                RegisteredKey::new(key("erin").verifying_key(), KeyKind::Operator),
                RegisteredKey::new(key("frank").verifying_key(), KeyKind::Operator),
                RegisteredKey::new(key("alice").verifying_key(), KeyKind::Approver),
                RegisteredKey::new(key("risk").verifying_key(), KeyKind::Service),
            ],
            revoked: vec![id(&key("mallory"))],
            credit_rules: vec![(eth(), credit_rule(1000, 2)), (eth(), credit_rule(0, 1))],
            ..TrustParts::default()
        },
    )
    .expect("trust statement");
    World {
        tenant,
        credit_id: [9; 32],
        account: account("treasury"),
        trust,
    }
}

/// A change to a statement before it is signed.
type Edit = fn(&mut CreditStatement);

/// One operator's signature, as the store keeps it.
struct Signed {
    key_id: String,
    policy_version: u64,
    signature: Vec<u8>,
}

impl World {
    fn facts<'a>(&'a self, asset: &'a AssetCode, amount: u128) -> CreditFacts<'a> {
        CreditFacts {
            tenant_id: self.tenant,
            credit_id: &self.credit_id,
            account: &self.account,
            asset,
            amount: Amount::new(amount),
        }
    }

    /// `signer` signs the statement of `asset` and `amount`, changed by `edit` first.
    fn sign_edited(
        &self,
        signer: &SigningKey,
        asset: &AssetCode,
        amount: u128,
        edit: impl FnOnce(&mut CreditStatement),
    ) -> Signed {
        let mut statement = self.facts(asset, amount).statement(id(signer), 3);
        edit(&mut statement);
        Signed {
            key_id: statement.operator_key_id.to_hex(),
            policy_version: statement.policy_version,
            signature: statement.sign(signer).expect("sign").to_bytes().to_vec(),
        }
    }

    fn sign(&self, signer: &SigningKey, asset: &AssetCode, amount: u128) -> Signed {
        self.sign_edited(signer, asset, amount, |_| {})
    }

    fn evaluate(
        &self,
        asset: &AssetCode,
        amount: u128,
        signed: &[&Signed],
    ) -> Result<CreditVerdict, CreditRefusal> {
        let signed: Vec<CreditSignatureFacts<'_>> = signed
            .iter()
            .map(|s| CreditSignatureFacts {
                operator_key_id: &s.key_id,
                policy_version: s.policy_version,
                signature: &s.signature,
            })
            .collect();
        evaluate_credit(&self.trust, &self.facts(asset, amount), &signed)
    }
}

#[test]
fn above_its_threshold_a_credit_needs_two_distinct_operators() {
    let w = world();
    let (erin, frank) = (key("erin"), key("frank"));
    let small = w.sign(&erin, &eth(), 999);
    assert_eq!(
        w.evaluate(&eth(), 999, &[&small]),
        Ok(CreditVerdict::Met {
            operators: vec![id(&erin)]
        })
    );
    let one = w.sign(&erin, &eth(), 1000);
    assert_eq!(
        w.evaluate(&eth(), 1000, &[&one]),
        Ok(CreditVerdict::Pending { have: 1, need: 2 })
    );
    assert_eq!(
        w.evaluate(&eth(), 1000, &[&one, &one]),
        Err(CreditRefusal::DuplicateOperator { key_id: id(&erin) })
    );
    // The same key under another policy version is still the same operator.
    let again = w.sign_edited(&erin, &eth(), 1000, |s| s.policy_version = 2);
    assert_eq!(
        w.evaluate(&eth(), 1000, &[&one, &again]),
        Err(CreditRefusal::DuplicateOperator { key_id: id(&erin) })
    );
    let two = w.sign(&frank, &eth(), 1000);
    let mut both = vec![id(&erin), id(&frank)];
    both.sort();
    assert_eq!(
        w.evaluate(&eth(), 1000, &[&two, &one]),
        Ok(CreditVerdict::Met { operators: both })
    );
    assert_eq!(
        w.evaluate(&eth(), 1000, &[]),
        Ok(CreditVerdict::Pending { have: 0, need: 2 })
    );
    // An asset without credit rules needs one operator, whatever the amount.
    let usdc_credit = w.sign(&frank, &usdc(), u128::MAX);
    assert_eq!(
        w.evaluate(&usdc(), u128::MAX, &[&usdc_credit]),
        Ok(CreditVerdict::Met {
            operators: vec![id(&frank)]
        })
    );
    assert_eq!(w.trust.required_operators(&eth(), Amount::new(999)), 1);
    assert_eq!(w.trust.required_operators(&eth(), Amount::new(1000)), 2);
    assert_eq!(w.trust.required_operators(&usdc(), Amount::new(1000)), 1);
}

#[test]
fn approver_service_revoked_unknown_and_malformed_keys_are_refused() {
    let w = world();
    for (name, kind) in [("alice", KeyKind::Approver), ("risk", KeyKind::Service)] {
        let signed = w.sign(&key(name), &eth(), 5);
        assert_eq!(
            w.evaluate(&eth(), 5, &[&signed]),
            Err(CreditRefusal::NotAnOperator {
                key_id: id(&key(name)),
                kind
            }),
            "{name}"
        );
    }
    let mallory = w.sign(&key("mallory"), &eth(), 5);
    assert_eq!(
        w.evaluate(&eth(), 5, &[&mallory]),
        Err(CreditRefusal::RevokedKey {
            key_id: id(&key("mallory"))
        })
    );
    let eve = w.sign(&key("eve"), &eth(), 5);
    assert_eq!(
        w.evaluate(&eth(), 5, &[&eve]),
        Err(CreditRefusal::UnknownKey {
            key_id: id(&key("eve"))
        })
    );
    let mut upper = w.sign(&key("erin"), &eth(), 5);
    upper.key_id = upper.key_id.to_uppercase();
    assert_eq!(
        w.evaluate(&eth(), 5, &[&upper]),
        Err(CreditRefusal::MalformedKeyId)
    );
    // A valid signature next to a refused one: the credit is refused.
    let erin = w.sign(&key("erin"), &eth(), 5);
    assert!(w.evaluate(&eth(), 5, &[&erin, &eve]).is_err());
}

#[test]
fn a_signature_over_any_other_field_is_refused() {
    let w = world();
    let erin = key("erin");
    let bad = CreditRefusal::BadSignature { key_id: id(&erin) };
    let edits: [(&str, Edit); 5] = [
        ("amount", |s| s.amount = Amount::new(6)),
        ("account", |s| s.account = account("attacker")),
        ("credit id", |s| s.credit_id[31] ^= 1),
        ("asset", |s| s.asset = usdc()),
        ("tenant", |s| s.tenant_id = TenantId::new()),
    ];
    for (what, edit) in edits {
        let signed = w.sign_edited(&erin, &eth(), 5, edit);
        assert_eq!(w.evaluate(&eth(), 5, &[&signed]), Err(bad), "{what}");
    }
    let mut forged = w.sign(&erin, &eth(), 5);
    forged.signature[0] ^= 1;
    assert_eq!(w.evaluate(&eth(), 5, &[&forged]), Err(bad));
    forged.signature.truncate(63);
    assert_eq!(w.evaluate(&eth(), 5, &[&forged]), Err(bad));
    // The signature names version 3 but is claimed for version 2.
    let mut relabelled = w.sign(&erin, &eth(), 5);
    relabelled.policy_version = 2;
    assert_eq!(w.evaluate(&eth(), 5, &[&relabelled]), Err(bad));
}

#[test]
fn policy_versions_from_one_to_the_newest_held_are_accepted() {
    let w = world();
    let erin = key("erin");
    let older = w.sign_edited(&erin, &eth(), 5, |s| s.policy_version = 1);
    assert!(matches!(
        w.evaluate(&eth(), 5, &[&older]),
        Ok(CreditVerdict::Met { .. })
    ));
    let newer = w.sign_edited(&erin, &eth(), 5, |s| s.policy_version = 4);
    assert_eq!(
        w.evaluate(&eth(), 5, &[&newer]),
        Err(CreditRefusal::UnknownPolicyVersion { named: 4, held: 3 })
    );
    let mut zero = w.sign(&erin, &eth(), 5);
    zero.policy_version = 0;
    assert_eq!(
        w.evaluate(&eth(), 5, &[&zero]),
        Err(CreditRefusal::UnknownPolicyVersion { named: 0, held: 3 })
    );
}

#[test]
fn a_zero_credit_and_another_tenants_trust_statement_are_refused() {
    let w = world();
    assert_eq!(w.evaluate(&eth(), 0, &[]), Err(CreditRefusal::ZeroAmount));
    let other = World {
        tenant: TenantId::new(),
        ..world()
    };
    let signed = other.sign(&key("erin"), &eth(), 5);
    let asset = eth();
    let facts = other.facts(&asset, 5);
    let signed = [CreditSignatureFacts {
        operator_key_id: &signed.key_id,
        policy_version: signed.policy_version,
        signature: &signed.signature,
    }];
    assert_eq!(
        evaluate_credit(&w.trust, &facts, &signed),
        Err(CreditRefusal::OtherTenant)
    );
}

#[test]
fn reason_codes_are_distinct_and_screaming_snake() {
    let key_id = id(&key("erin"));
    let all = [
        CreditRefusal::OtherTenant,
        CreditRefusal::ZeroAmount,
        CreditRefusal::MalformedKeyId,
        CreditRefusal::UnknownKey { key_id },
        CreditRefusal::RevokedKey { key_id },
        CreditRefusal::NotAnOperator {
            key_id,
            kind: KeyKind::Approver,
        },
        CreditRefusal::UnknownPolicyVersion { named: 4, held: 3 },
        CreditRefusal::BadSignature { key_id },
        CreditRefusal::DuplicateOperator { key_id },
    ];
    let codes: std::collections::BTreeSet<&str> = all.iter().map(|r| r.reason_code()).collect();
    assert_eq!(codes.len(), all.len());
    for code in codes {
        assert!(code.starts_with("CREDIT_"), "{code}");
        assert!(
            code.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "{code}"
        );
    }
}

fn statement() -> CreditStatement {
    let w = world();
    w.facts(&eth(), 1_000_000).statement(id(&key("erin")), 3)
}

/// A credit statement from raw fields.
fn raw(fields: &[(u8, &[u8])]) -> Vec<u8> {
    let mut out = CREDIT_DOMAIN_V1.as_bytes().to_vec();
    out.push(0);
    for (tag, value) in fields {
        out.push(*tag);
        out.extend_from_slice(&u32::try_from(value.len()).expect("len").to_be_bytes());
        out.extend_from_slice(value);
    }
    out
}

#[test]
fn credit_statements_round_trip_sign_and_verify() {
    let s = statement();
    let bytes = s.encode();
    assert_eq!(bytes, s.canonical_bytes());
    assert_eq!(CreditStatement::decode(&bytes), Ok(s.clone()));
    let erin = key("erin");
    let sig = s.sign(&erin).expect("sign");
    assert_eq!(s.verify(&erin.verifying_key(), &sig.to_bytes()), Ok(()));
    assert_eq!(
        s.verify(&erin.verifying_key(), &sig.to_bytes()[..63]),
        Err(StatementError::Signature)
    );
    let mut other = s.clone();
    other.amount = Amount::new(1);
    assert_eq!(
        other.verify(&erin.verifying_key(), &sig.to_bytes()),
        Err(StatementError::Signature)
    );
    assert!(
        s.sign(&key("frank")).is_err(),
        "a key may only sign statements naming it"
    );
    assert!(
        s.verify(&key("frank").verifying_key(), &sig.to_bytes())
            .is_err()
    );
    let zero = CreditStatement {
        amount: Amount::ZERO,
        ..s.clone()
    };
    assert_eq!(zero.sign(&erin), Err(StatementError::Field("amount")));
    let unversioned = CreditStatement {
        policy_version: 0,
        ..s
    };
    assert_eq!(
        unversioned.sign(&erin),
        Err(StatementError::Field("policy_version"))
    );
}

#[test]
fn the_credit_statement_decoder_refuses_anything_not_canonical() {
    let s = statement();
    let bytes = s.canonical_bytes();
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert_eq!(
        CreditStatement::decode(&trailing),
        Err(StatementError::Malformed)
    );
    assert_eq!(
        CreditStatement::decode(&bytes[..bytes.len() - 1]),
        Err(StatementError::Malformed)
    );
    let mut other_domain = bytes.clone();
    other_domain[0] ^= 1;
    assert_eq!(
        CreditStatement::decode(&other_domain),
        Err(StatementError::Domain)
    );
    let mut approval_domain = bytes.clone();
    approval_domain.splice(
        ..CREDIT_DOMAIN_V1.len(),
        statement::APPROVAL_DOMAIN_V1.bytes(),
    );
    assert_eq!(
        CreditStatement::decode(&approval_domain),
        Err(StatementError::Domain)
    );

    let tenant = s.tenant_id.to_string();
    let key_id = s.operator_key_id.to_hex();
    let good: [(u8, Vec<u8>); 7] = [
        (1, tenant.clone().into_bytes()),
        (2, s.credit_id.to_vec()),
        (3, b"treasury".to_vec()),
        (4, b"ETH".to_vec()),
        (5, b"1000000".to_vec()),
        (6, key_id.clone().into_bytes()),
        (7, b"3".to_vec()),
    ];
    let build = |fields: &[(u8, Vec<u8>)]| {
        let refs: Vec<(u8, &[u8])> = fields.iter().map(|(t, v)| (*t, v.as_slice())).collect();
        raw(&refs)
    };
    assert_eq!(
        build(&good),
        bytes,
        "the raw builder writes the canonical bytes"
    );
    let with = |tag: u8, value: &[u8]| {
        let mut fields = good.clone();
        fields[usize::from(tag) - 1].1 = value.to_vec();
        CreditStatement::decode(&build(&fields))
    };
    let refused = [
        (1, tenant.to_uppercase().into_bytes(), "tenant_id"),
        (1, tenant.replace('-', "").into_bytes(), "tenant_id"),
        (2, vec![9; 31], "credit_id"),
        (2, vec![9; 33], "credit_id"),
        (3, b"Treasury".to_vec(), "account"),
        (3, b"".to_vec(), "account"),
        (3, vec![0xff], "account"),
        (4, b"eth".to_vec(), "asset"),
        (4, b"A234567890ABCDEFG".to_vec(), "asset"),
        (5, b"0".to_vec(), "amount"),
        (5, b"01".to_vec(), "amount"),
        (5, b"+1".to_vec(), "amount"),
        (
            5,
            b"340282366920938463463374607431768211456".to_vec(),
            "amount",
        ),
        (6, key_id.to_uppercase().into_bytes(), "key id"),
        (6, key_id.as_bytes()[..30].to_vec(), "key id"),
        (7, b"0".to_vec(), "policy_version"),
        (7, b"18446744073709551616".to_vec(), "policy_version"),
        (7, b"03".to_vec(), "policy_version"),
    ];
    for (tag, value, field) in refused {
        assert_eq!(
            with(tag, &value),
            Err(StatementError::Field(field)),
            "{field} {value:?}"
        );
    }
    assert!(with(5, b"340282366920938463463374607431768211455").is_ok());
    assert!(with(7, b"18446744073709551615").is_ok());

    // A missing field, two fields swapped, a field repeated, an unknown field.
    for at in 0..good.len() {
        let mut missing = good.to_vec();
        missing.remove(at);
        assert!(CreditStatement::decode(&build(&missing)).is_err(), "{at}");
    }
    let mut swapped = good.to_vec();
    swapped.swap(2, 3);
    assert_eq!(
        CreditStatement::decode(&build(&swapped)),
        Err(StatementError::Field("account"))
    );
    let mut repeated = good.to_vec();
    repeated.push(good[6].clone());
    assert_eq!(
        CreditStatement::decode(&build(&repeated)),
        Err(StatementError::Malformed)
    );
    let mut unknown = good.to_vec();
    unknown.push((8, b"x".to_vec()));
    assert_eq!(
        CreditStatement::decode(&build(&unknown)),
        Err(StatementError::Malformed)
    );
    // A length beyond the end.
    let mut long = bytes.clone();
    let len_at = CREDIT_DOMAIN_V1.len() + 2;
    long[len_at..len_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        CreditStatement::decode(&long),
        Err(StatementError::Malformed)
    );
}

#[test]
fn trust_statements_carry_operator_keys_and_credit_rules() {
    let w = world();
    let bytes = w.trust.canonical_bytes();
    let decoded = TrustStatement::decode(&bytes).expect("canonical");
    assert_eq!(decoded, w.trust);
    assert_eq!(
        decoded.key(&id(&key("erin"))).map(|k| k.kind),
        Some(KeyKind::Operator)
    );
    let rules: Vec<(&str, CreditRule)> = decoded.credit_rules().collect();
    assert_eq!(
        rules,
        vec![("ETH", credit_rule(0, 1)), ("ETH", credit_rule(1000, 2))]
    );

    // Two credit-rule records swapped decode field by field but are not canonical.
    let field8 = TrustStatement::new(
        w.tenant,
        1,
        TrustParts {
            credit_rules: vec![(eth(), credit_rule(0, 1)), (eth(), credit_rule(7, 2))],
            ..TrustParts::default()
        },
    )
    .expect("valid")
    .canonical_bytes();
    let record = |min: &[u8], required: &[u8]| {
        let mut r = Vec::new();
        for (tag, value) in [(1_u8, b"ETH".as_slice()), (2, min), (3, required)] {
            r.push(tag);
            r.extend_from_slice(&u32::try_from(value.len()).expect("len").to_be_bytes());
            r.extend_from_slice(value);
        }
        let mut f = vec![8];
        f.extend_from_slice(&u32::try_from(r.len()).expect("len").to_be_bytes());
        f.extend_from_slice(&r);
        f
    };
    let (first, second) = (record(b"0", b"1"), record(b"7", b"2"));
    let head_len = field8.len() - first.len() - second.len();
    assert_eq!(
        &field8[head_len..],
        [first.clone(), second.clone()].concat()
    );
    let swapped = [&field8[..head_len], &second, &first].concat();
    assert!(TrustStatement::decode(&swapped).is_err());
    let unknown_field = [field8.as_slice(), &[9, 0, 0, 0, 0]].concat();
    assert_eq!(
        TrustStatement::decode(&unknown_field),
        Err(StatementError::Malformed)
    );
    let eleven = [&field8[..head_len], &record(b"0", b"11")].concat();
    assert!(TrustStatement::decode(&eleven).is_err());

    // A statement without credit rules has no field 8.
    let plain = TrustStatement::new(w.tenant, 1, TrustParts::default()).expect("valid");
    assert!(!plain.canonical_bytes().contains(&8));
}

#[test]
fn inconsistent_credit_rules_are_refused() {
    let tenant = TenantId::new();
    let refused = |credit_rules: Vec<(AssetCode, CreditRule)>| {
        TrustStatement::new(
            tenant,
            1,
            TrustParts {
                credit_rules,
                ..TrustParts::default()
            },
        )
        .err()
    };
    assert!(matches!(
        refused(vec![(eth(), credit_rule(10, 1))]),
        Some(StatementError::Inconsistent(_))
    ));
    assert_eq!(
        refused(vec![(eth(), credit_rule(0, 1)), (eth(), credit_rule(0, 2))]),
        Some(StatementError::Order("credit_rules"))
    );
    for required in [0, 11] {
        assert!(matches!(
            refused(vec![(eth(), credit_rule(0, required))]),
            Some(StatementError::Inconsistent(_))
        ));
    }
    // Each asset needs its own base rule.
    assert!(
        refused(vec![
            (eth(), credit_rule(0, 1)),
            (usdc(), credit_rule(5, 2))
        ])
        .is_some()
    );
    assert_eq!(
        refused(vec![
            (eth(), credit_rule(0, 10)),
            (usdc(), credit_rule(0, 1))
        ]),
        None
    );
}
