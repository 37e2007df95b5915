//! Property tests of the canonical payload encoding.

use opledger_domain::{
    AccountName, Amount, AssetCode, Destination, Memo, NetworkId, PayloadField, TenantId,
    WithdrawalPayload,
};
use proptest::prelude::*;
use uuid::Uuid;

fn memo_text() -> impl Strategy<Value = String> {
    "[^\\p{Cc}]{1,32}".prop_filter("memo fits in 128 bytes", |m| m.len() <= Memo::MAX_LEN)
}

prop_compose! {
    fn payload()(
        tenant in any::<u128>(),
        account in "[a-z0-9][a-z0-9_-]{0,62}",
        asset in "[A-Z0-9]{1,16}",
        network in "[a-z0-9][a-z0-9-]{0,62}",
        destination in "0x[0-9a-fA-F]{40}",
        memo in proptest::option::of(memo_text()),
        amount in 1..=u128::MAX,
        fee_cap in any::<u128>(),
        policy_version in any::<u32>(),
    ) -> WithdrawalPayload {
        WithdrawalPayload {
            tenant_id: TenantId::from_uuid(Uuid::from_u128(tenant)),
            source_account: AccountName::parse(&account).expect("account"),
            asset: AssetCode::parse(&asset).expect("asset"),
            network: NetworkId::parse(&network).expect("network"),
            destination: Destination::parse(&destination).expect("destination"),
            memo: memo.map(|m| Memo::parse(&m).expect("memo")),
            amount: Amount::new(amount),
            fee_cap: Amount::new(fee_cap),
            policy_version,
        }
    }
}

/// Changes exactly `field` of `p`, using `seed` to pick the new value.
fn mutate(p: &WithdrawalPayload, field: PayloadField, seed: u128) -> WithdrawalPayload {
    let mut q = p.clone();
    let bump = |a: Amount| Amount::new(a.get().wrapping_add(1 + seed % 1000).max(1));
    match field {
        PayloadField::TenantId => {
            q.tenant_id = TenantId::from_uuid(Uuid::from_u128(
                p.tenant_id.as_uuid().as_u128() ^ (seed | 1),
            ));
        }
        PayloadField::SourceAccount => {
            let base = p.source_account.as_str();
            let next = if base.len() < 63 {
                format!("{base}x")
            } else {
                base[..62].to_owned()
            };
            q.source_account = AccountName::parse(&next).expect("account");
        }
        PayloadField::Asset => {
            let base = p.asset.as_str();
            let next = if base.len() < 16 {
                format!("{base}Z")
            } else {
                base[..15].to_owned()
            };
            q.asset = AssetCode::parse(&next).expect("asset");
        }
        PayloadField::Network => {
            let base = p.network.as_str();
            let next = if base.len() < 63 {
                format!("{base}-")
            } else {
                base[..62].to_owned()
            };
            q.network = NetworkId::parse(&next).expect("network");
        }
        PayloadField::Destination => {
            let mut bytes = p.destination.as_str().as_bytes().to_vec();
            let i = 2 + usize::try_from(seed % 40).expect("small");
            bytes[i] = if bytes[i] == b'0' { b'f' } else { b'0' };
            let next = String::from_utf8(bytes).expect("ascii");
            q.destination = Destination::parse(&next).expect("destination");
        }
        PayloadField::Memo => {
            q.memo = match &p.memo {
                None => Some(Memo::parse("m").expect("memo")),
                Some(_) if seed.is_multiple_of(2) => None,
                Some(m) if m.as_str().len() < Memo::MAX_LEN => {
                    Some(Memo::parse(&format!("{}.", m.as_str())).expect("memo"))
                }
                Some(_) => Some(Memo::parse("m").expect("memo")),
            };
        }
        PayloadField::Amount => q.amount = bump(p.amount),
        PayloadField::FeeCap => q.fee_cap = Amount::new(p.fee_cap.get() ^ (seed | 1)),
        PayloadField::PolicyVersion => {
            q.policy_version =
                p.policy_version ^ (u32::try_from(seed % 0xffff).expect("small") | 1);
        }
    }
    q
}

proptest! {
    #[test]
    fn single_field_change_changes_bytes_hash_and_is_named(
        p in payload(),
        field_index in 0usize..9,
        seed in any::<u128>(),
    ) {
        let field = PayloadField::ALL[field_index];
        let q = mutate(&p, field, seed);
        prop_assert_ne!(&p, &q);
        prop_assert_ne!(p.canonical_bytes(), q.canonical_bytes());
        prop_assert_ne!(p.hash(), q.hash());
        prop_assert_eq!(p.differing_fields(&q), vec![field]);
        prop_assert_eq!(q.differing_fields(&p), vec![field]);
    }

    #[test]
    fn hash_is_stable(p in payload()) {
        prop_assert_eq!(p.hash(), p.clone().hash());
        prop_assert_eq!(p.canonical_bytes(), p.canonical_bytes());
        prop_assert!(p.differing_fields(&p.clone()).is_empty());
        prop_assert!(p.validate().is_ok());
    }

    #[test]
    fn debug_never_shows_destination_or_memo(p in payload()) {
        let text = format!("{p:?}");
        prop_assert!(!text.contains(&p.destination.as_str()[2..]));
        if let Some(m) = &p.memo
            && m.as_str().len() >= 8
        {
            prop_assert!(!text.contains(m.as_str()));
        }
    }
}
