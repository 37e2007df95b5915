//! Key derivation for keystore v3: scrypt and pbkdf2 (hmac-sha256), with
//! cost bounds on parameters read from a file so that a hostile file cannot
//! make the signer allocate or spin without limit. Uses [`KeystoreError`].

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::error::KeystoreError;

/// Derived key length: 16 bytes of AES key, 16 bytes of MAC key.
pub(super) const DKLEN: u32 = 32;
/// Largest scrypt memory (128 * r * n bytes) accepted from a file: 1 GiB.
const MAX_SCRYPT_MEMORY: u64 = 1 << 30;
/// Largest scrypt work factor (n * r * p) accepted from a file.
const MAX_SCRYPT_WORK: u64 = 1 << 24;
/// Largest pbkdf2 iteration count accepted from a file.
const MAX_PBKDF2_ROUNDS: u32 = 10_000_000;
/// Largest salt accepted from a file, in bytes.
const MAX_SALT_LEN: usize = 1024;

/// The `kdfparams` object of a scrypt keystore.
#[derive(Serialize, Deserialize)]
pub(super) struct ScryptParams {
    pub(super) dklen: u32,
    pub(super) n: u64,
    pub(super) p: u32,
    pub(super) r: u32,
    pub(super) salt: String,
}

/// The `kdfparams` object of a pbkdf2 keystore.
#[derive(Deserialize)]
struct Pbkdf2Params {
    c: u32,
    dklen: u32,
    prf: String,
    salt: String,
}

/// Runs the keystore's KDF on `passphrase` after checking its parameters.
pub(super) fn derive_key(
    kdf: &str,
    params: &serde_json::Value,
    passphrase: &[u8],
) -> Result<Zeroizing<[u8; 32]>, KeystoreError> {
    let bad = KeystoreError::InvalidKdfParams;
    match kdf {
        "scrypt" => {
            let p: ScryptParams = serde_json::from_value(params.clone())
                .map_err(|_| bad("missing or mistyped fields"))?;
            if p.dklen != DKLEN {
                return Err(bad("dklen must be 32"));
            }
            if !p.n.is_power_of_two() || p.n < 2 || p.r == 0 || p.p == 0 {
                return Err(bad("n must be a power of two above 1, r and p positive"));
            }
            let (n, r, pp) = (p.n, u64::from(p.r), u64::from(p.p));
            let memory = n.checked_mul(r).and_then(|v| v.checked_mul(128));
            let work = n.checked_mul(r).and_then(|v| v.checked_mul(pp));
            if memory.is_none_or(|m| m > MAX_SCRYPT_MEMORY)
                || work.is_none_or(|w| w > MAX_SCRYPT_WORK)
            {
                return Err(bad("scrypt cost above the accepted bound"));
            }
            let salt = decode_salt(&p.salt)?;
            // n is a power of two below 2^30, so its log fits in u8.
            let log_n = u8::try_from(n.trailing_zeros()).map_err(|_| bad("n"))?;
            scrypt_key(passphrase, &salt, log_n, p.r, p.p)
        }
        "pbkdf2" => {
            let p: Pbkdf2Params = serde_json::from_value(params.clone())
                .map_err(|_| bad("missing or mistyped fields"))?;
            if p.prf != "hmac-sha256" {
                return Err(KeystoreError::UnsupportedKdf);
            }
            if p.dklen != DKLEN {
                return Err(bad("dklen must be 32"));
            }
            if p.c == 0 || p.c > MAX_PBKDF2_ROUNDS {
                return Err(bad("pbkdf2 iteration count out of bounds"));
            }
            let salt = decode_salt(&p.salt)?;
            let mut out = Zeroizing::new([0u8; 32]);
            pbkdf2::pbkdf2_hmac::<sha2::Sha256>(passphrase, &salt, p.c, out.as_mut_slice());
            Ok(out)
        }
        _ => Err(KeystoreError::UnsupportedKdf),
    }
}

/// scrypt with a 32-byte output.
pub(super) fn scrypt_key(
    passphrase: &[u8],
    salt: &[u8],
    log_n: u8,
    r: u32,
    p: u32,
) -> Result<Zeroizing<[u8; 32]>, KeystoreError> {
    let params = scrypt::Params::new(log_n, r, p)
        .map_err(|_| KeystoreError::InvalidKdfParams("rejected by scrypt"))?;
    let mut out = Zeroizing::new([0u8; 32]);
    scrypt::scrypt(passphrase, salt, &params, out.as_mut_slice())
        .map_err(|_| KeystoreError::Crypto)?;
    Ok(out)
}

fn decode_salt(text: &str) -> Result<Vec<u8>, KeystoreError> {
    let text = text.strip_prefix("0x").unwrap_or(text);
    let salt = hex::decode(text).map_err(|_| KeystoreError::InvalidField("salt"))?;
    if salt.len() > MAX_SALT_LEN {
        return Err(KeystoreError::InvalidField("salt"));
    }
    Ok(salt)
}
