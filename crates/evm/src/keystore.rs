//! Ethereum keystore v3 ("Web3 Secret Storage") encryption and decryption.
//!
//! Supported: `aes-128-ctr` with a `scrypt` or `pbkdf2` (`hmac-sha256`) KDF
//! and the keccak256 MAC over `derived_key[16..32] ++ ciphertext`. Derived
//! keys and decrypted secrets only ever live in [`Zeroizing`] buffers, and
//! decryption produces a [`SigningKey`] directly so the secret bytes never
//! leave this module. KDF parameters read from a file are bounded so a
//! hostile file cannot make the signer allocate or spin without limit.

use alloy_primitives::{Address, Keccak256};
use ctr::cipher::{KeyIvInit, StreamCipher};
use k256::ecdsa::SigningKey;
use rand::CryptoRng;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

mod error;
mod kdf;

pub use error::KeystoreError;
use kdf::{DKLEN, ScryptParams, derive_key, scrypt_key};

type Aes128Ctr = ctr::Ctr128BE<aes::Aes128>;

const CIPHER: &str = "aes-128-ctr";

/// How expensive the scrypt KDF of a newly written keystore is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KdfCost {
    /// geth's standard parameters (n = 2^18, r = 8, p = 1: 256 MiB of
    /// memory). Use for every real key.
    Standard,
    /// n = 2^12, r = 8, p = 1: fast and weak. For tests and throwaway dev
    /// keys only.
    Light,
}

impl KdfCost {
    fn log_n(self) -> u8 {
        match self {
            KdfCost::Standard => 18,
            KdfCost::Light => 12,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct KeystoreFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    address: Option<String>,
    #[serde(alias = "Crypto")]
    crypto: CryptoSection,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    version: u64,
}

#[derive(Serialize, Deserialize)]
struct CryptoSection {
    cipher: String,
    cipherparams: CipherParams,
    ciphertext: String,
    kdf: String,
    kdfparams: serde_json::Value,
    mac: String,
}

#[derive(Serialize, Deserialize)]
struct CipherParams {
    iv: String,
}

/// Encrypts `secret` into keystore v3 JSON (scrypt, aes-128-ctr), with
/// salt, iv and id drawn from `rng`. The JSON carries the key's address.
pub fn encrypt_keystore<R: CryptoRng + ?Sized>(
    secret: &Zeroizing<[u8; 32]>,
    passphrase: &[u8],
    cost: KdfCost,
    rng: &mut R,
) -> Result<String, KeystoreError> {
    let address = Address::from_private_key(&signing_key(secret)?);
    let mut salt = [0u8; 32];
    let mut iv = [0u8; 16];
    let mut id = [0u8; 16];
    rng.fill_bytes(&mut salt);
    rng.fill_bytes(&mut iv);
    rng.fill_bytes(&mut id);

    let (log_n, r, p) = (cost.log_n(), 8, 1);
    let derived = scrypt_key(passphrase, &salt, log_n, r, p)?;
    let mut ciphertext = Zeroizing::new([0u8; 32]);
    ciphertext.copy_from_slice(secret.as_slice());
    apply_aes_ctr(&derived, &iv, ciphertext.as_mut_slice())?;
    let mac = mac(&derived, ciphertext.as_slice());

    let params = ScryptParams {
        dklen: DKLEN,
        n: 1u64 << log_n,
        p,
        r,
        salt: hex::encode(salt),
    };
    let file = KeystoreFile {
        address: Some(hex::encode(address)),
        crypto: CryptoSection {
            cipher: CIPHER.to_owned(),
            cipherparams: CipherParams {
                iv: hex::encode(iv),
            },
            ciphertext: hex::encode(ciphertext.as_slice()),
            kdf: "scrypt".to_owned(),
            kdfparams: serde_json::to_value(params).map_err(|e| malformed(&e))?,
            mac: hex::encode(mac),
        },
        id: Some(uuid::Builder::from_random_bytes(id).into_uuid().to_string()),
        version: 3,
    };
    serde_json::to_string_pretty(&file).map_err(|e| malformed(&e))
}

/// Decrypts keystore v3 `json` into a signing key. When the file names an
/// address, it must be the decrypted key's address.
pub(crate) fn decrypt_signing_key(
    json: &str,
    passphrase: &[u8],
) -> Result<SigningKey, KeystoreError> {
    let file: KeystoreFile = serde_json::from_str(json).map_err(|e| malformed(&e))?;
    if file.version != 3 {
        return Err(KeystoreError::UnsupportedVersion(file.version));
    }
    let crypto = &file.crypto;
    if !crypto.cipher.eq_ignore_ascii_case(CIPHER) {
        return Err(KeystoreError::UnsupportedCipher);
    }
    let iv: [u8; 16] = decode_hex(&crypto.cipherparams.iv, "iv")?;
    let expected_mac: [u8; 32] = decode_hex(&crypto.mac, "mac")?;
    let mut secret = Zeroizing::new([0u8; 32]);
    *secret = decode_hex(&crypto.ciphertext, "ciphertext")?;

    let derived = derive_key(&crypto.kdf, &crypto.kdfparams, passphrase)?;
    if !constant_time_eq(&mac(&derived, secret.as_slice()), &expected_mac) {
        return Err(KeystoreError::WrongPassphrase);
    }
    apply_aes_ctr(&derived, &iv, secret.as_mut_slice())?;
    let key = signing_key(&secret)?;
    if let Some(stated) = &file.address {
        let stated = Address::from(decode_hex::<20>(stated, "address")?);
        if stated != Address::from_private_key(&key) {
            return Err(KeystoreError::AddressMismatch);
        }
    }
    Ok(key)
}

/// Turns 32 secret bytes into a signing key without copying them.
pub(crate) fn signing_key(secret: &Zeroizing<[u8; 32]>) -> Result<SigningKey, KeystoreError> {
    SigningKey::from_slice(secret.as_slice()).map_err(|_| KeystoreError::InvalidSecretKey)
}

/// keccak256(derived_key[16..32] ++ ciphertext).
fn mac(derived: &Zeroizing<[u8; 32]>, ciphertext: &[u8]) -> [u8; 32] {
    let mut hasher = Keccak256::new();
    hasher.update(&derived[16..]);
    hasher.update(ciphertext);
    hasher.finalize().0
}

/// AES-128-CTR with key derived_key[..16]; encrypting and decrypting are the same.
fn apply_aes_ctr(
    derived: &Zeroizing<[u8; 32]>,
    iv: &[u8; 16],
    buf: &mut [u8],
) -> Result<(), KeystoreError> {
    let mut cipher =
        Aes128Ctr::new_from_slices(&derived[..16], iv).map_err(|_| KeystoreError::Crypto)?;
    cipher.apply_keystream(buf);
    Ok(())
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn decode_hex<const N: usize>(text: &str, field: &'static str) -> Result<[u8; N], KeystoreError> {
    let text = text.strip_prefix("0x").unwrap_or(text);
    let mut out = [0u8; N];
    hex::decode_to_slice(text, &mut out).map_err(|_| KeystoreError::InvalidField(field))?;
    Ok(out)
}

fn malformed(error: &serde_json::Error) -> KeystoreError {
    KeystoreError::Malformed {
        line: error.line(),
        column: error.column(),
    }
}

#[cfg(test)]
mod tests;
