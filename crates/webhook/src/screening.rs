//! KYT screening results as signed facts: the decision the signer takes before it signs a
//! withdrawal of an asset whose trust statement requires a KYT pass (and that the approvals
//! service answers approvers with).
//!
//! A screening provider delivers `kyt.result` as a Standard Webhooks request signed with `v1a`
//! (Ed25519). The inbox keeps the delivery whole next to the result (event id, timestamp, raw
//! body and the signature that verified), so a result counts only when anyone can verify it
//! again with a `KYT` key the tenant's signed trust statement names: the inbox's login, or anyone
//! who can write its tables, can record a result but cannot make one count. Evidence in, verdict
//! out; no I/O.

use opledger_domain::approval::{KeyKind, TrustStatement, signature, verify};
use opledger_domain::ids::OperationId;

use crate::event::{self, Event, KytVerdict, Parsed};
use crate::verify::signed_content;

/// One stored screening result with the delivery it came in.
#[derive(Debug, Clone, Copy)]
pub struct StoredScreening<'a> {
    /// The `webhook-id` it was delivered with.
    pub event_id: &'a str,
    /// The `webhook-timestamp`, unix seconds (signed in its canonical decimal form).
    pub timestamp: i64,
    /// The raw body, exactly as received.
    pub body: &'a [u8],
    /// The `v1a` signature that verified when it was received; `None` when the delivery was
    /// signed with a shared secret (`v1`), which proves nothing to anyone but the inbox.
    pub signature: Option<&'a [u8]>,
}

/// What the stored screening results establish about a withdrawal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screening {
    /// At least one signed pass and no signed failure.
    Passed,
    /// A signed failure (whatever else was recorded).
    Failed,
    /// No result signed by a KYT key of the trust statement.
    Missing,
}

/// Why the stored screening results refuse the withdrawal outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScreeningRefusal {
    /// A delivery signed by a KYT key of the trust statement is recorded on this withdrawal but
    /// is not a `kyt.result` about it: a provider's genuine signature moved onto another
    /// withdrawal's row. Evidence of tampering, never ignored.
    #[error("a signed screening result recorded on the withdrawal is about something else")]
    Misplaced,
}

/// The verdict on a withdrawal's stored screening results under `trust`.
///
/// A result counts only when its signature verifies (strict Ed25519) over
/// `{event_id}.{timestamp}.{body}` with an active `KYT` key of `trust`, and its body is a
/// `kyt.result` naming `operation`. Unsigned results and signatures no KYT key verifies do not
/// count (they prove nothing); a verified delivery about anything else refuses.
pub fn judge(
    trust: &TrustStatement,
    operation: OperationId,
    screenings: &[StoredScreening<'_>],
) -> Result<Screening, ScreeningRefusal> {
    let keys: Vec<_> = trust
        .keys()
        .filter(|k| k.kind == KeyKind::Kyt)
        .map(|k| k.public_key)
        .collect();
    let (mut passed, mut failed) = (false, false);
    for s in screenings {
        let Some(sig) = s.signature.and_then(|sig| signature(sig).ok()) else {
            continue;
        };
        let message = signed_content(s.event_id, &s.timestamp.to_string(), s.body);
        if !keys.iter().any(|key| verify(key, &message, &sig).is_ok()) {
            continue;
        }
        match event::parse(s.body) {
            Ok(Parsed::Known(Event::KytResult(result))) if result.operation_id() == operation => {
                match result.result() {
                    KytVerdict::Fail => failed = true,
                    KytVerdict::Pass => passed = true,
                }
            }
            _ => return Err(ScreeningRefusal::Misplaced),
        }
    }
    Ok(match (failed, passed) {
        (true, _) => Screening::Failed,
        (false, true) => Screening::Passed,
        (false, false) => Screening::Missing,
    })
}

#[cfg(test)]
mod tests;
