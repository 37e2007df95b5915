//! An operation's attempts as the watcher and the reconciler judge them: each attempt's role from
//! its decoded, signature-recovered bytes ([`opledger_domain::evidence::role_of`]), checked against
//! its stored kind.

use crate::signer::decode;
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
