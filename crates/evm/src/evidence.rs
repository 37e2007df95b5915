//! An operation's attempts as the watcher and the reconciler judge them: each attempt's role from
//! its decoded, signature-recovered bytes ([`opledger_domain::evidence::role_of`]), checked against
//! its stored kind.

use crate::signer::decode;
use alloy_primitives::{Address, B256, keccak256};
use opledger_domain::evidence::{
    AttemptDefect, ContentMismatch, ExpectedTransfer, Role, StoredKind, parse_address, role_of,
};

/// The role of each attempt (`(raw bytes, stored kind)`, oldest first) against the payload's
/// recipient and amount. The original fixes chain, sender, nonce and asset (the signer checked
/// it against its own configuration before signing), so a replacement from another sender, at
/// another nonce, paying anyone else or anything else, is a defect; an undecodable original or
/// recipient makes every attempt defective.
pub fn roles(
    attempts: &[(&[u8], StoredKind)],
    destination: &str,
    amount: u128,
) -> Vec<Result<Role, AttemptDefect>> {
    let defect = AttemptDefect::Content(ContentMismatch::Neither);
    let original = attempts
        .first()
        .and_then(|(raw, _)| decode(raw).ok())
        .map(|d| d.content());
    let (Some(original), Some(recipient)) = (original, parse_address(destination)) else {
        return attempts.iter().map(|_| Err(defect)).collect();
    };
    let expected = ExpectedTransfer::from_original(&original, recipient, amount);
    attempts
        .iter()
        .map(|(raw, kind)| {
            let decoded = decode(raw).map_err(|_| defect)?;
            let role = role_of(&decoded.content(), &expected)?;
            Ok(kind.check(role)?)
        })
        .collect()
}

/// One stored attempt as a reader of the chain needs it: its bytes, its stored kind and its stored
/// hash (a claim checked against the bytes).
#[derive(Debug, Clone, Copy)]
pub struct StoredAttempt<'a> {
    /// The signed bytes.
    pub raw: &'a [u8],
    /// The kind stored beside them.
    pub kind: StoredKind,
    /// The hash stored beside them (`0x`, lowercase).
    pub tx_hash: &'a str,
}

/// What the chain is asked about an operation's attempts, derived from their bytes alone.
#[derive(Debug, Clone)]
pub struct Judged {
    /// Each attempt's role (oldest first), or why it has none.
    pub roles: Vec<Result<Role, AttemptDefect>>,
    /// Each attempt's transaction hash, computed from its bytes (never the stored column).
    pub hashes: Vec<B256>,
    /// The original's signer, recovered from its signature.
    pub sender: Option<Address>,
}

/// [`roles`] of `attempts`, their hashes computed from their bytes, and the original's recovered
/// sender. An attempt whose stored hash is not the hash of its bytes is a defect: receipts are
/// never looked up by a hash the row merely claims.
pub fn judge(attempts: &[StoredAttempt<'_>], destination: &str, amount: u128) -> Judged {
    let raws: Vec<(&[u8], StoredKind)> = attempts.iter().map(|a| (a.raw, a.kind)).collect();
    let hashes: Vec<B256> = attempts.iter().map(|a| keccak256(a.raw)).collect();
    let roles = roles(&raws, destination, amount)
        .into_iter()
        .zip(attempts.iter().zip(&hashes))
        .map(|(role, (a, hash))| {
            if format!("{hash:#x}") == a.tx_hash.to_ascii_lowercase() {
                role
            } else {
                Err(AttemptDefect::Content(ContentMismatch::Neither))
            }
        })
        .collect();
    let sender = attempts
        .first()
        .and_then(|a| decode(a.raw).ok())
        .map(|d| d.from);
    Judged {
        roles,
        hashes,
        sender,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::{LocalKey, sign};
    use crate::tx::{TransferKind, TransferRequest};
    use alloy_primitives::U256;
    use zeroize::Zeroizing;

    #[test]
    fn a_stored_hash_that_is_not_the_bytes_hash_is_a_defect()
    -> Result<(), Box<dyn std::error::Error>> {
        let key = LocalKey::from_secret_bytes(Zeroizing::new([7_u8; 32]))?;
        let to: Address = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc".parse()?;
        let request = TransferRequest {
            chain_id: 31337,
            nonce: 0,
            to,
            kind: TransferKind::Native {
                value: U256::from(500_u64),
            },
            gas_limit: 21_000,
            max_fee_per_gas: 2,
            max_priority_fee_per_gas: 1,
        };
        let signed = sign(&request, &key)?;
        let right = format!("{:#x}", signed.hash);
        let attempt = |tx_hash| StoredAttempt {
            raw: &signed.raw,
            kind: StoredKind::Original,
            tx_hash,
        };
        let destination = format!("{to:#x}");
        let honest = judge(&[attempt(&right)], &destination, 500);
        assert_eq!(honest.roles, vec![Ok(Role::Transfer)]);
        assert_eq!(honest.hashes, vec![signed.hash]);
        assert_eq!(honest.sender, Some(signed.from));
        let other = format!("{:#x}", B256::repeat_byte(0xab));
        let lying = judge(&[attempt(&other)], &destination, 500);
        assert!(lying.roles[0].is_err(), "a relabelled hash is a defect");
        assert_eq!(
            lying.hashes,
            vec![signed.hash],
            "the bytes' hash is asked, not the row's"
        );
        Ok(())
    }
}
