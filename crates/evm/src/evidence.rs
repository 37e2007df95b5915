//! An operation's attempts as the watcher and the reconciler judge them: each attempt's role from
//! its decoded, signature-recovered bytes ([`opledger_domain::evidence::role_of`]), checked against
//! its stored kind.

use crate::signer::{DecodedTransaction, decode};
use alloy_primitives::{Address, B256, keccak256};
use opledger_domain::evidence::{
    AttemptDefect, AttemptKind, ContentMismatch, ExpectedTransfer, Role, parse_address, role_of,
};

/// The role of each attempt (`(raw bytes, stored kind)`, oldest first) against the payload's
/// recipient and amount. The original fixes chain, sender, nonce and asset (the signer checked
/// it against its own configuration before signing), so a replacement from another sender, at
/// another nonce, paying anyone else or anything else, is a defect; an undecodable original or
/// recipient makes every attempt defective.
pub fn roles(
    attempts: &[(&[u8], AttemptKind)],
    destination: &str,
    amount: u128,
) -> Vec<Result<Role, AttemptDefect>> {
    let decoded: Vec<Option<DecodedTransaction>> =
        attempts.iter().map(|(raw, _)| decode(raw).ok()).collect();
    let kinds: Vec<AttemptKind> = attempts.iter().map(|(_, kind)| *kind).collect();
    roles_of(&decoded, &kinds, destination, amount)
}

/// [`roles`] of attempts already decoded (`None`: undecodable), each signature recovered once.
fn roles_of(
    decoded: &[Option<DecodedTransaction>],
    kinds: &[AttemptKind],
    destination: &str,
    amount: u128,
) -> Vec<Result<Role, AttemptDefect>> {
    let defect = AttemptDefect::Content(ContentMismatch::Neither);
    let original = decoded
        .first()
        .and_then(Option::as_ref)
        .map(|d| d.content());
    let (Some(original), Some(recipient)) = (original, parse_address(destination)) else {
        return decoded.iter().map(|_| Err(defect)).collect();
    };
    let expected = ExpectedTransfer::from_original(&original, recipient, amount);
    decoded
        .iter()
        .zip(kinds)
        .map(|(decoded, kind)| {
            let decoded = decoded.as_ref().ok_or(defect)?;
            let role = role_of(&decoded.content(), &expected)?;
            Ok(kind.check(role)?)
        })
        .collect()
}

pub use opledger_domain::evidence::StoredAttempt;

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
    // Each attempt decoded (and its signature recovered, the costly part) once.
    let decoded: Vec<Option<DecodedTransaction>> =
        attempts.iter().map(|a| decode(a.raw).ok()).collect();
    let kinds: Vec<AttemptKind> = attempts.iter().map(|a| a.kind).collect();
    let hashes: Vec<B256> = attempts.iter().map(|a| keccak256(a.raw)).collect();
    let roles = roles_of(&decoded, &kinds, destination, amount)
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
    let sender = decoded.first().and_then(Option::as_ref).map(|d| d.from);
    Judged {
        roles,
        hashes,
        sender,
    }
}

/// [`judge`] across passes: a judgement is kept for as long as its key's inputs (every attempt's
/// bytes, stored kind and stored hash, the recipient and the amount) stay byte for byte the same,
/// checked by a digest of them each time, so each attempt's signature is recovered once rather
/// than once per pass. What a pass did not judge is forgotten at [`Judgements::end_pass`].
#[derive(Debug)]
pub struct Judgements<K> {
    kept: std::collections::HashMap<K, (B256, Judged)>,
    seen: std::collections::HashMap<K, (B256, Judged)>,
}

impl<K> Default for Judgements<K> {
    fn default() -> Self {
        Judgements {
            kept: std::collections::HashMap::new(),
            seen: std::collections::HashMap::new(),
        }
    }
}

/// [`judge`] of `attempts` against the withdrawal they pay: its destination and amount.
pub fn judge_payout(
    attempts: &[StoredAttempt<'_>],
    payload: &opledger_domain::payload::WithdrawalPayload,
) -> Judged {
    judge(attempts, payload.destination.as_str(), payload.amount.get())
}

impl<K: std::hash::Hash + Eq + Clone> Judgements<K> {
    /// [`judge`] of these inputs, reused when `key`'s inputs are unchanged since it was judged.
    pub fn judge(
        &mut self,
        key: &K,
        attempts: &[StoredAttempt<'_>],
        destination: &str,
        amount: u128,
    ) -> Judged {
        let digest = digest(attempts, destination, amount);
        let judged = match self.kept.remove(key).or_else(|| self.seen.remove(key)) {
            Some((kept, judged)) if kept == digest => judged,
            _ => judge(attempts, destination, amount),
        };
        self.seen.insert(key.clone(), (digest, judged.clone()));
        judged
    }

    /// Forgets the judgements of keys not judged since the previous call.
    pub fn end_pass(&mut self) {
        self.kept = std::mem::take(&mut self.seen);
    }
}

/// A digest of everything [`judge`] reads, each part length-prefixed.
fn digest(attempts: &[StoredAttempt<'_>], destination: &str, amount: u128) -> B256 {
    let mut bytes =
        Vec::with_capacity(64 + attempts.iter().map(|a| a.raw.len() + 96).sum::<usize>());
    let mut part = |b: &[u8]| {
        bytes.extend_from_slice(&u64::try_from(b.len()).unwrap_or(u64::MAX).to_le_bytes());
        bytes.extend_from_slice(b);
    };
    part(destination.as_bytes());
    part(&amount.to_le_bytes());
    for a in attempts {
        part(a.raw);
        part(a.tx_hash.as_bytes());
        part(&[match a.kind {
            AttemptKind::Original => 0,
            AttemptKind::FeeBump => 1,
            AttemptKind::Cancel => 2,
        }]);
    }
    keccak256(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::{LocalKey, sign};
    use crate::tx::{TransferKind, TransferRequest};
    use alloy_primitives::U256;
    use zeroize::Zeroizing;

    /// A native transfer of `value` wei at `nonce`, signed with a key made of `secret`, and
    /// its recipient.
    fn signed_transfer(
        secret: u8,
        nonce: u64,
        value: u64,
    ) -> Result<(crate::signer::SignedTransaction, Address), Box<dyn std::error::Error>> {
        let key = LocalKey::from_secret_bytes(Zeroizing::new([secret; 32]))?;
        let to: Address = "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc".parse()?;
        let request = TransferRequest {
            chain_id: 31337,
            nonce,
            to,
            kind: TransferKind::Native {
                value: U256::from(value),
            },
            gas_limit: 21_000,
            max_fee_per_gas: 2,
            max_priority_fee_per_gas: 1,
        };
        Ok((sign(&request, &key)?, to))
    }

    #[test]
    fn a_stored_hash_that_is_not_the_bytes_hash_is_a_defect()
    -> Result<(), Box<dyn std::error::Error>> {
        let (signed, to) = signed_transfer(7, 0, 500)?;
        let right = format!("{:#x}", signed.hash);
        let attempt = |tx_hash| StoredAttempt {
            raw: &signed.raw,
            kind: AttemptKind::Original,
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

    #[test]
    fn a_kept_judgement_is_reused_only_for_the_same_inputs_and_forgotten_when_unseen()
    -> Result<(), Box<dyn std::error::Error>> {
        let (signed, to) = signed_transfer(9, 3, 700)?;
        let hash = format!("{:#x}", signed.hash);
        let destination = format!("{to:#x}");
        let attempt = |kind| StoredAttempt {
            raw: &signed.raw,
            kind,
            tx_hash: &hash,
        };
        let mut kept = Judgements::default();
        let fresh = |kind, amount| judge(&[attempt(kind)], &destination, amount);
        let same = |j: &Judged, k: &Judged| {
            j.roles == k.roles && j.hashes == k.hashes && j.sender == k.sender
        };
        let first = kept.judge(&1, &[attempt(AttemptKind::Original)], &destination, 700);
        assert!(same(&first, &fresh(AttemptKind::Original, 700)));
        kept.end_pass();
        // Same inputs: the same judgement. Another amount or kind: judged again, not reused.
        let again = kept.judge(&1, &[attempt(AttemptKind::Original)], &destination, 700);
        assert!(same(&again, &first));
        let other_amount = kept.judge(&1, &[attempt(AttemptKind::Original)], &destination, 701);
        assert!(same(&other_amount, &fresh(AttemptKind::Original, 701)));
        assert!(other_amount.roles[0].is_err(), "not the approved amount");
        let relabelled = kept.judge(&1, &[attempt(AttemptKind::Cancel)], &destination, 701);
        assert!(
            relabelled.roles[0].is_err(),
            "a transfer stored as a cancel"
        );
        kept.end_pass();
        assert_eq!(kept.kept.len(), 1);
        // A pass that does not judge key 1 forgets it.
        kept.end_pass();
        assert!(kept.kept.is_empty());
        Ok(())
    }
}
