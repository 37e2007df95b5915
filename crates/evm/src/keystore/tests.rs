use super::*;
use crate::signer::{KeyProvider, LocalKey};
use alloy_primitives::{address, hex};

const ANVIL_SECRET: [u8; 32] =
    hex!("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");
const ANVIL_ADDRESS: Address = address!("f39Fd6e51aad88F6F4ce6aB8827279cffFb92266");

// Test vectors of the Web3 Secret Storage Definition (password
// "testpassword"); both decrypt to the same published secret.
const VECTOR_SECRET: [u8; 32] =
    hex!("7a28b5ba57c53603b0b07b56bba752f7784bf506fa95edc395f5cf6c7514fe9d");
const VECTOR_ADDRESS: Address = address!("008aeeda4d805471df9b2a5b0f38a0c3bcba786b");
const PBKDF2_VECTOR: &str = r#"{
  "crypto": {
    "cipher": "aes-128-ctr",
    "cipherparams": { "iv": "6087dab2f9fdbbfaddc31a909735c1e6" },
    "ciphertext": "5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46",
    "kdf": "pbkdf2",
    "kdfparams": {
      "c": 262144,
      "dklen": 32,
      "prf": "hmac-sha256",
      "salt": "ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd"
    },
    "mac": "517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2"
  },
  "id": "3198bc9c-6672-5ab3-d995-4942343ae5b6",
  "version": 3
}"#;
const SCRYPT_VECTOR: &str = r#"{
  "crypto": {
    "cipher": "aes-128-ctr",
    "cipherparams": { "iv": "83dbcc02d8ccb40e466191a123791e0e" },
    "ciphertext": "d172bf743a674da9cdad04534d56926ef8358534d458fffccd4e6ad2fbde479c",
    "kdf": "scrypt",
    "kdfparams": {
      "dklen": 32,
      "n": 262144,
      "p": 8,
      "r": 1,
      "salt": "ab0c7876052600dd703518d6fc3fe8984592145b591fc8fb5c6d43190334ba19"
    },
    "mac": "2103ac29920d71da29f15d75b4a16dbe95cfd7ff8faea1056c33131d846e3097"
  },
  "id": "3198bc9c-6672-5ab3-d995-4942343ae5b6",
  "version": 3
}"#;

fn light_keystore(passphrase: &[u8]) -> Result<String, KeystoreError> {
    encrypt_keystore(
        &Zeroizing::new(ANVIL_SECRET),
        passphrase,
        KdfCost::Light,
        &mut rand::rng(),
    )
}

fn assert_no_secret(message: &str) {
    for secret in [ANVIL_SECRET, VECTOR_SECRET] {
        assert!(!message.contains(&hex::encode(secret)), "{message}");
    }
    assert!(!message.contains("testpassword") && !message.contains("hunter2"));
}

#[test]
fn light_round_trip_keeps_the_address() -> Result<(), KeystoreError> {
    let json = light_keystore(b"hunter2")?;
    assert!(!json.contains(&hex::encode(ANVIL_SECRET)));
    let file: serde_json::Value = serde_json::from_str(&json).map_err(|e| malformed(&e))?;
    assert_eq!(file["version"], 3);
    assert_eq!(file["crypto"]["kdf"], "scrypt");
    assert_eq!(file["crypto"]["kdfparams"]["n"], 4096);
    assert_eq!(file["address"], hex::encode(ANVIL_ADDRESS));
    let key = LocalKey::from_keystore_json(&json, b"hunter2")?;
    assert_eq!(key.address(), ANVIL_ADDRESS);
    Ok(())
}

#[test]
fn wrong_passphrase_is_reported_without_key_material() -> Result<(), KeystoreError> {
    let json = light_keystore(b"hunter2")?;
    let error = LocalKey::from_keystore_json(&json, b"hunter3").err();
    assert!(
        matches!(error, Some(KeystoreError::WrongPassphrase)),
        "{error:?}"
    );
    let error = error.map(|e| format!("{e} {e:?}")).unwrap_or_default();
    assert_no_secret(&error);
    Ok(())
}

#[test]
fn address_field_must_match_the_key() -> Result<(), KeystoreError> {
    let json = light_keystore(b"pw")?;
    let forged = json.replace(&hex::encode(ANVIL_ADDRESS), &hex::encode(VECTOR_ADDRESS));
    assert!(matches!(
        LocalKey::from_keystore_json(&forged, b"pw"),
        Err(KeystoreError::AddressMismatch)
    ));
    Ok(())
}

#[test]
fn pbkdf2_test_vector_decrypts() -> Result<(), KeystoreError> {
    let key = LocalKey::from_keystore_json(PBKDF2_VECTOR, b"testpassword")?;
    assert_eq!(key.address(), VECTOR_ADDRESS);
    assert_eq!(
        Address::from_private_key(&signing_key(&Zeroizing::new(VECTOR_SECRET))?),
        VECTOR_ADDRESS
    );
    let wrong = LocalKey::from_keystore_json(PBKDF2_VECTOR, b"testpassword!");
    assert!(matches!(wrong, Err(KeystoreError::WrongPassphrase)));
    Ok(())
}

#[test]
fn scrypt_test_vector_decrypts() -> Result<(), KeystoreError> {
    let key = LocalKey::from_keystore_json(SCRYPT_VECTOR, b"testpassword")?;
    assert_eq!(key.address(), VECTOR_ADDRESS);
    Ok(())
}

#[test]
fn keystore_file_round_trip() -> Result<(), KeystoreError> {
    let json = light_keystore(b"file-pw")?;
    let path = std::env::temp_dir().join(format!("opledger-evm-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&path, json).map_err(KeystoreError::Io)?;
    let loaded = LocalKey::from_keystore_file(&path, b"file-pw");
    std::fs::remove_file(&path).map_err(KeystoreError::Io)?;
    assert_eq!(loaded?.address(), ANVIL_ADDRESS);
    let missing = LocalKey::from_keystore_file(&path, b"file-pw");
    assert!(matches!(missing, Err(KeystoreError::Io(_))));
    Ok(())
}

#[test]
fn unsupported_and_malformed_files_are_refused() {
    let cases = [
        (
            PBKDF2_VECTOR.replace("\"version\": 3", "\"version\": 4"),
            "version",
        ),
        (
            PBKDF2_VECTOR.replace("aes-128-ctr", "aes-128-cbc"),
            "cipher",
        ),
        (PBKDF2_VECTOR.replace("hmac-sha256", "hmac-sha512"), "kdf"),
        (
            PBKDF2_VECTOR.replace("\"kdf\": \"pbkdf2\"", "\"kdf\": \"argon2\""),
            "kdf",
        ),
        (
            PBKDF2_VECTOR.replace("\"c\": 262144", "\"c\": 4000000000"),
            "params",
        ),
        (
            SCRYPT_VECTOR.replace("\"n\": 262144", "\"n\": 33554432"),
            "params",
        ),
        (
            SCRYPT_VECTOR.replace("\"n\": 262144", "\"n\": 1000"),
            "params",
        ),
        (
            SCRYPT_VECTOR.replace("\"p\": 8", "\"p\": 4294967295"),
            "params",
        ),
        (
            SCRYPT_VECTOR.replace("\"dklen\": 32", "\"dklen\": 16"),
            "params",
        ),
        (
            SCRYPT_VECTOR.replace("83dbcc02d8ccb40e", "83dbcc02d8ccb4"),
            "field",
        ),
        (SCRYPT_VECTOR.replace("\"mac\"", "\"MAC\""), "json"),
        ("{ \"crypto\": 7d172bf743a674da9cdad045".to_owned(), "json"),
    ];
    for (json, expected) in cases {
        let result = LocalKey::from_keystore_json(&json, b"testpassword");
        let ok = matches!(
            (&result, expected),
            (Err(KeystoreError::UnsupportedVersion(4)), "version")
                | (Err(KeystoreError::UnsupportedCipher), "cipher")
                | (Err(KeystoreError::UnsupportedKdf), "kdf")
                | (Err(KeystoreError::InvalidKdfParams(_)), "params")
                | (Err(KeystoreError::InvalidField(_)), "field")
                | (Err(KeystoreError::Malformed { .. }), "json")
        );
        assert!(ok, "expected {expected}, got {result:?}");
        let message = result.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!message.contains("d172bf743a674da9"), "{message}");
        assert_eq!(message, message.to_lowercase());
    }
}

#[test]
fn invalid_secrets_are_refused() {
    for secret in [[0u8; 32], [0xff; 32]] {
        let result = encrypt_keystore(
            &Zeroizing::new(secret),
            b"pw",
            KdfCost::Light,
            &mut rand::rng(),
        );
        assert!(matches!(result, Err(KeystoreError::InvalidSecretKey)));
    }
}

#[test]
fn kdf_intermediates_match_the_published_vector() -> Result<(), KeystoreError> {
    // Derived key and MAC listed in the Web3 Secret Storage Definition.
    let params = serde_json::json!({
        "c": 262144, "dklen": 32, "prf": "hmac-sha256",
        "salt": "ae3cd4e7013836a3df6bd7241b12db061dbe2c6785853cce422d148a624ce0bd",
    });
    let derived = derive_key("pbkdf2", &params, b"testpassword")?;
    assert_eq!(
        hex::encode(derived.as_slice()),
        "f06d69cdc7da0faffb1008270bca38f5e31891a3a773950e6d0fea48a7188551"
    );
    let ciphertext = hex!("5318b4d5bcd28de64ee5559e671353e16f075ecae9f99c7a79a38af5f869aa46");
    assert_eq!(
        hex::encode(mac(&derived, &ciphertext)),
        "517ead924a9d0dc3124507e3393d175ce3ff7c1e96529c6c555ce9e51205e9b2"
    );
    Ok(())
}
