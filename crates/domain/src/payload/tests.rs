use super::*;

fn sample() -> WithdrawalPayload {
    WithdrawalPayload {
        tenant_id: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
            .parse()
            .expect("uuid"),
        source_account: AccountName::parse("treasury").expect("account"),
        asset: AssetCode::parse("ETH").expect("asset"),
        network: NetworkId::parse("anvil").expect("network"),
        destination: Destination::parse("0x52908400098527886E0F7030069857D2E4169EE7")
            .expect("destination"),
        memo: Some(Memo::parse("top secret memo").expect("memo")),
        amount: Amount::new(1_000_000_000_000_000_000),
        fee_cap: Amount::ZERO,
        policy_version: 3,
    }
}

fn field(out: &mut Vec<u8>, tag: u8, text: &str) {
    out.push(tag);
    out.push(1);
    out.extend_from_slice(&u32::try_from(text.len()).expect("len").to_be_bytes());
    out.extend_from_slice(text.as_bytes());
}

#[test]
fn canonical_bytes_layout_by_hand() {
    let mut p = sample();
    let mut expected = b"opledger/withdrawal-payload/v1\x00".to_vec();
    field(&mut expected, 1, "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    field(&mut expected, 2, "treasury");
    field(&mut expected, 3, "ETH");
    field(&mut expected, 4, "anvil");
    field(
        &mut expected,
        5,
        "0x52908400098527886e0f7030069857d2e4169ee7",
    );
    let before_memo = expected.clone();
    field(&mut expected, 6, "top secret memo");
    let tail = |out: &mut Vec<u8>| {
        field(out, 7, "1000000000000000000");
        field(out, 8, "0");
        field(out, 9, "3");
    };
    tail(&mut expected);
    assert_eq!(p.canonical_bytes(), expected);

    p.memo = None;
    let mut absent = before_memo;
    absent.extend_from_slice(&[6, 0]);
    tail(&mut absent);
    assert_eq!(p.canonical_bytes(), absent);
}

#[test]
fn hash_is_sha256_of_canonical_bytes() {
    let p = sample();
    let expected: [u8; 32] = Sha256::digest(p.canonical_bytes()).into();
    assert_eq!(p.hash().as_bytes(), &expected);
    assert_eq!(p.hash(), p.clone().hash());
}

#[test]
fn validate_requires_positive_amount_and_allows_zero_fee_cap() {
    let mut p = sample();
    assert_eq!(p.validate(), Ok(()));
    p.amount = Amount::ZERO;
    let e = p.validate().expect_err("zero amount");
    assert_eq!(e.field(), "amount");
    assert_eq!(e.to_string(), "invalid amount: must be greater than zero");
    p.amount = Amount::new(1);
    p.fee_cap = Amount::ZERO;
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn differing_fields_in_order() {
    let a = sample();
    assert!(a.differing_fields(&a.clone()).is_empty());
    let mut b = a.clone();
    b.policy_version = 4;
    b.memo = None;
    b.tenant_id = TenantId::new();
    assert_eq!(
        a.differing_fields(&b),
        vec![
            PayloadField::TenantId,
            PayloadField::Memo,
            PayloadField::PolicyVersion
        ]
    );
}

#[test]
fn field_names_and_tags() {
    let names: Vec<&str> = PayloadField::ALL.iter().map(|f| f.as_str()).collect();
    assert_eq!(
        names,
        [
            "tenant_id",
            "source_account",
            "asset",
            "network",
            "destination",
            "memo",
            "amount",
            "fee_cap",
            "policy_version"
        ]
    );
    let tags: Vec<u8> = PayloadField::ALL.iter().map(|f| f.tag()).collect();
    assert_eq!(tags, (1..=9).collect::<Vec<u8>>());
}

#[test]
fn payload_debug_redacts_sensitive_fields() {
    let text = format!("{:?}", sample());
    assert!(text.contains("Destination(<redacted>)"), "{text}");
    assert!(text.contains("Some(Memo(<redacted>))"), "{text}");
    assert!(!text.to_ascii_lowercase().contains("52908400098527886e0f"));
    assert!(!text.contains("top secret"));
    assert!(text.contains("treasury"));
}
