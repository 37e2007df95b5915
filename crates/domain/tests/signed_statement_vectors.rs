//! Checks the Rust signed-statement encodings, key ids and Ed25519 signatures against vectors
//! written by the independent Python implementation in `testdata/signed_statements_v1.py`.

use opledger_domain::approval::trust::{TRUST_DOMAIN_V1, TrustParts};
use opledger_domain::approval::{
    ApprovalStatement, AutomatedApprover, CREDIT_DOMAIN_V1, CreditFacts, CreditRule,
    CreditSignatureFacts, CreditStatement, CreditVerdict, Decision, KEY_ID_DOMAIN_V1, KeyId,
    KeyKind, RegisteredKey, SigningKey, TrustStatement, evaluate_credit, signature,
    statement::APPROVAL_DOMAIN_V1, verify, verifying_key,
};
use opledger_domain::policy::ApprovalRule;
use opledger_domain::{
    AccountName, Amount, AssetCode, IdempotencyKey, OperationId, PayloadHash, RiskFlag, TenantId,
};
use serde::Deserialize;
use std::collections::HashMap;

const VECTORS_JSON: &str = include_str!("../testdata/signed_statements_v1.json");

#[derive(Deserialize)]
struct File {
    version: u32,
    approval_domain: String,
    trust_domain: String,
    key_id_domain: String,
    keys: Vec<Key>,
    approvals: Vec<Signed<JsonApproval>>,
    trust: Vec<Signed<JsonTrust>>,
    credit_domain: String,
    credits: Vec<Signed<JsonCredit>>,
    credit_evaluations: Vec<JsonEvaluation>,
}

#[derive(Deserialize)]
struct Key {
    name: String,
    seed_hex: String,
    public_key_hex: String,
    key_id: String,
}

#[derive(Deserialize)]
struct Signed<T> {
    name: String,
    signer: String,
    statement: T,
    canonical_hex: String,
    signature_hex: String,
    /// For a credit statement whose credit id is an idempotency key's digest.
    #[serde(default)]
    idempotency_key: Option<String>,
}

#[derive(Deserialize)]
struct JsonApproval {
    tenant_id: String,
    operation_id: String,
    payload_hash_hex: String,
    decision: String,
    approver_key_id: String,
    policy_version: u64,
    #[serde(default)]
    acknowledged: Vec<String>,
}

#[derive(Deserialize)]
struct JsonTrust {
    tenant_id: String,
    version: u64,
    keys: Vec<JsonKey>,
    revoked: Vec<String>,
    rules: Vec<JsonRule>,
    automated: Vec<JsonAutomated>,
    kyt_required: Vec<String>,
    /// Absent from the vectors written before field 8 existed.
    #[serde(default)]
    credit_rules: Vec<JsonCreditRule>,
}

#[derive(Deserialize)]
struct JsonCreditRule {
    asset: String,
    min_amount: String,
    required_operators: u32,
}

#[derive(Deserialize)]
struct JsonCredit {
    tenant_id: String,
    credit_id_hex: String,
    account: String,
    asset: String,
    amount: String,
    operator_key_id: String,
    policy_version: u64,
}

/// A credit's fields, without the signer's.
#[derive(Deserialize)]
struct JsonCreditFields {
    tenant_id: String,
    credit_id_hex: String,
    account: String,
    asset: String,
    amount: String,
}

#[derive(Deserialize)]
struct JsonCreditSignature {
    operator_key_id: String,
    policy_version: u64,
    signature_hex: String,
}

#[derive(Deserialize)]
struct JsonEvaluation {
    name: String,
    trust: String,
    credit: JsonCreditFields,
    signatures: Vec<JsonCreditSignature>,
    expected: JsonExpected,
}

#[derive(Deserialize)]
#[serde(tag = "verdict", rename_all = "SCREAMING_SNAKE_CASE")]
enum JsonExpected {
    Met { operators: Vec<String> },
    Pending { have: u32, need: u32 },
    Refused { reason: String },
}

#[derive(Deserialize)]
struct JsonKey {
    key_id: String,
    public_key_hex: String,
    kind: String,
}

#[derive(Deserialize)]
struct JsonRule {
    asset: String,
    min_amount: String,
    required_approvals: u32,
}

#[derive(Deserialize)]
struct JsonAutomated {
    asset: String,
    key_id: String,
    below: String,
}

fn file() -> File {
    serde_json::from_str(VECTORS_JSON).expect("vectors parse")
}

fn hex_bytes(text: &str) -> Vec<u8> {
    hex::decode(text).expect("hex")
}

fn asset(text: &str) -> AssetCode {
    AssetCode::parse(text).expect("asset")
}

fn trust_parts(t: &JsonTrust) -> TrustParts {
    TrustParts {
        keys: t
            .keys
            .iter()
            .map(|k| RegisteredKey {
                key_id: KeyId::parse(&k.key_id).expect("key id"),
                public_key: verifying_key(&hex_bytes(&k.public_key_hex)).expect("public key"),
                kind: KeyKind::parse(&k.kind).expect("kind"),
            })
            .collect(),
        revoked: t
            .revoked
            .iter()
            .map(|id| KeyId::parse(id).expect("revoked"))
            .collect(),
        rules: t
            .rules
            .iter()
            .map(|r| {
                (
                    asset(&r.asset),
                    ApprovalRule {
                        min_amount: Amount::parse(&r.min_amount).expect("min amount"),
                        required_approvals: r.required_approvals,
                    },
                )
            })
            .collect(),
        automated: t
            .automated
            .iter()
            .map(|a| AutomatedApprover {
                asset: asset(&a.asset),
                key_id: KeyId::parse(&a.key_id).expect("key id"),
                below: Amount::parse(&a.below).expect("below"),
            })
            .collect(),
        kyt_required: t.kyt_required.iter().map(|a| asset(a)).collect(),
        credit_rules: t
            .credit_rules
            .iter()
            .map(|r| {
                (
                    asset(&r.asset),
                    CreditRule {
                        min_amount: Amount::parse(&r.min_amount).expect("min amount"),
                        required_operators: r.required_operators,
                    },
                )
            })
            .collect(),
    }
}

fn credit_id(text: &str) -> [u8; 32] {
    hex_bytes(text).try_into().expect("credit id")
}

fn account(text: &str) -> AccountName {
    AccountName::parse(text).expect("account")
}

fn seed_key(keys: &HashMap<&str, &Key>, name: &str) -> SigningKey {
    let seed: [u8; 32] = hex_bytes(&keys[name].seed_hex).try_into().expect("seed");
    SigningKey::from_bytes(&seed)
}

#[test]
fn the_vectors_are_for_these_domains() {
    let f = file();
    assert_eq!(f.version, 1);
    assert_eq!(f.approval_domain, APPROVAL_DOMAIN_V1);
    assert_eq!(f.trust_domain, TRUST_DOMAIN_V1);
    assert_eq!(f.key_id_domain, KEY_ID_DOMAIN_V1);
    assert_eq!(f.credit_domain, CREDIT_DOMAIN_V1);
    assert!(f.approvals.len() >= 5 && f.trust.len() >= 5 && f.keys.len() >= 5);
    // Field 7 of approvals and the KYT key kind are exercised.
    assert!(
        f.approvals
            .iter()
            .any(|a| !a.statement.acknowledged.is_empty())
    );
    assert!(
        f.trust
            .iter()
            .any(|t| t.statement.keys.iter().any(|k| k.kind == "KYT"))
    );
    assert!(f.credits.len() >= 5 && f.credit_evaluations.len() >= 20);
}

#[test]
fn key_ids_and_public_keys_match_the_python_implementation() {
    for k in file().keys {
        let seed: [u8; 32] = hex_bytes(&k.seed_hex).try_into().expect("seed");
        let public = SigningKey::from_bytes(&seed).verifying_key();
        assert_eq!(
            hex::encode(public.as_bytes()),
            k.public_key_hex,
            "{}",
            k.name
        );
        assert_eq!(KeyId::of(&public).to_hex(), k.key_id, "{}", k.name);
    }
}

#[test]
fn approval_statements_encode_decode_and_sign_as_the_python_implementation() {
    let f = file();
    let keys: HashMap<&str, &Key> = f.keys.iter().map(|k| (k.name.as_str(), k)).collect();
    for v in &f.approvals {
        let s = &v.statement;
        let statement = ApprovalStatement {
            tenant_id: s.tenant_id.parse::<TenantId>().expect("tenant"),
            operation_id: s.operation_id.parse::<OperationId>().expect("operation"),
            payload_hash: PayloadHash::from_hex(&s.payload_hash_hex).expect("hash"),
            decision: Decision::parse(&s.decision).expect("decision"),
            approver_key_id: KeyId::parse(&s.approver_key_id).expect("key id"),
            policy_version: s.policy_version,
            acknowledged: s
                .acknowledged
                .iter()
                .map(|f| RiskFlag::parse(f).expect("flag"))
                .collect(),
        };
        let canonical = hex_bytes(&v.canonical_hex);
        assert_eq!(statement.canonical_bytes(), canonical, "{}", v.name);
        assert_eq!(
            ApprovalStatement::decode(&canonical),
            Ok(statement),
            "{}",
            v.name
        );
        let signer = keys[v.signer.as_str()];
        let seed: [u8; 32] = hex_bytes(&signer.seed_hex).try_into().expect("seed");
        let key = SigningKey::from_bytes(&seed);
        // Ed25519 is deterministic: the same key and bytes give the same signature.
        assert_eq!(
            hex::encode(statement.sign(&key).expect("sign").to_bytes()),
            v.signature_hex,
            "{}",
            v.name
        );
        let sig = signature(&hex_bytes(&v.signature_hex)).expect("signature");
        assert!(
            verify(&key.verifying_key(), &canonical, &sig).is_ok(),
            "{}",
            v.name
        );
    }
}

#[test]
fn trust_statements_encode_decode_and_verify_as_the_python_implementation() {
    let f = file();
    let keys: HashMap<&str, &Key> = f.keys.iter().map(|k| (k.name.as_str(), k)).collect();
    for v in &f.trust {
        let tenant: TenantId = v.statement.tenant_id.parse().expect("tenant");
        let statement = TrustStatement::new(tenant, v.statement.version, trust_parts(&v.statement))
            .expect("the vector's statement is valid");
        let canonical = hex_bytes(&v.canonical_hex);
        assert_eq!(
            hex::encode(statement.canonical_bytes()),
            v.canonical_hex,
            "{}",
            v.name
        );
        assert_eq!(
            TrustStatement::decode(&canonical).as_ref(),
            Ok(&statement),
            "{}",
            v.name
        );
        let admin = keys[v.signer.as_str()];
        let seed: [u8; 32] = hex_bytes(&admin.seed_hex).try_into().expect("seed");
        let admin = SigningKey::from_bytes(&seed);
        assert_eq!(
            hex::encode(statement.sign(&admin).to_bytes()),
            v.signature_hex,
            "{}",
            v.name
        );
        let sig = signature(&hex_bytes(&v.signature_hex)).expect("signature");
        let verified =
            TrustStatement::verify_signed(&canonical, &sig, tenant, &[admin.verifying_key()]);
        assert_eq!(verified.as_ref(), Ok(&statement), "{}", v.name);
    }
}

#[test]
fn trust_statement_bytes_out_of_canonical_order_are_refused() {
    // Swapping two consecutive repeated items of a canonical encoding gives bytes that decode
    // field by field but are not canonical.
    let f = file();
    let full = f
        .trust
        .iter()
        .find(|v| v.name == "full")
        .expect("full vector");
    let canonical = hex_bytes(&full.canonical_hex);
    let statement = TrustStatement::decode(&canonical).expect("decodes");
    let mut parts = Vec::new();
    let mut rest = &canonical[TRUST_DOMAIN_V1.len() + 1..];
    while let Some((&tag, tail)) = rest.split_first() {
        let len = u32::from_be_bytes(tail[..4].try_into().expect("len")) as usize;
        parts.push((tag, &rest[..5 + len]));
        rest = &tail[4 + len..];
    }
    let first_rule = parts.iter().position(|(t, _)| *t == 5).expect("rules");
    assert_eq!(parts[first_rule + 1].0, 5, "the full vector has two rules");
    parts.swap(first_rule, first_rule + 1);
    let mut swapped = canonical[..TRUST_DOMAIN_V1.len() + 1].to_vec();
    for (_, bytes) in &parts {
        swapped.extend_from_slice(bytes);
    }
    assert_ne!(swapped, canonical);
    assert!(TrustStatement::decode(&swapped).is_err());
    assert_eq!(statement.canonical_bytes(), canonical);
}

#[test]
fn credit_statements_encode_decode_and_sign_as_the_python_implementation() {
    let f = file();
    let keys: HashMap<&str, &Key> = f.keys.iter().map(|k| (k.name.as_str(), k)).collect();
    for v in &f.credits {
        let s = &v.statement;
        let statement = CreditStatement {
            tenant_id: s.tenant_id.parse::<TenantId>().expect("tenant"),
            credit_id: credit_id(&s.credit_id_hex),
            account: account(&s.account),
            asset: asset(&s.asset),
            amount: Amount::parse(&s.amount).expect("amount"),
            operator_key_id: KeyId::parse(&s.operator_key_id).expect("key id"),
            policy_version: s.policy_version,
        };
        if let Some(key) = &v.idempotency_key {
            let digest = IdempotencyKey::parse(key)
                .expect("idempotency key")
                .digest();
            assert_eq!(statement.credit_id, digest, "{}", v.name);
        }
        let canonical = hex_bytes(&v.canonical_hex);
        assert_eq!(
            hex::encode(statement.encode()),
            v.canonical_hex,
            "{}",
            v.name
        );
        assert_eq!(
            CreditStatement::decode(&canonical).as_ref(),
            Ok(&statement),
            "{}",
            v.name
        );
        let key = seed_key(&keys, &v.signer);
        assert_eq!(
            hex::encode(statement.sign(&key).expect("sign").to_bytes()),
            v.signature_hex,
            "{}",
            v.name
        );
        let sig = hex_bytes(&v.signature_hex);
        assert_eq!(
            statement.verify(&key.verifying_key(), &sig),
            Ok(()),
            "{}",
            v.name
        );
    }
}

#[test]
fn credit_evaluations_agree_with_the_python_implementation() {
    let f = file();
    let keys: HashMap<&str, &Key> = f.keys.iter().map(|k| (k.name.as_str(), k)).collect();
    let admin = seed_key(&keys, "admin");
    for e in &f.credit_evaluations {
        let vector = f
            .trust
            .iter()
            .find(|t| t.name == e.trust)
            .expect("the evaluation's trust statement");
        let tenant: TenantId = vector.statement.tenant_id.parse().expect("tenant");
        let sig = signature(&hex_bytes(&vector.signature_hex)).expect("signature");
        let trust = TrustStatement::verify_signed(
            &hex_bytes(&vector.canonical_hex),
            &sig,
            tenant,
            &[admin.verifying_key()],
        )
        .expect("the trust statement verifies");
        let c = &e.credit;
        let (id, account, asset) = (
            credit_id(&c.credit_id_hex),
            account(&c.account),
            asset(&c.asset),
        );
        let facts = CreditFacts {
            tenant_id: c.tenant_id.parse().expect("tenant"),
            credit_id: &id,
            account: &account,
            asset: &asset,
            amount: Amount::parse(&c.amount).expect("amount"),
        };
        let signatures: Vec<Vec<u8>> = e
            .signatures
            .iter()
            .map(|s| hex_bytes(&s.signature_hex))
            .collect();
        let signed: Vec<CreditSignatureFacts<'_>> = e
            .signatures
            .iter()
            .zip(&signatures)
            .map(|(s, signature)| CreditSignatureFacts {
                operator_key_id: &s.operator_key_id,
                policy_version: s.policy_version,
                signature,
            })
            .collect();
        let verdict = evaluate_credit(&trust, &facts, &signed);
        match &e.expected {
            JsonExpected::Met { operators } => {
                let Ok(CreditVerdict::Met { operators: got }) = &verdict else {
                    panic!("{}: expected MET, got {verdict:?}", e.name);
                };
                let got: Vec<String> = got.iter().map(KeyId::to_hex).collect();
                assert_eq!(&got, operators, "{}", e.name);
            }
            JsonExpected::Pending { have, need } => assert_eq!(
                verdict,
                Ok(CreditVerdict::Pending {
                    have: *have,
                    need: *need
                }),
                "{}",
                e.name
            ),
            JsonExpected::Refused { reason } => assert_eq!(
                verdict.map_err(|r| r.reason_code()),
                Err(reason.as_str()),
                "{}",
                e.name
            ),
        }
    }
}
