//! Credits as the store hands them out and takes them in: who proposed them, where they stand,
//! their evidence and operators' signatures, and what a proposal asks for and did.

use crate::{Result, StoreError};
use chrono::{DateTime, Utc};
use opledger_domain::amount::Amount;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::{AccountName, AssetCode, PayloadField};

/// Who proposed a credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditKind {
    /// A deposit reported by a webhook provider (the inbox).
    Deposit,
    /// An operator's credit (the operations API).
    Operator,
}

impl CreditKind {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            CreditKind::Deposit => "DEPOSIT",
            CreditKind::Operator => "OPERATOR",
        }
    }

    pub(super) fn parse(text: &str) -> Result<CreditKind> {
        match text {
            "DEPOSIT" => Ok(CreditKind::Deposit),
            "OPERATOR" => Ok(CreditKind::Operator),
            _ => Err(StoreError::Corrupt {
                what: "credit kind",
            }),
        }
    }
}

/// Where a credit stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreditState {
    /// Proposed, not witnessed: not spendable.
    Pending,
    /// Witnessed and applied, once.
    Credited,
    /// Refused for good by the witness, with its reason code.
    Refused(String),
}

/// A deposit's chain evidence, as the provider reported it.
#[derive(Clone, PartialEq, Eq)]
pub struct DepositEvidence {
    /// The network id (the witness's `[evidence.<id>]`).
    pub network: String,
    /// The transaction.
    pub tx_hash: [u8; 32],
    /// The log of a token transfer in its receipt; `None` for the native coin.
    pub log_index: Option<u32>,
    /// The address that received it.
    pub recipient: [u8; 20],
}

impl std::fmt::Debug for DepositEvidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DepositEvidence")
            .field("network", &self.network)
            .field("log_index", &self.log_index)
            .finish_non_exhaustive()
    }
}

/// An operator's signature over the credit statement of a credit's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorSignature {
    /// Key id (32 lowercase hex characters) of the operator's key.
    pub operator_key_id: String,
    /// The trust statement version the operator signed under.
    pub policy_version: u64,
    /// The 64-byte Ed25519 signature.
    pub signature: Vec<u8>,
}

/// One credit, pending or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditRecord {
    /// The credit's tenant.
    pub tenant_id: TenantId,
    /// Its key digest.
    pub credit_id: [u8; 32],
    /// Who proposed it.
    pub kind: CreditKind,
    /// Where it stands.
    pub state: CreditState,
    /// The account it credits.
    pub account: AccountName,
    /// The asset.
    pub asset: AssetCode,
    /// The amount.
    pub amount: Amount,
    /// A deposit's chain evidence, if it came with some.
    pub evidence: Option<DepositEvidence>,
    /// Operators' statements recorded so far, by key id.
    pub statements: Vec<OperatorSignature>,
    /// When it was proposed.
    pub created_at: DateTime<Utc>,
}

/// What a proposal asks for.
#[derive(Debug, Clone, Copy)]
pub struct NewProposal<'a> {
    /// The tenant that owns the account.
    pub tenant_id: TenantId,
    /// The credit's key digest.
    pub credit_id: &'a [u8; 32],
    /// The account to credit.
    pub account: &'a AccountName,
    /// The asset.
    pub asset: &'a AssetCode,
    /// The amount, greater than zero.
    pub amount: Amount,
}

/// What recording a proposal did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proposed {
    /// A new proposal.
    New,
    /// The same key already proposed exactly this credit: nothing new.
    Replayed,
    /// The same key proposed another credit: these fields differ (in field order). Nothing
    /// written.
    Conflicting(Vec<PayloadField>),
}
