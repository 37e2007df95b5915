//! The modelled store: the operation's state, its hold, its attempts as the signer persisted
//! them, the recorded inclusion of a confirmation, the release proposals, attestations and the
//! witness's refusals (migration 28's tables), the release proofs a reorganization removed
//! (migration 31's `release_reorgs`), and the tenant's wallets as the signer holds them. Every
//! state move goes through `opledger_domain::state::check_transition`; a release of the hold goes
//! through the ledger's release rule ([`Store::release_permitted`]), which leaves marked proofs
//! out.

use opledger_domain::evidence::{
    Address, Asset, AttemptDefect, AttemptKind, Call, Escalation, ExpectedTransfer, Hash32,
    Inclusion, ReplacementRequest, Role, TxContent, role_of,
};
use opledger_domain::state::OperationState;
use opledger_domain::witness::{Principal, Record, ReleaseEvidence, release_allowed};

use crate::chain::{NONCE, Wallet};

/// The network's chain id.
pub const CHAIN_ID: u64 = 31_337;
/// The approved amount.
pub const AMOUNT: u128 = 1_000;
/// The approved recipient.
pub const RECIPIENT: Address = [0xC3; 20];
/// At most this many attempts are persisted: the original, a fee bump and a cancel.
pub const MAX_ATTEMPTS: usize = 3;

/// The address of a wallet.
pub fn address(wallet: Wallet) -> Address {
    match wallet {
        Wallet::A => [0xA1; 20],
        Wallet::B => [0xB2; 20],
    }
}

/// One persisted attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    /// The kind stored beside it.
    pub kind: AttemptKind,
    /// The wallet that signed it.
    pub sender: Wallet,
    /// What its bytes do: pay the approved transfer, or a zero-value self-transfer.
    pub content: Role,
    /// What was asked of the signer (`None`: the original).
    pub requested: Option<ReplacementRequest>,
    /// True when it was signed after the wallet rotation.
    pub after_rotation: bool,
}

impl Attempt {
    /// The transaction hash of the attempt stored at `index`: distinct for every attempt (its
    /// bytes differ in content, sender or fees).
    pub fn tx_hash(&self, index: usize) -> Hash32 {
        let mut hash = [0u8; 32];
        hash[0] = 0x7A;
        hash[1] = u8::try_from(index).unwrap_or(u8::MAX);
        hash[2] = address(self.sender)[0];
        hash[3] = match self.content {
            Role::Transfer => 1,
            Role::Cancel => 2,
        };
        hash
    }

    /// The decoded content of its bytes.
    pub fn tx_content(&self) -> TxContent {
        let sender = address(self.sender);
        let (to, value) = match self.content {
            Role::Transfer => (RECIPIENT, AMOUNT),
            Role::Cancel => (sender, 0),
        };
        TxContent {
            chain_id: CHAIN_ID,
            sender,
            nonce: NONCE,
            to,
            value: Some(value),
            call: Call::Empty,
        }
    }
}

/// The funds held for the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hold {
    /// Held.
    Held,
    /// Consumed by the payout.
    Settled,
    /// Given back.
    Released,
}

/// The inclusion a confirmation recorded, for the reorganization check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Confirmation {
    /// The settling attempt.
    pub attempt: u8,
    /// Where it was included, as the evidence said.
    pub inclusion: Inclusion,
}

/// The operation's rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Store {
    /// The operation's state.
    pub state: OperationState,
    /// Its hold.
    pub hold: Hold,
    /// The escalation recorded with FAILED_TERMINAL.
    pub escalation: Option<Escalation>,
    /// Its attempts, oldest first.
    pub attempts: Vec<Attempt>,
    /// The recorded inclusion of a confirmation.
    pub confirmed: Option<Confirmation>,
    /// True once a fee bump was signed (the model allows one).
    pub bumped: bool,
    /// Release proposals (`release_proposals`), one per evidence, in a canonical order.
    pub proposals: Vec<Record>,
    /// The witness's attestations (`release_attestations`), one per evidence, each naming a
    /// recorded proposal, in a canonical order.
    pub attestations: Vec<Record>,
    /// Proposals the witness refused for good (`witness_refusals`): out of its queue.
    pub refusals: Vec<ReleaseEvidence>,
    /// Release proofs the chain watcher found reorganized away (`release_reorgs`, written only by
    /// `opledger_reopen_release`), each naming an attestation, in a canonical order: a marked
    /// proof never releases again.
    pub reorged: Vec<ReleaseEvidence>,
}

/// The index of the attempt whose [`Attempt::tx_hash`] is `hash`, if it is one.
pub fn attempt_of(hash: &Hash32) -> Option<u8> {
    (hash[0] == 0x7A && hash[4..].iter().all(|b| *b == 0)).then_some(hash[1])
}

/// At most this many records in each of the release tables (a bound of the model, far above
/// what one run records).
pub const MAX_RECORDS: usize = 4;

fn order(record: &Record) -> (u64, Hash32, Hash32, &'static str) {
    let e = &record.evidence;
    (
        e.block.number,
        e.block.hash,
        e.tx_hash,
        record.principal.as_str(),
    )
}

/// Adds `record` unless one of `records` names its evidence already (the tables' key is the
/// evidence: a second insert does nothing), keeping the canonical order; false when nothing was
/// added.
fn insert(records: &mut Vec<Record>, record: Record) -> bool {
    if records.len() >= MAX_RECORDS || records.iter().any(|r| r.evidence == record.evidence) {
        return false;
    }
    records.push(record);
    records.sort_by_key(order);
    true
}

impl Store {
    /// A SIGNED operation whose original attempt, a transfer from wallet A, is persisted.
    pub fn signed() -> Store {
        Store {
            state: OperationState::Signed,
            hold: Hold::Held,
            escalation: None,
            attempts: vec![Attempt {
                kind: AttemptKind::Original,
                sender: Wallet::A,
                content: Role::Transfer,
                requested: None,
                after_rotation: false,
            }],
            confirmed: None,
            bumped: false,
            proposals: Vec::new(),
            attestations: Vec::new(),
            refusals: Vec::new(),
            reorged: Vec::new(),
        }
    }

    /// Every attempt's transaction hash, oldest first (as the witness reads them).
    pub fn attempt_hashes(&self) -> Vec<Hash32> {
        self.attempts
            .iter()
            .enumerate()
            .map(|(i, a)| a.tx_hash(i))
            .collect()
    }

    /// The proposal recorded with `evidence`, if any.
    pub fn proposal(&self, evidence: &ReleaseEvidence) -> Option<&Record> {
        self.proposals.iter().find(|p| p.evidence == *evidence)
    }

    /// Records a proposal (the reconciler's role); false when its evidence is recorded already.
    pub fn propose(&mut self, principal: Principal, evidence: ReleaseEvidence) -> bool {
        insert(
            &mut self.proposals,
            Record {
                principal,
                evidence,
            },
        )
    }

    /// Records the witness's attestation (the witness's role); refused (false) when no proposal
    /// names the evidence (the table's foreign key) or it is attested already.
    pub fn attest(&mut self, evidence: ReleaseEvidence) -> bool {
        if self.proposal(&evidence).is_none() {
            return false;
        }
        insert(
            &mut self.attestations,
            Record {
                principal: Principal::Witness,
                evidence,
            },
        )
    }

    /// Records the witness's refusal of a proposal for good; false when no proposal names the
    /// evidence or it is refused already.
    pub fn refuse(&mut self, evidence: ReleaseEvidence) -> bool {
        if self.proposal(&evidence).is_none() || self.refusals.contains(&evidence) {
            return false;
        }
        self.refusals.push(evidence);
        self.refusals
            .sort_by_key(|e| (e.block.number, e.block.hash, e.tx_hash));
        true
    }

    /// Marks an attested proof reorganized away (`release_reorgs`, whose key names an
    /// attestation); false when no attestation names it or it is marked already.
    pub fn mark_reorged(&mut self, evidence: ReleaseEvidence) -> bool {
        if !self.attestations.iter().any(|a| a.evidence == evidence)
            || self.reorged.contains(&evidence)
        {
            return false;
        }
        self.reorged.push(evidence);
        self.reorged
            .sort_by_key(|e| (e.block.number, e.block.hash, e.tx_hash));
        true
    }

    /// True when `evidence` is a proof marked reorganized away.
    pub fn is_marked(&self, evidence: &ReleaseEvidence) -> bool {
        self.reorged.contains(evidence)
    }

    /// The proofs of an applied release the chain watcher re-checks (`applied_releases`): while
    /// the operation is VERIFIED_NOT_SENT with its hold released, every attestation not marked.
    pub fn applied_proofs(&self) -> impl Iterator<Item = &ReleaseEvidence> + '_ {
        let applied = self.state == OperationState::VerifiedNotSent && self.hold == Hold::Released;
        self.attestations
            .iter()
            .map(|a| &a.evidence)
            .filter(move |e| applied && !self.is_marked(e))
    }

    /// True when some evidence not marked reorganized away is named by both a proposal and an
    /// attestation: what any release must rest on, written without the domain's rule (the
    /// property [`crate::properties::MARKED_PROOF_NEVER_RELEASES`] checks every release against
    /// it).
    pub fn witnessed_unmarked(&self) -> bool {
        self.proposals.iter().any(|p| {
            !self.is_marked(&p.evidence)
                && self.attestations.iter().any(|a| a.evidence == p.evidence)
        })
    }

    /// The proposals in the witness's queue: not attested, not refused, the hold still held.
    pub fn unwitnessed(&self) -> impl Iterator<Item = (usize, &Record)> + '_ {
        self.proposals.iter().enumerate().filter(|(_, p)| {
            self.hold == Hold::Held
                && !self.refusals.contains(&p.evidence)
                && !self.attestations.iter().any(|a| a.evidence == p.evidence)
        })
    }

    /// The ledger's release rule as the database applies it (`opledger_release_witnessed`,
    /// migration 31): the hold of an operation without a signed attempt may always be released;
    /// otherwise some recorded proposal and attestation, neither naming a proof marked
    /// reorganized away, must satisfy `opledger_domain::witness::release_allowed`.
    pub fn release_permitted(&self) -> bool {
        self.release_permitted_over(&self.reorged)
    }

    /// The release rule with `marked` left out (migration 28's rule when `marked` is empty).
    pub fn release_permitted_over(&self, marked: &[ReleaseEvidence]) -> bool {
        let hashes = self.attempt_hashes();
        let standing = |r: &&Record| !marked.contains(&r.evidence);
        let proposals: Vec<&Record> = self.proposals.iter().filter(standing).collect();
        let attestations: Vec<&Record> = self.attestations.iter().filter(standing).collect();
        if proposals.is_empty() || attestations.is_empty() {
            return release_allowed(
                &hashes,
                proposals.first().copied(),
                attestations.first().copied(),
            )
            .is_ok();
        }
        proposals.iter().any(|p| {
            attestations
                .iter()
                .any(|a| release_allowed(&hashes, Some(p), Some(a)).is_ok())
        })
    }

    /// The transfer every non-cancel attempt must express: the original's sender and nonce, the
    /// approved recipient and amount.
    pub fn expected(&self) -> ExpectedTransfer {
        let sender = self.attempts.first().map_or(Wallet::A, |a| a.sender);
        ExpectedTransfer {
            chain_id: CHAIN_ID,
            sender: address(sender),
            nonce: NONCE,
            recipient: RECIPIENT,
            asset: Asset::Native,
            amount: AMOUNT,
        }
    }

    /// Each attempt's role from its content, checked against its stored kind, as the workers
    /// derive it (`role_of`, `AttemptKind::check`).
    pub fn roles(&self) -> Vec<Result<Role, AttemptDefect>> {
        let expected = self.expected();
        self.attempts
            .iter()
            .map(|a| {
                let derived = role_of(&a.tx_content(), &expected)?;
                Ok(a.kind.check(derived)?)
            })
            .collect()
    }

    /// The latest attempt's role from its content (its stored kind's when the content is no
    /// transfer of this operation).
    pub fn latest_role(&self) -> Role {
        let expected = self.expected();
        self.attempts.last().map_or(Role::Transfer, |a| {
            role_of(&a.tx_content(), &expected).unwrap_or(a.kind.role())
        })
    }

    /// True when the operation has ended: CONFIRMED, VERIFIED_NOT_SENT, or FAILED_TERMINAL with
    /// an escalation recorded.
    pub fn has_ended(&self) -> bool {
        match self.state {
            OperationState::Confirmed | OperationState::VerifiedNotSent => true,
            OperationState::FailedTerminal => self.escalation.is_some(),
            _ => false,
        }
    }
}

/// The tenant's wallets as the signer holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Wallets {
    /// True once the current wallet is B.
    pub rotated: bool,
    /// True while the signer still holds A's key.
    pub a_key: bool,
}

impl Wallets {
    /// The tenant's current wallet.
    pub fn current(&self) -> Wallet {
        if self.rotated { Wallet::B } else { Wallet::A }
    }

    /// The accounts the signer holds keys for.
    pub fn available(&self) -> Vec<Address> {
        let mut keys = Vec::with_capacity(2);
        if self.rotated {
            keys.push(address(Wallet::B));
        }
        if self.a_key {
            keys.push(address(Wallet::A));
        }
        keys
    }

    /// The wallet holding `account`.
    pub fn wallet_of(account: Address) -> Option<Wallet> {
        [Wallet::A, Wallet::B]
            .into_iter()
            .find(|w| address(*w) == account)
    }
}
