use super::*;
use serde_json::Value;

const TENANT: &str = "0190c4c8-0000-7c6e-8f90-123456789abc";
const ASKED: &str = "0190c4c8-4b5d-7c6e-8f90-123456789abc";
const OTHER: &str = "0190c4c8-4b5d-7c6e-8f90-cba987654321";
/// Where a harmless withdrawal pays (anvil's second dev account).
const HARMLESS_TO: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
/// The attacker's address.
const ATTACKER_TO: &str = "0x000000000000000000000000000000000000dead";

fn tenant() -> TenantId {
    TENANT.parse().expect("uuid")
}

fn asked() -> OperationId {
    ASKED.parse().expect("uuid")
}

/// A domain payload of `tenant`, as the operations service stores it.
fn stored(tenant: TenantId, to: &str, amount: &str, memo: Option<&str>) -> WithdrawalPayload {
    WithdrawalPayload {
        tenant_id: tenant,
        source_account: AccountName::parse("treasury").expect("account"),
        asset: AssetCode::parse("ETH").expect("asset"),
        network: NetworkId::parse("anvil").expect("network"),
        destination: Destination::parse(to).expect("destination"),
        memo: memo.map(|m| Memo::parse(m).expect("memo")),
        amount: Amount::parse(amount).expect("amount"),
        fee_cap: Amount::parse("1000").expect("fee cap"),
        policy_version: 1,
    }
}

/// The wire fields of `p` (what the operations service shows).
fn wire(p: &WithdrawalPayload) -> pb::WithdrawalPayload {
    pb::WithdrawalPayload {
        source_account: p.source_account.as_str().to_owned(),
        asset: p.asset.as_str().to_owned(),
        network: p.network.as_str().to_owned(),
        destination: p.destination.as_str().to_owned(),
        memo: p.memo.as_ref().map(|m| m.as_str().to_owned()),
        amount: p.amount.to_string(),
        fee_cap: p.fee_cap.to_string(),
        policy_version: p.policy_version,
    }
}

/// An answer naming `id`, showing `shown` and claiming `hash`.
fn answer(id: &str, shown: pb::WithdrawalPayload, hash: &PayloadHash) -> pb::Withdrawal {
    pb::Withdrawal {
        withdrawal_id: id.to_owned(),
        payload: Some(shown),
        payload_hash: hash.to_hex(),
        state: pb::WithdrawalState::Requested as i32,
        ..Default::default()
    }
}

#[test]
fn an_honest_answer_is_reviewed_with_opctls_own_hash() {
    let p = stored(tenant(), HARMLESS_TO, "5000", Some("invoice 7"));
    let r = review(asked(), tenant(), &answer(ASKED, wire(&p), &p.hash())).expect("honest");
    assert_eq!(r.id, asked());
    assert_eq!(r.hash, p.hash());
    assert_eq!(r.payload, p);
    // Upper-case hex and a mixed-case destination are the same payload.
    let mut shown = wire(&p);
    shown.destination = HARMLESS_TO.to_ascii_uppercase().replacen("0X", "0x", 1);
    let mut w = answer(ASKED, shown, &p.hash());
    w.payload_hash = w.payload_hash.to_ascii_uppercase();
    assert_eq!(review(asked(), tenant(), &w).expect("same payload"), r);
}

/// The finding of issue 25: the operations host stores an attacker's withdrawal (its hash is
/// the real stored hash) and shows approvers a harmless destination and amount with that hash.
/// Before, opctl signed the server's hash: the approver approved the attacker's payload.
#[test]
fn lying_operations_host_showing_a_harmless_payload_with_the_attackers_hash_is_refused() {
    let attackers = stored(tenant(), ATTACKER_TO, "900000000000000000000", None);
    let harmless = stored(tenant(), HARMLESS_TO, "5000", None);
    let w = answer(ASKED, wire(&harmless), &attackers.hash());
    let e = review(asked(), tenant(), &w).expect_err("the shown fields do not hash to it");
    assert_eq!(
        e,
        Unverified::HashMismatch {
            tenant: tenant(),
            answered: attackers.hash(),
            computed: harmless.hash(),
        }
    );
    assert_eq!(e.reason(), "DISPLAYED_PAYLOAD_MISMATCH");
    let message = e.to_string();
    assert!(message.contains(&attackers.hash().to_hex()), "{message}");
    assert!(message.contains(&harmless.hash().to_hex()), "{message}");
    assert!(
        !message.contains(&ATTACKER_TO[2..]) && !message.contains(&HARMLESS_TO[2..]),
        "no address in the message: {message}"
    );
    // Changing any one shown field of an honest answer is caught the same way.
    let honest = answer(ASKED, wire(&harmless), &harmless.hash());
    let tampered: [fn(&mut pb::WithdrawalPayload); 8] = [
        |p| p.source_account = "operations".into(),
        |p| p.asset = "USDC".into(),
        |p| p.network = "ethereum-mainnet".into(),
        |p| p.destination = ATTACKER_TO.into(),
        |p| p.memo = Some("tag 1".into()),
        |p| p.amount = "5001".into(),
        |p| p.fee_cap = "1001".into(),
        |p| p.policy_version = 2,
    ];
    for (i, change) in tampered.into_iter().enumerate() {
        let mut w = honest.clone();
        if let Some(p) = w.payload.as_mut() {
            change(p);
        }
        let e = review(asked(), tenant(), &w).expect_err("tampered");
        assert_eq!(e.reason(), "DISPLAYED_PAYLOAD_MISMATCH", "field {i}");
    }
}

#[test]
fn lying_operations_host_answering_another_withdrawal_is_refused() {
    let p = stored(tenant(), HARMLESS_TO, "5000", None);
    let e = review(asked(), tenant(), &answer(OTHER, wire(&p), &p.hash())).expect_err("other id");
    assert_eq!(e.reason(), "WITHDRAWAL_ID_MISMATCH");
    assert_eq!(
        e.metadata(),
        vec![("asked", ASKED.to_owned()), ("answered", OTHER.to_owned())]
    );
    let e = review(
        asked(),
        tenant(),
        &answer("x\u{1b}[2J", wire(&p), &p.hash()),
    )
    .expect_err("not a uuid");
    assert_eq!(e.reason(), "WITHDRAWAL_ID_MISMATCH");
    assert!(
        !e.to_string().contains('\u{1b}'),
        "the answer is not echoed"
    );
}

#[test]
fn another_tenants_withdrawal_does_not_hash_to_its_answer() {
    // The wire carries no tenant id: the tenant is bound through the hash opctl computes for
    // the approver's --tenant.
    let other_tenant: TenantId = "0190c4c8-ffff-7c6e-8f90-123456789abc"
        .parse()
        .expect("uuid");
    let theirs = stored(other_tenant, HARMLESS_TO, "5000", None);
    let e = review(
        asked(),
        tenant(),
        &answer(ASKED, wire(&theirs), &theirs.hash()),
    )
    .expect_err("other tenant");
    assert_eq!(e.reason(), "DISPLAYED_PAYLOAD_MISMATCH");
    assert!(e.to_string().contains(TENANT));
}

#[test]
fn fields_that_do_not_parse_into_the_domain_payload_are_refused() {
    let p = stored(tenant(), HARMLESS_TO, "5000", None);
    let honest = answer(ASKED, wire(&p), &p.hash());
    type Break = fn(&mut pb::Withdrawal);
    let broken: [(&str, Break); 9] = [
        ("payload", |w| w.payload = None),
        ("destination", |w| {
            if let Some(p) = w.payload.as_mut() {
                p.destination = "0x1234".into();
            }
        }),
        ("memo", |w| {
            if let Some(p) = w.payload.as_mut() {
                p.memo = Some(String::new());
            }
        }),
        ("memo", |w| {
            if let Some(p) = w.payload.as_mut() {
                p.memo = Some("tag\u{1b}[2J".into());
            }
        }),
        ("amount", |w| {
            if let Some(p) = w.payload.as_mut() {
                p.amount = "05000".into();
            }
        }),
        ("amount", |w| {
            if let Some(p) = w.payload.as_mut() {
                p.amount = "0".into();
            }
        }),
        ("fee_cap", |w| {
            if let Some(p) = w.payload.as_mut() {
                p.fee_cap = "1e3".into();
            }
        }),
        ("asset", |w| {
            if let Some(p) = w.payload.as_mut() {
                p.asset = "eth".into();
            }
        }),
        ("payload_hash", |w| w.payload_hash = "00".into()),
    ];
    for (field, change) in broken {
        let mut w = honest.clone();
        change(&mut w);
        let e = review(asked(), tenant(), &w).expect_err(field);
        assert_eq!(e.reason(), "PAYLOAD_UNPARSEABLE", "{field}");
        assert_eq!(e.metadata(), vec![("field", field.to_owned())], "{field}");
    }
}

/// opctl rebuilds every vector of the independent implementation (`payload_hash_v1.py`) to its
/// hash: the fields shown are the fields hashed, with the domain's encoding.
#[test]
fn every_golden_vector_reviews_to_its_independent_hash() {
    let file: Value =
        serde_json::from_str(include_str!("../../domain/testdata/payload_hash_v1.json"))
            .expect("vectors");
    let vectors = file["vectors"].as_array().expect("vectors");
    assert!(vectors.len() >= 10);
    for v in vectors {
        let p = &v["payload"];
        let text = |k: &str| p[k].as_str().expect(k).to_owned();
        let shown = pb::WithdrawalPayload {
            source_account: text("source_account"),
            asset: text("asset"),
            network: text("network"),
            destination: v["destination_input"]
                .as_str()
                .map_or_else(|| text("destination"), str::to_owned),
            memo: p["memo"].as_str().map(str::to_owned),
            amount: text("amount"),
            fee_cap: text("fee_cap"),
            policy_version: p["policy_version"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .expect("u32"),
        };
        let tenant: TenantId = text("tenant_id").parse().expect("tenant");
        let hash = PayloadHash::from_hex(v["sha256"].as_str().expect("sha256")).expect("hex");
        let name = v["name"].as_str().unwrap_or("?");
        match review(asked(), tenant, &answer(ASKED, shown, &hash)) {
            Ok(r) => assert_eq!(r.hash, hash, "{name}"),
            // The domain refuses a zero amount; the vectors encode it anyway.
            Err(Unverified::Field(e)) if text("amount") == "0" => {
                assert_eq!(e.field(), "amount", "{name}");
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}
