use super::*;
use crate::testutil::{bitgo_config, fireblocks_config, prime_config, temp_dir, write};

#[test]
fn base_urls_are_http_or_https_with_a_host_and_nothing_else() {
    for (text, expected) in [
        ("https://api.fireblocks.io", "https://api.fireblocks.io"),
        ("https://api.fireblocks.io/", "https://api.fireblocks.io"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("HTTPS://Example.COM", "https://example.com"),
    ] {
        assert_eq!(base_url("base_url", text).expect(text), expected);
    }
    for bad in [
        "",
        "api.fireblocks.io",
        "ftp://host",
        "file:///etc/passwd",
        "https://user:pw@host",
        "https://host/v1",
        "https://host?x=1",
        "https://host#frag",
        "https://",
    ] {
        let error = base_url("base_url", bad).expect_err(bad);
        assert!(error.to_string().starts_with("base_url: "), "{error}");
    }
}

#[test]
fn numbers_and_ids_are_bounded() {
    assert!(timeout("t", 0).is_err());
    assert!(timeout("t", 301).is_err());
    assert_eq!(timeout("t", 20).expect("20"), Duration::from_secs(20));
    assert!(window("w", 7 * 24 * 3600 + 1).is_err());
    assert!(window("w", 0).is_ok());
    assert!(decimals("d", 39).is_err());
    assert!(decimals("d", 18).is_ok());
    assert!(plain_id("id", "ETH_TEST5").is_ok());
    for bad in ["", "a/b", "a b", "é", "a?b", ".", "..", &"a".repeat(129)] {
        assert!(plain_id("id", bad).is_err(), "{bad:?}");
    }
    assert!(bitgo_wallet_id("w", "0123456789abcdef0123456789abcdef").is_ok());
    for bad in [
        "0123456789ABCDEF0123456789ABCDEF",
        "0123",
        "g123456789abcdef0123456789abcdef",
    ] {
        assert!(bitgo_wallet_id("w", bad).is_err(), "{bad}");
    }
}

#[test]
fn accounts_read_from_json_by_profile_and_unknown_keys_are_refused() {
    let json = r#"{"profile":"lookup_by_reference","base_url":"https://api.fireblocks.io",
        "api_key_file":"/run/secrets/key","api_secret_file":"/run/secrets/secret",
        "vault_account_id":"0","asset_id":"ETH","decimals":18,"consistency_window_secs":60}"#;
    let config: AccountConfig = serde_json::from_str(json).expect("fireblocks");
    let AccountConfig::LookupByReference(fireblocks) = config else {
        panic!("profile");
    };
    assert_eq!(fireblocks.timeout_secs, 20);
    assert_eq!(fireblocks.ca_file, None);

    let json = r#"{"profile":"no_lookup","base_url":"https://prime","access_key_file":"a",
        "passphrase_file":"p","signing_key_file":"s","portfolio_id":"p","wallet_id":"w",
        "currency_symbol":"ETH","decimals":18,"consistency_window_secs":0,"timeout_secs":5}"#;
    assert!(matches!(
        serde_json::from_str::<AccountConfig>(json),
        Ok(AccountConfig::NoLookup(_))
    ));

    let inline_secret = json.replace("\"timeout_secs\":5", "\"signing_key\":\"hunter2\"");
    let error = serde_json::from_str::<AccountConfig>(&inline_secret).expect_err("unknown key");
    assert!(error.to_string().contains("unknown field"), "{error}");
    assert!(serde_json::from_str::<AccountConfig>(r#"{"profile":"other"}"#).is_err());

    let schema = serde_json::to_string(&schemars::schema_for!(AccountConfig)).expect("schema");
    for key in [
        "one_send_per_reference",
        "wallet_passphrase_file",
        "consistency_window_secs",
    ] {
        assert!(schema.contains(key), "{key}");
    }
}

#[test]
fn every_profile_builds_from_its_section() {
    let base = "http://127.0.0.1:9";
    let (fireblocks, bitgo, prime) = (
        fireblocks_config(base),
        bitgo_config(base),
        prime_config(base),
    );
    for config in [
        AccountConfig::LookupByReference(fireblocks.config.clone()),
        AccountConfig::OneSendPerReference(bitgo.config.clone()),
        AccountConfig::NoLookup(prime.config.clone()),
    ] {
        let custodian = crate::build(&config).expect("build");
        let debug = format!("{custodian:?}");
        for secret in [
            crate::testutil::API_KEY,
            crate::testutil::TOKEN,
            "pass \\\"phrase",
            crate::testutil::SIGNING_KEY,
            "prime-passphrase",
            "PRIVATE KEY",
        ] {
            assert!(!debug.contains(secret), "{debug}");
        }
    }
}

#[test]
fn setup_errors_name_the_setting_never_the_secret() {
    let dir = temp_dir();
    let mut config = fireblocks_config("http://127.0.0.1:9");
    config.api_key_file = dir.join("missing");
    let error =
        crate::build(&AccountConfig::LookupByReference(config.clone())).expect_err("missing");
    assert!(
        error.to_string().starts_with("api_key_file: cannot read"),
        "{error}"
    );

    config.api_key_file = write(&dir, "empty", "\n \n");
    let error = crate::build(&AccountConfig::LookupByReference(config.clone())).expect_err("empty");
    assert_eq!(error.to_string(), "api_key_file: the secret file is empty");

    config.api_key_file = write(&dir, "key", "k");
    config.api_secret_file = write(&dir, "secret", "hunter2-not-a-key");
    let error = crate::build(&AccountConfig::LookupByReference(config.clone())).expect_err("pem");
    assert!(
        error.to_string().starts_with("api_secret_file: "),
        "{error}"
    );
    assert!(!error.to_string().contains("hunter2"), "{error}");

    let pkcs1 = crate::testutil::openssl(
        &["rsa", "-traditional"],
        &crate::testutil::key().private_pem,
    );
    config.api_secret_file = write(&dir, "pkcs1", pkcs1);
    let error = crate::build(&AccountConfig::LookupByReference(config.clone())).expect_err("pkcs1");
    assert!(error.to_string().contains("PKCS#1"), "{error}");

    config.api_secret_file = write(&dir, "pkcs8", &crate::testutil::key().private_pem);
    config.vault_account_id = "../admin".to_owned();
    let error = crate::build(&AccountConfig::LookupByReference(config.clone())).expect_err("id");
    assert!(
        error.to_string().starts_with("vault_account_id: "),
        "{error}"
    );
    assert!(!error.to_string().contains("admin"), "{error}");

    let mut bitgo = bitgo_config("https://host/path");
    let error = crate::build(&AccountConfig::OneSendPerReference(bitgo.clone())).expect_err("url");
    assert_eq!(
        error.to_string(),
        "base_url: must have no path, query or fragment"
    );
    bitgo.base_url = "https://host".to_owned();
    bitgo.wallet_id = "W".to_owned();
    let error = crate::build(&AccountConfig::OneSendPerReference(bitgo.config.clone()))
        .expect_err("wallet");
    assert!(error.to_string().starts_with("wallet_id: "), "{error}");

    let mut prime = prime_config("https://host");
    prime.ca_file = Some(dir.join("missing-ca.pem"));
    let error = crate::build(&AccountConfig::NoLookup(prime.config.clone())).expect_err("ca");
    assert!(error.to_string().starts_with("HTTP client: "), "{error}");
}

#[tokio::test]
async fn built_adapters_are_shared_across_tasks() {
    use crate::api::Custodian;
    use crate::testutil::{Canned, request, serve};
    use opledger_domain::custodian::SubmitAnswer;
    use std::sync::Arc;

    let server = serve(vec![Canned::json(
        200,
        r#"{"id":"fb-1","status":"SUBMITTED"}"#,
    )])
    .await;
    let fixture = fireblocks_config(&server.base);
    let config = AccountConfig::LookupByReference(fixture.config.clone());
    let custodian: Arc<dyn Custodian> = crate::build(&config).expect("build");
    let transfer = request(1_000);
    let body = custodian.request(&transfer).expect("body");
    let shared = Arc::clone(&custodian);
    let submitted =
        tokio::spawn(async move { shared.submit(transfer.reference, &body.bytes).await })
            .await
            .expect("task")
            .expect("sent");
    assert_eq!(submitted.answer, SubmitAnswer::Accepted);
    assert_eq!(custodian.consistency_window(), Duration::from_secs(60));
}
