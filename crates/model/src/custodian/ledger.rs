//! The store as the custodian path sees it: the operation's state and hold, the leases (the
//! claim's on the operation row, the follow's in `custodian_follows`), the sends of the request
//! (numbered by the store, `begin_custodian_send`), the provider's records the executor stored, the executor's
//! proposals and the witness's attestations. Every move goes through
//! `opledger_domain::state::check_transition` with the store's compare-and-set on the state, the
//! hold effect it returns applied; a release only when the release rule (the database's
//! `opledger_release_witnessed`, or a mutant) allows it over what is recorded.

use opledger_domain::custodian::{ProviderStatus, Record, StoredRecord};
use opledger_domain::state::{Actor, HoldEffect, OperationState, check_transition};

use super::decisions::ReleaseRule;
use super::ghost::{Ghost, violation};
use super::provider::{Candidate, Reference, Txn};

/// The funds held for the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hold {
    /// Held.
    Held,
    /// Released back to the account.
    Released,
    /// Consumed by the payment.
    Settled,
}

/// Why the executor escalated the operation to an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Escalation {
    /// `CUSTODIAN_REFUSED`: the first request was refused (FAILED_TERMINAL).
    Refused,
    /// `CUSTODIAN_NO_LOOKUP`: the provider has no lookup; an operator resolves it.
    NoLookup,
    /// `CUSTODIAN_TRANSACTION_CONTRADICTED`: the chain shows another transfer (security).
    Contradicted,
}

/// A provider record as stored, its hash as a small tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rec {
    /// Its status.
    pub status: ProviderStatus,
    /// Its transaction hash, as the byte the hash repeats.
    pub hash: Option<u8>,
    /// Whether it named a replaced hash.
    pub replaced: bool,
    /// Inserted by a compromised login, not found by a lookup (a row of its own).
    pub forged: bool,
}

impl Rec {
    /// The record a lookup of `txn` returns, as stored.
    pub fn of(txn: &Txn) -> Rec {
        let record = txn.record();
        Rec {
            status: record.status,
            hash: record.tx_hash.map(|h| h[0]),
            replaced: txn.replaced,
            forged: false,
        }
    }

    /// The domain's record.
    pub fn record(&self) -> Record {
        Record {
            status: self.status,
            tx_hash: self.hash.map(|h| [h; 32]),
        }
    }

    /// Terminal without a hash, by the database's literal list (`CANCELLED`, `BLOCKED`,
    /// `REJECTED`, `FAILED` with no hash and no replaced hash): what the properties judge a
    /// release by, written apart from the domain's classification.
    pub fn terminal_without_hash(&self) -> bool {
        self.hash.is_none()
            && !self.replaced
            && matches!(
                self.status,
                ProviderStatus::Cancelled
                    | ProviderStatus::Blocked
                    | ProviderStatus::Rejected
                    | ProviderStatus::Failed
            )
    }
}

/// What became of a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// Applied.
    Done,
    /// The state changed since it was read: nothing written.
    Conflict,
    /// The transition table refuses it for the actor: nothing written.
    Illegal,
    /// The release rule refuses the release: nothing written.
    RuleRefused,
}

/// The store's rows of the operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ledger {
    /// The operation's state.
    pub state: OperationState,
    /// The held funds.
    pub hold: Hold,
    /// The instance holding a live claim lease on the operation row (`lease_owner`, taken by the
    /// claim, renewed by the persist, cleared by any other move or when it lapses).
    pub owner: Option<u8>,
    /// The instance holding a live follow lease (`custodian_follows`, taken for a pass over a
    /// SIGNED, BROADCAST or UNKNOWN operation, given back at its end or lapsed).
    pub follower: Option<u8>,
    /// Sends of the request recorded (`custodian_sends`): the next one is numbered `sends + 1`.
    pub sends: u8,
    /// The reference of the stored request (ours; a mutant may store another).
    pub reference: Reference,
    /// The provider's records, each distinct content once (id = index + 1): a lookup that finds
    /// what an earlier one found adds nothing the release rule reads.
    pub records: Vec<Rec>,
    /// Proposed records, bit `id - 1`.
    pub proposed: u16,
    /// The witness's attestations: a record id and the status its own lookup found.
    pub attested: Vec<(u8, ProviderStatus)>,
    /// Proposals the witness refused for good, bit `id - 1`.
    pub refused: u16,
    /// The escalation recorded.
    pub escalation: Option<Escalation>,
    /// The listed transaction bound to the operation (`no_lookup`: `custodian_bindings`, once,
    /// by an operator or the compromised login).
    pub bound: Option<Candidate>,
    /// The transaction the provider's accepted answer to our request named (`no_lookup`:
    /// `custodian_answers.provider_id`), followed until an operator binds another.
    pub answered: Option<Candidate>,
    /// The foreign transaction is bound to the other withdrawal (its own row in
    /// `custodian_bindings`): that withdrawal's settlement accounts for it.
    pub foreign_bound_elsewhere: bool,
}

impl Ledger {
    /// An APPROVED custodian withdrawal, its funds held.
    pub fn approved() -> Ledger {
        Ledger {
            state: OperationState::Approved,
            hold: Hold::Held,
            owner: None,
            follower: None,
            sends: 0,
            reference: Reference::Ours,
            records: Vec::new(),
            proposed: 0,
            attested: Vec::new(),
            refused: 0,
            escalation: None,
            bound: None,
            answered: None,
            foreign_bound_elsewhere: false,
        }
    }

    /// The transaction the operation follows without lookup: the one bound, else the one the
    /// provider's answer named.
    pub fn followed(&self) -> Option<Candidate> {
        self.bound.or(self.answered)
    }

    /// Whether `candidate` is bound to another withdrawal.
    pub fn bound_elsewhere(&self, candidate: Candidate) -> bool {
        candidate == Candidate::Foreign && self.foreign_bound_elsewhere
    }

    /// Whether the database takes a binding of the operation to `candidate` now (migration 37's
    /// trigger and keys, whoever inserts it): none yet (one per withdrawal, never changed), the
    /// operation BROADCAST or UNKNOWN, and the transaction not bound to another withdrawal.
    pub fn may_bind(&self, candidate: Candidate) -> bool {
        self.bound.is_none()
            && matches!(
                self.state,
                OperationState::Broadcast | OperationState::Unknown
            )
            && !self.bound_elsewhere(candidate)
    }

    /// Whether the database takes a binding of the other withdrawal to the foreign transaction
    /// now: not bound yet, and not bound to this operation (one withdrawal per transaction).
    pub fn may_bind_elsewhere(&self) -> bool {
        !self.foreign_bound_elsewhere && self.bound != Some(Candidate::Foreign)
    }

    /// Stores `rec`; its id.
    pub fn record(&mut self, rec: Rec) -> u8 {
        if let Some(i) = self.records.iter().position(|r| *r == rec) {
            return id(i);
        }
        self.records.push(rec);
        id(self.records.len() - 1)
    }

    /// The stored record `id`.
    pub fn rec(&self, id: u8) -> Option<Rec> {
        self.records.get(usize::from(id).checked_sub(1)?).copied()
    }

    /// Records a proposal of record `id`.
    pub fn propose(&mut self, id: u8) {
        if (1..=16).contains(&id) {
            self.proposed |= 1 << (id - 1);
        }
    }

    /// Whether record `id` is proposed.
    pub fn is_proposed(&self, id: u8) -> bool {
        (1..=16).contains(&id) && self.proposed & (1 << (id - 1)) != 0
    }

    /// Whether record `id` is attested.
    pub fn is_attested(&self, id: u8) -> bool {
        self.attested.iter().any(|(a, _)| *a == id)
    }

    /// Whether the witness refused the proposal of record `id`.
    pub fn is_refused(&self, id: u8) -> bool {
        (1..=16).contains(&id) && self.refused & (1 << (id - 1)) != 0
    }

    /// Records the witness's refusal of the proposal of record `id`.
    pub fn refuse(&mut self, id: u8) {
        if (1..=16).contains(&id) {
            self.refused |= 1 << (id - 1);
        }
    }

    /// Whether any stored record named a transaction hash or a replaced one.
    pub fn ever_broadcast(&self) -> bool {
        self.records.iter().any(|r| r.hash.is_some() || r.replaced)
    }

    /// Records the witness's attestation of record `id` with the status it found.
    pub fn attest(&mut self, id: u8, status: ProviderStatus) {
        if self.is_proposed(id) && !self.is_attested(id) {
            self.attested.push((id, status));
            self.attested.sort_by_key(|(a, _)| *a);
        }
    }

    /// The records as the domain's rule reads them.
    pub fn stored_records(&self) -> Vec<StoredRecord> {
        (0..self.records.len())
            .zip(&self.records)
            .map(|(i, r)| StoredRecord {
                record_id: i64::from(id(i)),
                record: r.record(),
                replaced: r.replaced,
            })
            .collect()
    }

    fn proposals(&self) -> Vec<i64> {
        (1..=16u8)
            .filter(|i| self.is_proposed(*i))
            .map(i64::from)
            .collect()
    }

    fn attestations(&self) -> Vec<(i64, ProviderStatus)> {
        self.attested
            .iter()
            .map(|(i, s)| (i64::from(*i), *s))
            .collect()
    }

    /// Whether a proposed record, terminal without a hash, is attested with its own status:
    /// written over the rows, not through any release rule.
    pub fn attested_unsent_record(&self) -> bool {
        self.attested.iter().any(|(i, status)| {
            self.is_proposed(*i)
                && self
                    .rec(*i)
                    .is_some_and(|r| r.terminal_without_hash() && r.status == *status)
        })
    }

    /// `begin_custodian_send` for instance `i`: a send is recorded, numbered `sends + 1`, only
    /// while the operation is SIGNED, BROADCAST or UNKNOWN and `i` holds a live lease on it (the
    /// claim's or the follow's). `None`: nothing recorded, nothing may be sent.
    pub fn send_number(&self, i: u8) -> Option<u8> {
        let live = matches!(
            self.state,
            OperationState::Signed | OperationState::Broadcast | OperationState::Unknown
        );
        let leased = self.owner == Some(i) || self.follower == Some(i);
        (live && leased).then_some(self.sends + 1)
    }

    /// Moves the operation from `from` to `to` as `actor`, when it is still in `from`; the hold
    /// effect `check_transition` returns is applied, a release only when `rule` allows it.
    pub fn transition(
        &mut self,
        from: OperationState,
        to: OperationState,
        actor: Actor,
        rule: ReleaseRule,
        ghost: &mut Ghost,
    ) -> Moved {
        if self.state != from {
            return Moved::Conflict;
        }
        let Ok(effect) = check_transition(from, to, actor) else {
            ghost.violations |= violation::ILLEGAL_MOVE;
            return Moved::Illegal;
        };
        if effect == HoldEffect::Release {
            if !rule(
                &self.stored_records(),
                &self.proposals(),
                &self.attestations(),
            ) {
                return Moved::RuleRefused;
            }
            if !self.attested_unsent_record() {
                ghost.violations |= violation::RELEASED_WITHOUT_ATTESTED_RECORD;
            }
        }
        let (before, after) = match effect {
            HoldEffect::Keep => (self.hold, self.hold),
            HoldEffect::Release => (Hold::Held, Hold::Released),
            HoldEffect::Settle => (Hold::Held, Hold::Settled),
            HoldEffect::Reopen => (self.hold, Hold::Held),
        };
        if self.hold != before || (effect == HoldEffect::Reopen && self.hold == Hold::Held) {
            ghost.violations |= violation::HOLD_EFFECT_ON_WRONG_HOLD;
        }
        self.hold = after;
        self.state = to;
        // A move without a lease of its own clears the row's (the claim and the persist set it
        // again).
        self.owner = None;
        Moved::Done
    }
}

fn id(index: usize) -> u8 {
    u8::try_from(index + 1).unwrap_or(u8::MAX)
}
