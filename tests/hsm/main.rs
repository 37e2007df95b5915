//! Hot-wallet keys in a PKCS#11 token (SoftHSM2, a token of each test's own:
//! `opledger_testkit::hsm::TestToken`). The adversary is whoever reads the signer's host: the
//! key is generated inside the token, which refuses to reveal it; every signature the token gives
//! is checked (low s, recovery to the token's public key) before it is used; a token, PIN or key
//! that is not what the configuration says refuses the start, and no error shows the PIN.

use alloy_primitives::{Address, B256, U256};
use cryptoki::object::{Attribute, AttributeInfo, AttributeType, ObjectClass};
use opledger_evm::signer::KeyProvider;
use opledger_hsm::{HsmError, KeyLocation, Pkcs11Key};
use opledger_testkit::hsm::TestToken;
use std::time::Duration;

/// How long a test waits for one signature of the token.
const TIMEOUT: Duration = Duration::from_secs(5);

/// A logged-in session on `token`, through cryptoki directly (not the code under test).
fn session(token: &TestToken) -> anyhow::Result<cryptoki::session::Session> {
    token.session()
}

#[test]
fn a_generated_key_never_leaves_the_token() -> anyhow::Result<()> {
    let token = TestToken::create()?;
    let address = opledger_hsm::generate(&token.location("hot-1"))?;
    // The token itself, asked directly: the private half is sensitive, never extractable, and
    // its value is withheld.
    let session = session(&token)?;
    let private = session.find_objects(&[
        Attribute::Class(ObjectClass::PRIVATE_KEY),
        Attribute::Label(b"hot-1".to_vec()),
    ])?;
    assert_eq!(private.len(), 1);
    let value = session.get_attribute_info(private[0], &[AttributeType::Value])?;
    assert!(
        matches!(value.as_slice(), [AttributeInfo::Sensitive]),
        "{value:?}"
    );
    let flags = session.get_attributes(
        private[0],
        &[
            AttributeType::Sensitive,
            AttributeType::Extractable,
            AttributeType::NeverExtractable,
        ],
    )?;
    for flag in [
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::NeverExtractable(true),
    ] {
        assert!(flags.contains(&flag), "{flag:?} not in {flags:?}");
    }
    // What the signer opens is that key; a second key under the label is refused.
    assert_eq!(
        Pkcs11Key::open(&token.location("hot-1"), TIMEOUT)?.address(),
        address
    );
    assert!(matches!(
        opledger_hsm::generate(&token.location("hot-1")),
        Err(HsmError::Exists(_))
    ));
    Ok(())
}

#[test]
fn thousands_of_token_signatures_are_low_s_and_recover_to_the_key() -> anyhow::Result<()> {
    let token = TestToken::create()?;
    let location = token.location("hot-1");
    let address = opledger_hsm::generate(&location)?;
    let key = Pkcs11Key::open(&location, TIMEOUT)?;
    // The token's own answers: SoftHSM2 gives a high s about half the time.
    let session = session(&token)?;
    let private = session.find_objects(&[
        Attribute::Class(ObjectClass::PRIVATE_KEY),
        Attribute::Label(b"hot-1".to_vec()),
    ])?[0];
    let mut high = 0;
    for n in 0_u32..200 {
        let hash = alloy_primitives::keccak256(n.to_be_bytes());
        let raw = session.sign(
            &cryptoki::mechanism::Mechanism::Ecdsa,
            private,
            hash.as_slice(),
        )?;
        let signature = k256::ecdsa::Signature::from_slice(&raw)?;
        high += usize::from(signature.normalize_s().is_some());
    }
    assert!(high > 20, "{high} of 200 raw signatures were high-s");
    // Every signature the key gives is low s and recovers to its address.
    for n in 0_u32..2_000 {
        let hash = alloy_primitives::keccak256((n + 1_000_000).to_be_bytes());
        let signature = key.sign_hash(&hash)?;
        assert!(signature.normalize_s().is_none(), "high s at {n}");
        assert_eq!(
            signature.recover_address_from_prehash(&hash).ok(),
            Some(address),
            "{n}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_transfer_signed_in_the_token_is_accepted_by_the_chain_from_its_address()
-> anyhow::Result<()> {
    let token = TestToken::create()?;
    let location = token.location("hot-1");
    let address = opledger_hsm::generate(&location)?;
    let key = Pkcs11Key::open(&location, TIMEOUT)?;
    let anvil = opledger_testkit::Anvil::start().await?;
    anvil
        .rpc(
            "anvil_setBalance",
            serde_json::json!([format!("{address:#x}"), "0xde0b6b3a7640000"]),
        )
        .await?;
    let to: Address = opledger_testkit::DEV_KEYS[1].0.parse()?;
    let request = opledger_evm::tx::TransferRequest {
        chain_id: anvil.chain_id(),
        nonce: 0,
        to,
        kind: opledger_evm::tx::TransferKind::Native {
            value: U256::from(1_000_u64),
        },
        gas_limit: 21_000,
        max_fee_per_gas: 10_000_000_000,
        max_priority_fee_per_gas: 1_000_000_000,
    };
    let signed = opledger_evm::signer::sign(&request, &key)?;
    assert_eq!(signed.from, address);
    let hash = anvil.send_raw_transaction(&signed.raw).await?;
    assert_eq!(hash.parse::<B256>()?, signed.hash);
    let receipt = anvil.wait_receipt(&hash, Duration::from_secs(10)).await?;
    assert_eq!(receipt["status"], "0x1");
    assert_eq!(
        receipt["from"].as_str(),
        Some(format!("{address:#x}").as_str())
    );
    Ok(())
}

#[test]
fn a_wrong_token_pin_or_key_refuses_to_open_and_no_error_shows_the_pin() -> anyhow::Result<()> {
    let token = TestToken::create()?;
    opledger_hsm::generate(&token.location("hot-1"))?;
    let pin = std::fs::read_to_string(&token.pin_file)?.trim().to_owned();
    let wrong_pin = token.pin_file.with_file_name("wrong-pin");
    std::fs::write(&wrong_pin, "not-the-pin\n")?;
    let cases = [
        KeyLocation {
            token_label: "no-such-token".into(),
            ..token.location("hot-1")
        },
        KeyLocation {
            pin_file: wrong_pin,
            ..token.location("hot-1")
        },
        token.location("no-such-key"),
    ];
    let mut errors = Vec::new();
    for case in &cases {
        match Pkcs11Key::open(case, TIMEOUT) {
            Ok(key) => anyhow::bail!("opened {key:?}"),
            Err(e) => errors.push(e),
        }
    }
    assert!(matches!(errors[0], HsmError::NoToken(_)), "{:?}", errors[0]);
    assert!(matches!(errors[1], HsmError::Login(_)), "{:?}", errors[1]);
    assert!(matches!(errors[2], HsmError::NoKey(_)), "{:?}", errors[2]);
    for error in &errors {
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(!shown.contains(&pin), "{shown}");
        }
    }
    Ok(())
}

#[test]
fn a_key_that_can_leave_the_token_is_refused() -> anyhow::Result<()> {
    let token = TestToken::create()?;
    // A key pair made outside our keygen, its private half readable.
    let session = session(&token)?;
    let label = b"exposed".to_vec();
    session.generate_key_pair(
        &cryptoki::mechanism::Mechanism::EccKeyPairGen,
        &[
            Attribute::Token(true),
            Attribute::Label(label.clone()),
            Attribute::EcParams(opledger_hsm::SECP256K1_PARAMS.to_vec()),
            Attribute::Verify(true),
        ],
        &[
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Label(label),
            Attribute::Sensitive(false),
            Attribute::Extractable(true),
            Attribute::Sign(true),
        ],
    )?;
    let opened = Pkcs11Key::open(&token.location("exposed"), TIMEOUT);
    assert!(matches!(opened, Err(HsmError::Exposed(_))), "{opened:?}");
    Ok(())
}

/// The signer holding a key in the token signs an approved withdrawal: the stored bytes are a
/// transaction from the token's address, as every reader of the chain recovers it.
#[tokio::test]
async fn the_signer_signs_a_withdrawal_with_a_key_that_stays_in_the_token() -> anyhow::Result<()> {
    use opledger_tests::signer::{InProcessSigner, TestWallets, approve, client, sign_request};
    let token = TestToken::create()?;
    let location = token.location("hot-1");
    let address = opledger_hsm::generate(&location)?;
    let key = std::sync::Arc::new(Pkcs11Key::open(&location, TIMEOUT)?);
    let stack = opledger_tests::Stack::start().await?;
    let acme = stack.tenant("acme").await?;
    stack.fund(&acme, "treasury", "ETH", "1000000").await?;
    let w = stack.withdraw(&acme, "1000", opledger_tests::ALICE).await?;
    approve(&stack, &acme, &w).await?;
    let signer =
        InProcessSigner::start_with_wallets(&stack.db, acme.id, TestWallets::Key(key)).await?;
    client(signer.addr)
        .await?
        .sign_withdrawal(sign_request(acme.id, &w.withdrawal_id))
        .await?;
    let (sender, raw): (String, Vec<u8>) =
        sqlx::query_as("SELECT sender, raw_tx FROM tx_attempts WHERE op_id = $1::uuid")
            .bind(&w.withdrawal_id)
            .fetch_one(stack.admin.pool())
            .await?;
    assert_eq!(sender, format!("{address:#x}"));
    let decoded = opledger_evm::signer::decode(&raw)?;
    assert_eq!(decoded.from, address);
    stack.assert_invariants().await
}

#[test]
fn opledger_admin_generates_a_key_in_the_token_and_shows_it_protected() -> anyhow::Result<()> {
    let token = TestToken::create()?;
    let admin = opledger_testkit::binary_path("opledger-admin")?;
    let run = |command: &str| {
        std::process::Command::new(&admin)
            .args(["hsm", command, "--module"])
            .arg(&token.module)
            .args([
                "--token-label",
                &token.label,
                "--key-label",
                "cli-1",
                "--pin-file",
            ])
            .arg(&token.pin_file)
            .arg("--allow-software-token")
            .output()
    };
    let made = run("keygen")?;
    assert!(made.status.success(), "{made:?}");
    let address = String::from_utf8(made.stdout)?.trim().to_owned();
    assert_eq!(address.len(), 42, "{address}");
    let opened = Pkcs11Key::open(&token.location("cli-1"), TIMEOUT)?;
    assert_eq!(format!("{:#x}", opened.address()), address);
    // Shown as the token protects it.
    let shown = run("show")?;
    assert!(shown.status.success(), "{shown:?}");
    assert_eq!(
        String::from_utf8(shown.stdout)?.trim(),
        format!(
            "{address} sensitive=true extractable=false always_protected=true value_withheld=true"
        )
    );
    // A second key under the label is refused, and nothing printed holds the PIN.
    let again = run("keygen")?;
    assert!(!again.status.success());
    let pin = std::fs::read_to_string(&token.pin_file)?.trim().to_owned();
    let said = String::from_utf8_lossy(&again.stderr).into_owned()
        + &String::from_utf8_lossy(&again.stdout);
    assert!(said.contains("already holds a key labelled"), "{said}");
    assert!(!said.contains(&pin), "{said}");
    Ok(())
}

#[test]
fn a_software_token_is_refused_unless_allowed() -> anyhow::Result<()> {
    let token = TestToken::create()?;
    let strict = KeyLocation {
        allow_software_token: false,
        ..token.location("hot-1")
    };
    assert!(matches!(
        opledger_hsm::generate(&strict),
        Err(HsmError::SoftwareToken(_))
    ));
    opledger_hsm::generate(&token.location("hot-1"))?;
    assert!(matches!(
        Pkcs11Key::open(&strict, TIMEOUT),
        Err(HsmError::SoftwareToken(_))
    ));
    Ok(())
}

/// The token logs the wallet out (its login state ends, as when every session of the
/// application closes or the device resets): the next signature opens the session again, logs in
/// and checks the key, and is given; no restart.
#[test]
fn a_token_that_lost_the_login_is_opened_again_and_signs() -> anyhow::Result<()> {
    let token = TestToken::create()?;
    let location = token.location("hot-1");
    let address = opledger_hsm::generate(&location)?;
    let key = Pkcs11Key::open(&location, TIMEOUT)?;
    let hash = alloy_primitives::keccak256(b"before");
    assert_eq!(
        key.sign_hash(&hash)?
            .recover_address_from_prehash(&hash)
            .ok(),
        Some(address)
    );
    let reopened = || {
        opledger_hsm::failures()
            .reopened
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    assert_eq!(reopened(), 0);
    session(&token)?.logout()?;
    for n in 0_u8..3 {
        let hash = alloy_primitives::keccak256([n]);
        let signature = key.sign_hash(&hash)?;
        assert_eq!(
            signature.recover_address_from_prehash(&hash).ok(),
            Some(address)
        );
    }
    // Opened again once, and counted where the signer's /metrics shows it.
    assert_eq!(reopened(), 1);
    let metrics = opledger_hsm::failures().render();
    assert!(
        metrics.contains("opledger_signer_token_sessions_reopened_total 1\n")
            && metrics.contains("opledger_signer_key_failures_total{kind=\"token\"} 0\n"),
        "{metrics}"
    );
    Ok(())
}

/// A pkcs11 wallet whose key is not the configured address refuses the signer's start (another
/// token or partition labelled alike holding another key).
#[test]
fn a_pkcs11_wallet_with_another_address_refuses_the_start() -> anyhow::Result<()> {
    use opledger_signer::config::Pkcs11Wallet;
    let token = TestToken::create()?;
    let address = opledger_hsm::generate(&token.location("hot-1"))?;
    let wallet = |address: String| Pkcs11Wallet {
        module: token.module.clone(),
        token_label: token.label.clone(),
        key_label: "hot-1".to_owned(),
        pin_file: token.pin_file.clone(),
        address,
        allow_software_token: true,
        sign_timeout_ms: 5_000,
    };
    let tenant = opledger_domain::ids::TenantId::new();
    let mut config = opledger_tests::signer::config(
        "postgres://signer@127.0.0.1/unused",
        tenant,
        std::path::Path::new("unused"),
        std::path::Path::new("unused"),
        30,
    );
    config.wallets[0].keystore = None;
    config.wallets[0].passphrase_file = None;
    config.wallets[0].pkcs11 = Some(wallet(format!("{address:#x}")));
    let wallets = opledger_signer::Wallets::load(&config)?;
    assert_eq!(
        wallets
            .get(tenant, opledger_tests::signer::NETWORK)
            .map(|w| w.address.clone()),
        Some(format!("{address:#x}"))
    );
    config.wallets[0].pkcs11 = Some(wallet(format!("0x{}", "11".repeat(20))));
    let refused = opledger_signer::Wallets::load(&config);
    assert!(
        matches!(
            refused,
            Err(opledger_signer::wallets::WalletError::AddressMismatch { index: 0 })
        ),
        "{refused:?}"
    );
    Ok(())
}
