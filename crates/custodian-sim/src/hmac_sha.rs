//! HMAC-SHA256 (BitGo webhooks, Coinbase Prime request and webhook signatures).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

fn mac(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC takes keys of any length: new_from_slice never fails for it.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => HmacSha256::new(&Default::default()),
    };
    for part in parts {
        mac.update(part);
    }
    mac
}

/// HMAC-SHA256 of the concatenated `parts` under `key`.
pub fn sign(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    mac(key, parts).finalize().into_bytes().to_vec()
}

/// Whether `tag` is the HMAC-SHA256 of the concatenated `parts` under `key` (constant time).
pub fn verify(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    mac(key, parts).verify_slice(tag).is_ok()
}
