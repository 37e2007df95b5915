use super::*;
use opledger_domain::approval::SigningKey;

const TENANT: &str = "0190c4c8-0000-7c6e-8f90-123456789abc";
const KEY: &str = "credit-9b2f6c1e-0d7a-4e58-b3c9-5a1f2e3d4c5b";

fn tenant() -> TenantId {
    TENANT.parse().expect("uuid")
}

fn asked() -> CreditId {
    CreditId::of_key(&IdempotencyKey::parse(KEY).expect("key"))
}

fn operator() -> SigningKey {
    SigningKey::from_bytes(&[9; 32])
}

/// The operations service's answer for credit `id` showing these fields.
fn answer(id: &str, account: &str, asset: &str, amount: &str) -> pb::Credit {
    pb::Credit {
        credit_id: id.to_owned(),
        kind: pb::CreditKind::Operator as i32,
        state: pb::CreditState::Pending as i32,
        account: account.to_owned(),
        asset: asset.to_owned(),
        amount: amount.to_owned(),
        chain_evidence: false,
        operator_statements: 1,
        refusal_reason: String::new(),
        created_at: None,
    }
}

#[test]
fn credit_ids_are_64_hex_digits_shown_lowercase() {
    let id = asked();
    assert_eq!(CreditId::parse(&id.to_hex()), Some(id));
    assert_eq!(CreditId::parse(&id.to_hex().to_ascii_uppercase()), Some(id));
    assert_eq!(id.to_string(), id.to_hex());
    assert!(
        id.to_hex()
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    for bad in ["", "00", &"g".repeat(64), &"0".repeat(63), &"0".repeat(65)] {
        assert_eq!(CreditId::parse(bad), None, "{bad:?}");
    }
    // The id of a proposed credit is the store's digest of its idempotency key.
    let key = IdempotencyKey::parse(KEY).expect("key");
    assert_eq!(id.bytes(), &key.digest());
}

#[test]
fn an_honest_answer_is_signed_over_exactly_its_shown_fields() {
    let w = answer(
        &asked().to_hex().to_ascii_uppercase(),
        "treasury",
        "ETH",
        "500",
    );
    let shown = review(asked(), &w).expect("honest");
    assert_eq!(shown.id, asked());
    assert_eq!(shown.account.as_str(), "treasury");
    assert_eq!(shown.asset.as_str(), "ETH");
    assert_eq!(shown.amount, Amount::new(500));
    let key_id = KeyId::of(&operator().verifying_key());
    let s = shown.statement(tenant(), key_id, 3);
    assert_eq!(s.tenant_id, tenant());
    assert_eq!(&s.credit_id, asked().bytes());
    assert_eq!((s.operator_key_id, s.policy_version), (key_id, 3));
    let signature = s.sign(&operator()).expect("signs");
    s.verify(&operator().verifying_key(), &signature.to_bytes())
        .expect("verifies");
}

/// A lying operations host answers another credit (the attacker's own, pending) when the
/// operator asked for the one on their ticket: nothing is signed (exit 6).
#[test]
fn an_answer_naming_another_credit_is_refused() {
    let other = CreditId::parse(&"ab".repeat(32)).expect("id");
    let e = review(asked(), &answer(&other.to_hex(), "treasury", "ETH", "500"))
        .expect_err("other credit");
    assert_eq!(e.reason(), "CREDIT_ID_MISMATCH");
    assert_eq!(
        e.metadata(),
        vec![("asked", asked().to_hex()), ("answered", other.to_hex())]
    );
    let e =
        review(asked(), &answer("x\u{1b}[2J", "treasury", "ETH", "500")).expect_err("not an id");
    assert_eq!(e.reason(), "CREDIT_ID_MISMATCH");
    assert!(
        !e.to_string().contains('\u{1b}'),
        "the answer is not echoed"
    );
}

#[test]
fn fields_that_do_not_parse_under_the_statement_rules_are_refused() {
    let id = asked().to_hex();
    for (field, account, asset, amount) in [
        ("account", "", "ETH", "500"),
        ("account", "Treasury", "ETH", "500"),
        ("account", "treasury\u{202e}", "ETH", "500"),
        ("asset", "treasury", "eth", "500"),
        ("asset", "treasury", "", "500"),
        ("amount", "treasury", "ETH", "0"),
        ("amount", "treasury", "ETH", "0500"),
        ("amount", "treasury", "ETH", "5e2"),
        (
            "amount",
            "treasury",
            "ETH",
            "340282366920938463463374607431768211456",
        ),
    ] {
        let e = review(asked(), &answer(&id, account, asset, amount)).expect_err(field);
        assert_eq!(e.reason(), "CREDIT_UNPARSEABLE", "{field}");
        assert_eq!(e.metadata(), vec![("field", field.to_owned())]);
        assert!(!e.to_string().contains('\u{202e}'));
    }
    // 2^128 - 1 is the largest amount a statement carries.
    let max = review(
        asked(),
        &answer(
            &id,
            "treasury",
            "ETH",
            "340282366920938463463374607431768211455",
        ),
    )
    .expect("u128::MAX");
    assert_eq!(max.amount, Amount::new(u128::MAX));
}

/// What you see is what you sign: the rows and JSON shown are rendered from the statement that
/// is signed, every field of it, and the JSON rebuilds to the very bytes signed.
#[test]
fn what_an_operator_sees_is_exactly_what_is_signed() {
    let shown = review(
        asked(),
        &answer(&asked().to_hex(), "treasury", "ETH", "500"),
    )
    .expect("ok");
    let s = shown.statement(tenant(), KeyId::of(&operator().verifying_key()), 2);
    let text = signing_text(&s);
    let rows = statement_rows(&s);
    for (label, value) in &rows {
        assert!(text.contains(&format!("{label:<15}{value}\n")), "{text}");
    }
    assert_eq!(text.lines().count(), 1 + rows.len(), "nothing else: {text}");
    let json = statement_json(&s);
    let field = |name: &str| json[name].as_str().expect(name).to_owned();
    let rebuilt = CreditStatement {
        tenant_id: field("tenant_id").parse().expect("tenant"),
        credit_id: *CreditId::parse(&field("credit_id")).expect("id").bytes(),
        account: AccountName::parse(&field("account")).expect("account"),
        asset: AssetCode::parse(&field("asset")).expect("asset"),
        amount: Amount::parse(&field("amount")).expect("amount"),
        operator_key_id: KeyId::parse(&field("operator_key_id")).expect("key id"),
        policy_version: json["policy_version"].as_u64().expect("version"),
    };
    assert_eq!(rebuilt.canonical_bytes(), s.canonical_bytes());
}

/// opctl's path (a proposal from its idempotency key, or a reviewed answer, then `statement`)
/// rebuilds every credit vector of the independent implementation (`signed_statements_v1.py`)
/// to its canonical bytes and signature.
#[test]
fn every_credit_vector_is_rebuilt_to_its_independent_bytes_and_signature() {
    let file: Value = serde_json::from_str(include_str!(
        "../../domain/testdata/signed_statements_v1.json"
    ))
    .expect("vectors");
    let seeds: std::collections::HashMap<String, String> = file["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| {
            let name = k["name"].as_str().expect("name").to_owned();
            (name, k["seed_hex"].as_str().expect("seed").to_owned())
        })
        .collect();
    let vectors = file["credits"].as_array().expect("credits");
    assert!(vectors.len() >= 5);
    for v in vectors {
        let name = v["name"].as_str().unwrap_or("?");
        let st = &v["statement"];
        let text = |k: &str| st[k].as_str().expect(k).to_owned();
        let mut seed = [0_u8; 32];
        hex::decode_to_slice(&seeds[v["signer"].as_str().expect("signer")], &mut seed)
            .expect("seed");
        let key = SigningKey::from_bytes(&seed);
        let shown = match v["idempotency_key"].as_str() {
            Some(k) => {
                let p = proposed(
                    &IdempotencyKey::parse(k).expect("key"),
                    AccountName::parse(&text("account")).expect("account"),
                    AssetCode::parse(&text("asset")).expect("asset"),
                    Amount::parse(&text("amount")).expect("amount"),
                );
                assert_eq!(p.id.to_hex(), text("credit_id_hex"), "{name}");
                p
            }
            None => review(
                CreditId::parse(&text("credit_id_hex")).expect("id"),
                &answer(
                    &text("credit_id_hex"),
                    &text("account"),
                    &text("asset"),
                    &text("amount"),
                ),
            )
            .expect(name),
        };
        let s = shown.statement(
            text("tenant_id").parse().expect("tenant"),
            KeyId::of(&key.verifying_key()),
            st["policy_version"].as_u64().expect("version"),
        );
        assert_eq!(
            s.operator_key_id.to_hex(),
            text("operator_key_id"),
            "{name}"
        );
        assert_eq!(
            hex::encode(s.canonical_bytes()),
            v["canonical_hex"].as_str().expect("hex"),
            "{name}"
        );
        assert_eq!(
            hex::encode(s.sign(&key).expect("signs").to_bytes()),
            v["signature_hex"].as_str().expect("signature"),
            "{name}"
        );
    }
}
