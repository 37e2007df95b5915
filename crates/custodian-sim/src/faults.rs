//! The seeded fault schedule: rules, their parameters, and whether a rule fires for a call.
//!
//! Whether rule `i` fires for the `n`th call of a kind for a reference is a pure function of
//! `(seed, i, profile, reference, kind, n)`: the first 8 bytes of a SHA-256 of those, read as a
//! number in `[0, 1)`, compared with the rule's `rate`. The same seed gives the same faults for
//! the same references whatever the interleaving of concurrent requests.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::profile::{Endpoint, Profile};

/// A fault schedule: the config's `faults` and the body of `POST /sim/faults`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// The seed of every decision.
    #[serde(default)]
    pub seed: u64,
    /// The rules, in order; for the outcome of a transfer, the first rule that fires wins.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// One rule: a fault, where it applies and how often.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rule {
    /// Only requests of this profile (all profiles when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// The probability that the rule fires for a call, in `[0, 1]`; `1.0` (the default) always.
    #[serde(default = "always")]
    pub rate: f64,
    /// Only the `nth` call (1-based) of its kind for a reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<u32>,
    /// The fault.
    #[serde(flatten)]
    pub fault: Fault,
}

fn always() -> f64 {
    1.0
}

fn status_500() -> u16 {
    500
}

fn one_sec() -> u64 {
    1
}

/// What a fault does. Faults about a transfer's course (lags, outcome, webhooks) are decided
/// when the create call that stores the transfer is accepted; the others per call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fault {
    /// 1. Store, then close the connection without answering (`delay_ms` absent) or answer
    ///    after `delay_ms` real milliseconds (past the client's timeout).
    DropResponse {
        /// Answer late instead of closing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delay_ms: Option<u64>,
    },
    /// 2. Store, then answer this 5xx status.
    ErrorAfterAccept {
        /// 500, 502, 503...
        #[serde(default = "status_500")]
        status: u16,
    },
    /// 3. A create for a reference already stored is answered this way instead of the profile's
    ///    default.
    Duplicate {
        /// How.
        answer: DuplicateAnswer,
    },
    /// 4. Lookups answer not found for `secs` after the accept (on top of the profile's lag).
    LookupLag {
        /// Seconds of the double's clock.
        secs: u64,
    },
    /// 5. Reads show the status the record had `secs` earlier.
    StatusLag {
        /// Seconds of the double's clock.
        secs: u64,
    },
    /// 7. Held in authorization for `hold_secs` more, then REJECTED (or BLOCKED); nothing sent.
    Reject {
        /// BLOCKED (`BLOCKED_BY_POLICY`) instead of REJECTED (`REJECTED_BY_USER`).
        #[serde(default)]
        blocked: bool,
        /// Another subStatus.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sub_status: Option<String>,
        /// Seconds held after the authorization delay.
        #[serde(default)]
        hold_secs: u64,
    },
    /// 8. FAILED with a hash.
    FailedWithHash {
        /// Mined and paid, or never broadcast.
        variant: FailedVariant,
    },
    /// 9. A provider-side replacement: a second transaction at the same nonce with higher fees
    ///    is the one broadcast; the record's hash changes and the first is kept as replaced.
    Replacement,
    /// 10. `429` with `Retry-After`, before anything is stored.
    RateLimit {
        /// The `Retry-After` value.
        #[serde(default = "one_sec")]
        retry_after_secs: u64,
        /// Which calls (create by default).
        #[serde(default)]
        on: Endpoint,
    },
    /// 11. Prime: the first transaction ends TRANSACTION_RETRIED, never broadcast, and a new one
    ///     (new id) carries the execution.
    Retried,
    /// 6. Every webhook of the transfer is delivered `secs` late.
    WebhookDelay {
        /// Seconds of the double's clock.
        secs: u64,
    },
    /// 6. Every webhook of the transfer is delivered twice.
    WebhookDuplicate,
    /// 6. Webhooks of the transfer are delivered in swapped pairs (a later status first).
    WebhookReorder,
    /// 6. Webhooks of the transfer are signed by a key the receiver does not trust.
    WebhookForged {
        /// Which forgery (Fireblocks); BitGo and Prime use a wrong HMAC secret either way.
        #[serde(default)]
        variant: Forgery,
    },
    /// 6. After the terminal webhook, the first event is sent again, unchanged, `after_secs`
    ///    later.
    WebhookReplay {
        /// Seconds of the double's clock.
        #[serde(default)]
        after_secs: u64,
    },
}

/// How a duplicate create is answered (fault 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DuplicateAnswer {
    /// 400 with the provider's duplicate error (Fireblocks 1438, BitGo DuplicateSequenceIdError).
    Reject,
    /// 409 Conflict, in the provider's error format.
    Conflict,
    /// The first answer replayed.
    Replay,
    /// 400 as after an internal error (Fireblocks 1439).
    AfterError,
}

/// Fault 8's variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailedVariant {
    /// a) mined and paid, but the record says FAILED / INTERNAL_ERROR.
    Mined,
    /// b) signed and its hash reported, never broadcast: FAILED / DROPPED_BY_BLOCKCHAIN.
    NotBroadcast,
}

/// How a forged Fireblocks webhook is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Forgery {
    /// The current key id, a signature by another key.
    #[default]
    WrongKey,
    /// A key id that is not in the JWKS.
    UnknownKid,
}

impl Fault {
    /// The kind's name, as in the schedule.
    pub fn name(&self) -> &'static str {
        match self {
            Fault::DropResponse { .. } => "drop_response",
            Fault::ErrorAfterAccept { .. } => "error_after_accept",
            Fault::Duplicate { .. } => "duplicate",
            Fault::LookupLag { .. } => "lookup_lag",
            Fault::StatusLag { .. } => "status_lag",
            Fault::Reject { .. } => "reject",
            Fault::FailedWithHash { .. } => "failed_with_hash",
            Fault::Replacement => "replacement",
            Fault::RateLimit { .. } => "rate_limit",
            Fault::Retried => "retried",
            Fault::WebhookDelay { .. } => "webhook_delay",
            Fault::WebhookDuplicate => "webhook_duplicate",
            Fault::WebhookReorder => "webhook_reorder",
            Fault::WebhookForged { .. } => "webhook_forged",
            Fault::WebhookReplay { .. } => "webhook_replay",
        }
    }
}

/// One call the schedule is asked about.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The profile called.
    pub profile: Profile,
    /// Our reference (empty for the Prime list).
    pub reference: &'a str,
    /// Create or lookup.
    pub endpoint: Endpoint,
    /// 1-based index of this call among the calls of its kind for the reference.
    pub index: u32,
}

/// A rule that fired: its position in the schedule and its fault.
#[derive(Debug, Clone)]
pub struct Fired {
    /// The rule's index in the schedule.
    pub index: usize,
    /// The fault.
    pub fault: Fault,
}

impl Fired {
    /// The label logged in `/sim/requests`: `kind#index`.
    pub fn label(&self) -> String {
        format!("{}#{}", self.fault.name(), self.index)
    }
}

impl Schedule {
    /// Every rule that fires for `call`, in schedule order.
    pub fn fired(&self, call: Call<'_>) -> Vec<Fired> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(index, rule)| rule.fires(self.seed, *index, call))
            .map(|(index, rule)| Fired {
                index,
                fault: rule.fault.clone(),
            })
            .collect()
    }
}

impl Rule {
    /// Whether this rule (at `index` in a schedule of `seed`) fires for `call`.
    pub fn fires(&self, seed: u64, index: usize, call: Call<'_>) -> bool {
        if self.profile.is_some_and(|p| p != call.profile) {
            return false;
        }
        if self.nth.is_some_and(|n| n != call.index) {
            return false;
        }
        if let Fault::RateLimit { on, .. } = &self.fault {
            if !on.covers(call.endpoint) {
                return false;
            }
        } else if call.endpoint != Endpoint::Create {
            return false;
        }
        draw(seed, index, call) < self.rate
    }
}

/// The decision's pseudo-random number in `[0, 1)`.
pub fn draw(seed: u64, index: usize, call: Call<'_>) -> f64 {
    let mut hash = Sha256::new();
    hash.update(seed.to_be_bytes());
    hash.update((index as u64).to_be_bytes());
    hash.update(call.profile.name().as_bytes());
    hash.update([0]);
    hash.update(call.reference.as_bytes());
    hash.update([0]);
    hash.update(match call.endpoint {
        Endpoint::Create => b"create".as_slice(),
        Endpoint::Lookup | Endpoint::Any => b"lookup".as_slice(),
    });
    hash.update(call.index.to_be_bytes());
    let digest = hash.finalize();
    let mut first = [0_u8; 8];
    first.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(first) >> 11) as f64 / (1_u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(reference: &str, index: u32) -> Call<'_> {
        Call {
            profile: Profile::Fireblocks,
            reference,
            endpoint: Endpoint::Create,
            index,
        }
    }

    #[test]
    fn decisions_are_pure_and_rate_bounded() -> Result<(), serde_json::Error> {
        let schedule: Schedule = serde_json::from_str(
            r#"{"seed":7,"rules":[{"kind":"replacement","rate":0.5},
                {"kind":"drop_response","nth":2},{"kind":"rate_limit","on":"lookup","rate":1}]}"#,
        )?;
        let refs: Vec<String> = (0..200).map(|i| format!("ref-{i}")).collect();
        let first: Vec<usize> = refs
            .iter()
            .map(|r| schedule.fired(call(r, 1)).len())
            .collect();
        let again: Vec<usize> = refs
            .iter()
            .rev()
            .map(|r| schedule.fired(call(r, 1)).len())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        assert_eq!(first, again);
        let fired = first.iter().filter(|n| **n == 1).count();
        assert!((60..140).contains(&fired), "{fired} of 200 at rate 0.5");
        assert!(schedule.fired(call("x", 2)).iter().any(|f| f.index == 1));
        assert!(schedule.fired(call("x", 3)).iter().all(|f| f.index != 1));
        let lookup = Call {
            endpoint: Endpoint::Lookup,
            ..call("x", 1)
        };
        assert_eq!(schedule.fired(lookup).len(), 1);
        Ok(())
    }
}
