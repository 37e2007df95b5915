use super::*;

#[test]
fn account_name_rules() {
    for ok in ["a", "0", "treasury", "hot-wallet_1", &"a".repeat(63)] {
        assert_eq!(
            AccountName::parse(ok).map(|a| a.to_string()),
            Ok(ok.to_owned())
        );
    }
    for bad in [
        "",
        "-a",
        "_a",
        "Treasury",
        "a b",
        "a.b",
        "é",
        &"a".repeat(64),
    ] {
        let e = AccountName::parse(bad).expect_err(bad);
        assert_eq!(e.field(), "source_account");
    }
}

#[test]
fn asset_code_rules() {
    for ok in ["ETH", "USDC", "0", "A1B2C3D4E5F6G7H8"] {
        assert_eq!(
            AssetCode::parse(ok).map(|a| a.as_str().to_owned()),
            Ok(ok.to_owned())
        );
    }
    for bad in ["", "eth", "US-DC", "A1B2C3D4E5F6G7H8I", " ETH"] {
        assert_eq!(AssetCode::parse(bad).expect_err(bad).field(), "asset");
    }
}

#[test]
fn network_id_rules() {
    for ok in ["anvil", "ethereum-mainnet", "1", &"n".repeat(63)] {
        assert!(NetworkId::parse(ok).is_ok(), "{ok}");
    }
    for bad in ["", "-anvil", "Anvil", "base_sepolia", &"n".repeat(64)] {
        assert_eq!(NetworkId::parse(bad).expect_err(bad).field(), "network");
    }
}

#[test]
fn destination_is_normalised_and_redacted() {
    let mixed = "0x52908400098527886E0F7030069857D2E4169EE7";
    let d = Destination::parse(mixed).expect("valid address");
    assert_eq!(d.as_str(), mixed.to_ascii_lowercase());
    assert_eq!(
        Destination::parse(&mixed.to_ascii_lowercase()),
        Ok(d.clone())
    );
    assert_eq!(format!("{d:?}"), "Destination(<redacted>)");
    let bad_inputs = [
        "",
        "52908400098527886e0f7030069857d2e4169ee7",
        "0X52908400098527886e0f7030069857d2e4169ee7",
        "0x52908400098527886e0f7030069857d2e4169ee",
        "0x52908400098527886e0f7030069857d2e4169ee77",
        "0x52908400098527886e0f7030069857d2e4169eeg",
        " 0x52908400098527886e0f7030069857d2e4169ee7",
    ];
    for bad in bad_inputs {
        let e = Destination::parse(bad).expect_err(bad);
        assert_eq!(e.field(), "destination");
        if !bad.is_empty() {
            assert!(!e.to_string().contains(bad.trim()));
        }
    }
}

#[test]
fn memo_rules_and_redaction() {
    let m = Memo::parse("invoice 42 – café ✓").expect("valid memo");
    assert_eq!(m.as_str(), "invoice 42 – café ✓");
    assert_eq!(format!("{m:?}"), "Memo(<redacted>)");
    assert!(Memo::parse(&"x".repeat(128)).is_ok());
    assert!(Memo::parse(&"é".repeat(64)).is_ok());
    for bad in [
        "",
        "line\nbreak",
        "tab\there",
        "nul\0",
        "del\u{7f}",
        "c1\u{85}",
    ] {
        assert_eq!(Memo::parse(bad).expect_err(bad).field(), "memo");
    }
    let long = "secret-memo-".repeat(11);
    let e = Memo::parse(&long).expect_err("too long");
    assert!(!e.to_string().contains("secret"));
    assert!(Memo::parse(&"é".repeat(65)).is_err());
}

#[test]
fn error_message_shape() {
    let e = Memo::parse("").expect_err("empty");
    assert_eq!(e.to_string(), "invalid memo: is empty");
}
