//! Unit tests of `trust`: the flags of `trust publish`, describing a statement, key files.

use super::*;
use clap::Parser;

#[derive(Parser, Debug)]
struct Wrap {
    #[command(flatten)]
    args: PublishArgs,
}

#[test]
fn flags_build_a_canonical_statement() {
    let approver = SigningKey::from_bytes(&[1; 32]);
    let service = SigningKey::from_bytes(&[2; 32]);
    let service_id = KeyId::of(&service.verifying_key());
    let w = Wrap::try_parse_from([
        "x",
        "--tenant",
        "demo",
        "--admin-key-file",
        "k",
        "--approver",
        &public_hex(&approver),
        "--service",
        &public_hex(&service),
        "--rule",
        "ETH:0:1",
        "--rule",
        "ETH:1000:2",
        "--automated",
        &format!("ETH:{service_id}:500"),
        "--kyt-required",
        "ETH",
    ])
    .expect("parses");
    let statement =
        TrustStatement::new(TenantId::new(), 1, parts(&w.args).expect("parts")).expect("valid");
    let decoded = TrustStatement::decode(&statement.canonical_bytes()).expect("canonical");
    assert_eq!(decoded.keys().count(), 2);
    assert_eq!(decoded.automated().len(), 1);
    let (text, value) = describe(&decoded);
    assert!(text.contains("rule       ETH from 1000 needs 2"), "{text}");
    assert_eq!(value["kyt_required"][0], "ETH");
    for bad in [
        ["--rule", "ETH:0"],
        ["--rule", "eth:0:1"],
        ["--approver", "00"],
        ["--revoke", "xyz"],
    ] {
        let mut argv = vec![
            "x",
            "--tenant",
            "demo",
            "--admin-key-file",
            "k",
            "--approver",
        ];
        let pk = public_hex(&approver);
        argv.push(&pk);
        argv.extend(bad);
        let w = Wrap::try_parse_from(argv).expect("parses");
        assert!(parts(&w.args).is_err(), "{bad:?}");
    }
}

#[test]
fn kyt_provider_keys_are_published_from_hex_or_their_webhook_form() {
    let approver = SigningKey::from_bytes(&[1; 32]);
    let provider = opledger_webhook::Ed25519SigningKey::from_seed(&[5; 32]);
    let whpk = provider.public_key().to_whpk_string();
    let second = SigningKey::from_bytes(&[6; 32]);
    let w = Wrap::try_parse_from([
        "x",
        "--tenant",
        "demo",
        "--admin-key-file",
        "k",
        "--approver",
        &public_hex(&approver),
        "--kyt",
        &whpk,
        "--kyt",
        &public_hex(&second),
        "--kyt-required",
        "ETH",
    ])
    .expect("parses");
    let statement =
        TrustStatement::new(TenantId::new(), 1, parts(&w.args).expect("parts")).expect("valid");
    let decoded = TrustStatement::decode(&statement.canonical_bytes()).expect("canonical");
    let kyt: Vec<[u8; 32]> = decoded
        .keys()
        .filter(|k| k.kind == KeyKind::Kyt)
        .map(|k| k.public_key.to_bytes())
        .collect();
    assert_eq!(kyt.len(), 2);
    assert!(kyt.contains(&provider.public_key().to_bytes()));
    assert!(kyt.contains(&second.verifying_key().to_bytes()));
    let (text, _) = describe(&decoded);
    assert!(text.contains(" KYT"), "{text}");
    // The webhook form is for KYT keys only; a broken one is refused.
    for bad in [["--approver", whpk.as_str()], ["--kyt", "whpk_AAAA"]] {
        let mut argv = vec!["x", "--tenant", "demo", "--admin-key-file", "k"];
        let pk = public_hex(&approver);
        if bad[0] != "--approver" {
            argv.extend(["--approver", pk.as_str()]);
        }
        argv.extend(bad);
        let w = Wrap::try_parse_from(argv).expect("parses");
        assert!(parts(&w.args).is_err(), "{bad:?}");
    }
}

#[test]
fn operator_keys_and_credit_rules_are_published() {
    let approver = SigningKey::from_bytes(&[1; 32]);
    let operator = SigningKey::from_bytes(&[3; 32]);
    let second = SigningKey::from_bytes(&[4; 32]);
    let w = Wrap::try_parse_from([
        "x",
        "--tenant",
        "demo",
        "--admin-key-file",
        "k",
        "--approver",
        &public_hex(&approver),
        "--operator",
        &public_hex(&operator),
        "--operator",
        &public_hex(&second),
        "--credit-rule",
        "ETH:1000:2",
        "--credit-rule",
        "ETH:0:1",
    ])
    .expect("parses");
    let statement =
        TrustStatement::new(TenantId::new(), 1, parts(&w.args).expect("parts")).expect("valid");
    let decoded = TrustStatement::decode(&statement.canonical_bytes()).expect("canonical");
    let operator_id = KeyId::of(&operator.verifying_key());
    assert_eq!(
        decoded.key(&operator_id).map(|k| k.kind),
        Some(KeyKind::Operator)
    );
    assert_eq!(
        decoded
            .keys()
            .filter(|k| k.kind == KeyKind::Operator)
            .count(),
        2
    );
    let eth = AssetCode::parse("ETH").expect("asset");
    assert_eq!(decoded.required_operators(&eth, Amount::new(999)), 1);
    assert_eq!(decoded.required_operators(&eth, Amount::new(1000)), 2);
    let (text, value) = describe(&decoded);
    assert!(
        text.contains("credit     ETH from 1000 needs 2 operators"),
        "{text}"
    );
    assert!(
        text.contains(&format!("key        {operator_id} OPERATOR")),
        "{text}"
    );
    assert_eq!(value["credit_rules"][1]["min_amount"], "1000");
    assert_eq!(value["credit_rules"][1]["required_operators"], 2);

    // Without credit rules: the text says what applies, and the bytes have no credit rule.
    let plain = Wrap::try_parse_from([
        "x",
        "--tenant",
        "demo",
        "--admin-key-file",
        "k",
        "--approver",
        &public_hex(&approver),
    ])
    .expect("parses");
    let plain =
        TrustStatement::new(TenantId::new(), 1, parts(&plain.args).expect("parts")).expect("valid");
    let (text, value) = describe(&plain);
    assert!(text.contains("credits    no rules (1 operator"), "{text}");
    assert_eq!(value["credit_rules"], serde_json::json!([]));

    for bad in [
        ["--credit-rule", "ETH:0"],
        ["--credit-rule", "eth:0:1"],
        ["--credit-rule", "ETH:0:x"],
        ["--credit-rule", "ETH:-1:1"],
        ["--operator", "00"],
    ] {
        let pk = public_hex(&approver);
        let mut argv = vec![
            "x",
            "--tenant",
            "demo",
            "--admin-key-file",
            "k",
            "--approver",
            &pk,
        ];
        argv.extend(bad);
        let w = Wrap::try_parse_from(argv).expect("parses");
        assert!(parts(&w.args).is_err(), "{bad:?}");
    }
    // Parsed, but refused by the statement's rules.
    for bad in [
        vec!["--credit-rule", "ETH:5:1"],
        vec!["--credit-rule", "ETH:0:11"],
        vec!["--credit-rule", "ETH:0:1", "--credit-rule", "ETH:0:2"],
    ] {
        let pk = public_hex(&approver);
        let mut argv = vec![
            "x",
            "--tenant",
            "demo",
            "--admin-key-file",
            "k",
            "--approver",
            &pk,
        ];
        argv.extend(bad.iter().copied());
        let w = Wrap::try_parse_from(argv).expect("parses");
        let parts = parts(&w.args).expect("parts");
        assert!(
            TrustStatement::new(TenantId::new(), 1, parts).is_err(),
            "{bad:?}"
        );
    }
}

#[test]
fn key_files_are_private_and_never_overwritten() {
    let dir = std::env::temp_dir().join(format!("admin-trust-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("admin.key");
    let _ = std::fs::remove_file(&path);
    let key = generate_key(&path).expect("new");
    assert_eq!(read_key(&path).expect("reads").to_bytes(), key.to_bytes());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(generate_key(&path).is_err());
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
