//! The double's own model of what a provider stores: an operation per reference, one or more
//! provider records (transactions, transfers) for it, each with the history of its states.

use serde::Serialize;

use crate::faults::{FailedVariant, Forgery};
use crate::profile::Profile;

/// The course of a provider record, named after Fireblocks' statuses; each profile shows its own
/// names for them (see `views`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Stage {
    /// Accepted.
    Submitted,
    /// Waiting for the authorization (approval) window.
    PendingAuthorization,
    /// Authorized, waiting for its turn.
    Queued,
    /// Being signed.
    PendingSignature,
    /// Signed; its hash is known; sent to the node.
    Broadcasting,
    /// In a block, fewer confirmations than required.
    Confirming,
    /// Enough confirmations.
    Completed,
    /// Refused by an approver; nothing sent.
    Rejected,
    /// Refused by policy; nothing sent.
    Blocked,
    /// Failed (with or without a hash).
    Failed,
    /// Replaced by a newer record with another hash (BitGo).
    Replaced,
    /// Recreated as a newer record (Prime).
    Retried,
}

impl Stage {
    /// Whether the record never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Stage::Completed
                | Stage::Rejected
                | Stage::Blocked
                | Stage::Failed
                | Stage::Replaced
                | Stage::Retried
        )
    }
}

/// A record's state at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// Status.
    pub stage: Stage,
    /// Sub-status (may be empty).
    pub sub_status: String,
    /// The current hash (lowercase `0x` hex).
    pub tx_hash: Option<String>,
    /// The hash the current one replaced.
    pub replaced_tx_hash: Option<String>,
    /// Every hash reported, oldest first.
    pub hashes: Vec<String>,
    /// Confirmations seen.
    pub confirmations: u64,
    /// When (double's clock, ms).
    pub at_ms: i64,
}

/// One provider record (a Fireblocks transaction, a BitGo transfer, a Prime transaction).
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// The provider's id.
    pub id: String,
    /// When it was created (double's clock, ms).
    pub created_ms: i64,
    /// The first state.
    first: Snapshot,
    /// Later states, oldest first.
    later: Vec<Snapshot>,
}

impl Record {
    /// A new record in `first`.
    pub fn new(id: String, first: Snapshot) -> Record {
        Record {
            id,
            created_ms: first.at_ms,
            first,
            later: Vec::new(),
        }
    }

    /// The current state.
    pub fn current(&self) -> &Snapshot {
        self.later.last().unwrap_or(&self.first)
    }

    /// The state shown at `at_ms`: the latest one not after it, the first one otherwise.
    pub fn as_of(&self, at_ms: i64) -> &Snapshot {
        self.later
            .iter()
            .rev()
            .find(|s| s.at_ms <= at_ms)
            .unwrap_or(&self.first)
    }

    /// Appends a state.
    pub fn push(&mut self, snapshot: Snapshot) {
        self.later.push(snapshot);
    }

    /// Changes the current state in place (confirmation counts: no new status).
    pub fn amend(&mut self, change: impl FnOnce(&mut Snapshot)) {
        match self.later.last_mut() {
            Some(last) => change(last),
            None => change(&mut self.first),
        }
    }
}

/// An answer as it was sent (for replays).
#[derive(Debug, Clone, Serialize)]
pub struct StoredAnswer {
    /// HTTP status.
    pub status: u16,
    /// Body bytes.
    pub body: String,
}

/// How a transfer ends, decided by the fault schedule when it is accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Outcome {
    /// Authorized, sent once, completed.
    #[default]
    Normal,
    /// Held, then REJECTED or BLOCKED; nothing sent.
    Reject {
        /// BLOCKED instead of REJECTED.
        blocked: bool,
        /// The sub-status.
        sub_status: String,
        /// Extra hold after the authorization delay (ms).
        hold_ms: i64,
    },
    /// FAILED with a hash.
    Failed {
        /// Mined or never broadcast.
        variant: FailedVariant,
    },
    /// Replaced at the same nonce by a transaction with higher fees.
    Replacement,
    /// Prime: recreated once before execution.
    Retried,
}

/// What the webhooks of a transfer suffer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WebhookPlan {
    /// Each delivery this late (double's clock, ms).
    pub delay_ms: i64,
    /// Each event delivered twice.
    pub duplicate: bool,
    /// Events delivered in swapped pairs.
    pub reorder: bool,
    /// Events signed by a key the receiver does not trust.
    pub forged: Option<Forgery>,
    /// The first event sent again this long after the terminal one (ms).
    pub replay_after_ms: Option<i64>,
}

/// Everything the schedule decided for a transfer when it was accepted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    /// How it ends.
    pub outcome: Outcome,
    /// Its webhooks.
    pub webhooks: WebhookPlan,
    /// Extra lookup lag (ms).
    pub lookup_lag_ms: i64,
    /// Status lag (ms).
    pub status_lag_ms: i64,
    /// Labels of the rules that decided the above.
    pub applied: Vec<String>,
}

/// What was asked for one reference, and what the provider made of it.
#[derive(Debug, Clone, Serialize)]
pub struct Operation {
    /// The profile.
    pub profile: Profile,
    /// Our reference (externalTxId, sequenceId, idempotency_key).
    pub reference: String,
    /// Destination address, lowercase.
    pub destination: String,
    /// Amount in base units (wei).
    pub amount_wei: u128,
    /// Fireblocks' note.
    pub note: Option<String>,
    /// Prime's activity id.
    pub activity_id: String,
    /// When it was accepted (double's clock, ms).
    pub accepted_ms: i64,
    /// When it was accepted (real time, ms).
    pub accepted_real_ms: i64,
    /// Lookups find it from this moment (double's clock, ms).
    pub visible_from_ms: i64,
    /// The provider records, oldest first (a replacement or a retry adds one).
    pub records: Vec<Record>,
    /// The answer the provider meant for the accepting call (replayed to duplicates).
    pub first_answer: StoredAnswer,
    /// The schedule's decisions.
    pub plan: Plan,
}

impl Operation {
    /// The newest record visible at `at_ms` under the status lag, and the state it shows.
    pub fn shown(&self, now_ms: i64) -> Option<(&Record, &Snapshot)> {
        let at = now_ms.saturating_sub(self.plan.status_lag_ms);
        let record = self
            .records
            .iter()
            .rev()
            .find(|r| r.created_ms <= at)
            .or_else(|| self.records.first())?;
        Some((record, record.as_of(at)))
    }
}
