//! Checks the Rust canonical encoding against vectors written by the
//! independent Python implementation in `testdata/payload_hash_v1.py`.

use opledger_domain::payload::CANONICAL_DOMAIN_V1;
use opledger_domain::{
    AccountName, Amount, AssetCode, Destination, Memo, NetworkId, PayloadField, PayloadHash,
    WithdrawalPayload,
};
use serde::Deserialize;

const VECTORS_JSON: &str = include_str!("../testdata/payload_hash_v1.json");

#[derive(Deserialize)]
struct File {
    version: u32,
    domain: String,
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    name: String,
    payload: JsonPayload,
    destination_input: Option<String>,
    canonical_hex: String,
    sha256: String,
}

#[derive(Deserialize)]
struct JsonPayload {
    tenant_id: String,
    source_account: String,
    asset: String,
    network: String,
    destination: String,
    memo: Option<String>,
    amount: String,
    fee_cap: String,
    policy_version: u32,
}

impl JsonPayload {
    fn to_domain(&self) -> WithdrawalPayload {
        WithdrawalPayload {
            tenant_id: self.tenant_id.parse().expect("tenant_id"),
            source_account: AccountName::parse(&self.source_account).expect("source_account"),
            asset: AssetCode::parse(&self.asset).expect("asset"),
            network: NetworkId::parse(&self.network).expect("network"),
            destination: Destination::parse(&self.destination).expect("destination"),
            memo: self.memo.as_deref().map(|m| Memo::parse(m).expect("memo")),
            amount: Amount::parse(&self.amount).expect("amount"),
            fee_cap: Amount::parse(&self.fee_cap).expect("fee_cap"),
            policy_version: self.policy_version,
        }
    }
}

fn load() -> File {
    serde_json::from_str(VECTORS_JSON).expect("vectors parse")
}

#[test]
fn header_matches() {
    let file = load();
    assert_eq!(file.version, 1);
    assert_eq!(file.domain.as_bytes(), CANONICAL_DOMAIN_V1);
    assert!(file.vectors.len() >= 8);
}

#[test]
fn canonical_bytes_and_hash_match_every_vector() {
    for v in load().vectors {
        let payload = v.payload.to_domain();
        payload.validate().expect("vectors hold valid payloads");
        assert_eq!(
            hex::encode(payload.canonical_bytes()),
            v.canonical_hex,
            "{}",
            v.name
        );
        assert_eq!(payload.hash().to_hex(), v.sha256, "{}", v.name);
        assert_eq!(
            PayloadHash::from_hex(&v.sha256),
            Ok(payload.hash()),
            "{}",
            v.name
        );
    }
}

#[test]
fn mixed_case_destination_input_gives_the_same_hash() {
    let vectors = load().vectors;
    let v = vectors
        .iter()
        .find(|v| v.destination_input.is_some())
        .expect("a vector with a mixed-case destination input");
    let input = v.destination_input.as_deref().expect("input");
    assert_ne!(input, input.to_ascii_lowercase());
    let mut payload = v.payload.to_domain();
    payload.destination = Destination::parse(input).expect("mixed-case destination");
    assert_eq!(payload.destination.as_str(), v.payload.destination);
    assert_eq!(payload.hash().to_hex(), v.sha256);
}

#[test]
fn vectors_cover_the_required_cases() {
    let vectors = load().vectors;
    let payloads: Vec<WithdrawalPayload> = vectors.iter().map(|v| v.payload.to_domain()).collect();
    assert!(payloads.iter().any(|p| p.memo.is_none()));
    assert!(
        payloads
            .iter()
            .any(|p| p.memo.as_ref().is_some_and(|m| m.as_str().is_ascii()))
    );
    assert!(
        payloads
            .iter()
            .any(|p| p.memo.as_ref().is_some_and(|m| !m.as_str().is_ascii()))
    );
    assert!(payloads.iter().any(|p| p.amount == Amount::new(u128::MAX)));
    assert!(payloads.iter().any(|p| p.fee_cap.is_zero()));
    assert!(payloads.iter().any(|p| p.policy_version == u32::MAX));
    let single_field_pair = payloads.iter().enumerate().any(|(i, a)| {
        payloads[i + 1..]
            .iter()
            .any(|b| a.differing_fields(b) == [PayloadField::Amount])
    });
    assert!(single_field_pair, "two vectors differing only in amount");
    let hashes: std::collections::HashSet<_> = payloads.iter().map(|p| p.hash()).collect();
    assert_eq!(
        hashes.len(),
        payloads.len(),
        "every vector hashes differently"
    );
}
