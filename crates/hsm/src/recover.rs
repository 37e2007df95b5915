//! From a token's raw ECDSA answer to an Ethereum signature, with no token involved (pure): the
//! 64 bytes r||s `CKM_ECDSA` returns, normalised to the lower half of the curve order, with the
//! recovery id found by recovering against the token's public key, and checked by the same
//! recovery the chain readers use.

use alloy_primitives::{Address, B256, Signature};
use k256::ecdsa::{RecoveryId, Signature as EcdsaSignature, VerifyingKey};

/// Why a token's answer is no signature of the key over the hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecoverError {
    /// Not 64 bytes of r||s, or r or s out of range.
    #[error("the token's answer is not an r||s ECDSA signature")]
    Malformed,
    /// Neither recovery id gives the token's public key: the answer is not its key's signature of
    /// this hash.
    #[error("the token's signature does not recover to its public key")]
    NotThisKey,
}

/// The Ethereum signature of `hash` from the token's `raw` answer (r||s, 32 bytes each), for the
/// key whose public key is `public` (and address `address`). A high s is replaced by its
/// complement (the parity flips with it; trial recovery finds it); the result must recover to
/// `address` through alloy's recovery (libsecp256k1), as every reader of the chain recovers it.
pub fn ethereum_signature(
    raw: &[u8],
    hash: &B256,
    public: &VerifyingKey,
    address: Address,
) -> Result<Signature, RecoverError> {
    let signature = EcdsaSignature::from_slice(raw).map_err(|_| RecoverError::Malformed)?;
    let signature = signature.normalize_s().unwrap_or(signature);
    for id in [0_u8, 1] {
        let Some(recovery) = RecoveryId::from_byte(id) else {
            continue;
        };
        let recovered = VerifyingKey::recover_from_prehash(hash.as_slice(), &signature, recovery);
        if !recovered.is_ok_and(|key| key == *public) {
            continue;
        }
        let ethereum = Signature::from((signature, recovery));
        return match ethereum.recover_address_from_prehash(hash) {
            Ok(recovered) if recovered == address => Ok(ethereum),
            _ => Err(RecoverError::NotThisKey),
        };
    }
    Err(RecoverError::NotThisKey)
}

/// The public key in a token's `CKA_EC_POINT`: the uncompressed point 04||X||Y, either wrapped in
/// a DER OCTET STRING (`04 41 04||X||Y`, as PKCS#11 specifies and SoftHSM2 returns) or bare.
pub fn public_key_of_ec_point(point: &[u8]) -> Option<VerifyingKey> {
    let sec1 = match point {
        [0x04, 0x41, rest @ ..] if rest.len() == 65 => rest,
        bare if bare.len() == 65 => bare,
        _ => return None,
    };
    VerifyingKey::from_sec1_bytes(sec1).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::ecdsa::SigningKey;
    use k256::ecdsa::signature::hazmat::PrehashSigner;

    fn key(seed: u8) -> SigningKey {
        let Ok(key) = SigningKey::from_slice(&[seed; 32]) else {
            panic!("a valid scalar");
        };
        key
    }

    /// r||s of `key` over `hash`, with s made high when `high`.
    fn raw(key: &SigningKey, hash: &B256, high: bool) -> Vec<u8> {
        let signed: Result<EcdsaSignature, _> = key.sign_prehash(hash.as_slice());
        let Ok(signed) = signed else {
            panic!("k256 signs");
        };
        let signed = signed.normalize_s().unwrap_or(signed);
        let (r, s) = signed.split_scalars();
        let s = if high { -*s } else { *s };
        let Ok(out) = EcdsaSignature::from_scalars(r.to_bytes(), s.to_bytes()) else {
            panic!("scalars");
        };
        out.to_bytes().to_vec()
    }

    #[test]
    fn low_and_high_s_answers_give_the_same_low_s_signature_recovering_to_the_key() {
        let key = key(7);
        let public = *key.verifying_key();
        let address = Address::from_public_key(&public);
        for n in 0_u8..64 {
            let hash = B256::from([n; 32]);
            let low = ethereum_signature(&raw(&key, &hash, false), &hash, &public, address);
            let high = ethereum_signature(&raw(&key, &hash, true), &hash, &public, address);
            let Ok(low) = low else {
                panic!("{low:?}");
            };
            assert_eq!(high, Ok(low), "{n}");
            // Low s: at most half the order (EIP-2).
            assert!(low.normalize_s().is_none(), "{n}");
            assert_eq!(low.recover_address_from_prehash(&hash).ok(), Some(address));
        }
    }

    #[test]
    fn another_keys_signature_or_garbage_is_refused() {
        let (key, other) = (key(7), key(8));
        let public = *key.verifying_key();
        let address = Address::from_public_key(&public);
        let hash = B256::from([3; 32]);
        assert_eq!(
            ethereum_signature(&raw(&other, &hash, false), &hash, &public, address),
            Err(RecoverError::NotThisKey)
        );
        // The right signature of another hash is no signature of this one.
        let elsewhere = B256::from([4; 32]);
        assert_eq!(
            ethereum_signature(&raw(&key, &elsewhere, false), &hash, &public, address),
            Err(RecoverError::NotThisKey)
        );
        for bad in [vec![0_u8; 64], vec![1_u8; 63], vec![0xff; 64]] {
            assert_eq!(
                ethereum_signature(&bad, &hash, &public, address),
                Err(RecoverError::Malformed)
            );
        }
    }

    #[test]
    fn the_ec_point_is_read_wrapped_or_bare() {
        let public = *key(9).verifying_key();
        let bare = public.to_encoded_point(false).as_bytes().to_vec();
        let mut wrapped = vec![0x04, 0x41];
        wrapped.extend_from_slice(&bare);
        assert_eq!(public_key_of_ec_point(&wrapped), Some(public));
        assert_eq!(public_key_of_ec_point(&bare), Some(public));
        assert_eq!(public_key_of_ec_point(&wrapped[..66]), None);
        assert_eq!(public_key_of_ec_point(&[0x04, 0x41]), None);
    }
}
