//! The modelled store: the operation's state, its hold, its attempts as the signer persisted
//! them, the recorded inclusion of a confirmation, and the tenant's wallets as the signer holds
//! them. Every state move goes through `opledger_domain::state::check_transition`.

use opledger_domain::evidence::{
    Address, Asset, AttemptDefect, Call, Escalation, ExpectedTransfer, Inclusion,
    ReplacementRequest, Role, StoredKind, TxContent, role_of,
};
use opledger_domain::state::OperationState;

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
    pub kind: StoredKind,
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
}

impl Store {
    /// A SIGNED operation whose original attempt, a transfer from wallet A, is persisted.
    pub fn signed() -> Store {
        Store {
            state: OperationState::Signed,
            hold: Hold::Held,
            escalation: None,
            attempts: vec![Attempt {
                kind: StoredKind::Original,
                sender: Wallet::A,
                content: Role::Transfer,
                requested: None,
                after_rotation: false,
            }],
            confirmed: None,
            bumped: false,
        }
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
    /// derive it (`role_of`, `StoredKind::check`).
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
