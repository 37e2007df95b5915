//! The withdrawal payload, its canonical encoding and its hash.
//!
//! The canonical encoding (version 1) is what an idempotency key is bound to:
//! replaying a key with a payload whose hash differs is a conflict, never a
//! second payment. The encoding is frozen; `testdata/payload_hash_v1.json`
//! holds vectors computed by an independent implementation.

mod fields;
mod hash;

use sha2::{Digest, Sha256};

use crate::amount::Amount;
use crate::ids::TenantId;

pub use fields::{AccountName, AssetCode, Destination, Memo, NetworkId, PayloadError};
pub use hash::{PayloadHash, PayloadHashError};

/// Domain-separation prefix of canonical encoding version 1 (followed by one 0x00 byte).
pub const CANONICAL_DOMAIN_V1: &[u8] = b"opledger/withdrawal-payload/v1";

/// One field of a [`WithdrawalPayload`], in canonical order.
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
pub enum PayloadField {
    /// `tenant_id`, tag 1.
    TenantId,
    /// `source_account`, tag 2.
    SourceAccount,
    /// `asset`, tag 3.
    Asset,
    /// `network`, tag 4.
    Network,
    /// `destination`, tag 5.
    Destination,
    /// `memo`, tag 6 (the only optional field).
    Memo,
    /// `amount`, tag 7.
    Amount,
    /// `fee_cap`, tag 8.
    FeeCap,
    /// `policy_version`, tag 9.
    PolicyVersion,
}

impl PayloadField {
    /// Every field in canonical order.
    pub const ALL: [PayloadField; 9] = [
        PayloadField::TenantId,
        PayloadField::SourceAccount,
        PayloadField::Asset,
        PayloadField::Network,
        PayloadField::Destination,
        PayloadField::Memo,
        PayloadField::Amount,
        PayloadField::FeeCap,
        PayloadField::PolicyVersion,
    ];

    /// Wire name of the field.
    pub fn as_str(self) -> &'static str {
        match self {
            PayloadField::TenantId => "tenant_id",
            PayloadField::SourceAccount => "source_account",
            PayloadField::Asset => "asset",
            PayloadField::Network => "network",
            PayloadField::Destination => "destination",
            PayloadField::Memo => "memo",
            PayloadField::Amount => "amount",
            PayloadField::FeeCap => "fee_cap",
            PayloadField::PolicyVersion => "policy_version",
        }
    }

    /// Tag byte of the field in the canonical encoding.
    pub fn tag(self) -> u8 {
        match self {
            PayloadField::TenantId => 1,
            PayloadField::SourceAccount => 2,
            PayloadField::Asset => 3,
            PayloadField::Network => 4,
            PayloadField::Destination => 5,
            PayloadField::Memo => 6,
            PayloadField::Amount => 7,
            PayloadField::FeeCap => 8,
            PayloadField::PolicyVersion => 9,
        }
    }
}

/// What a client asks to withdraw. Its `Debug` is safe to log: the sensitive
/// fields (destination, memo) redact themselves.
#[derive(Clone, Eq, PartialEq, Debug)]
pub struct WithdrawalPayload {
    /// Tenant that owns the source account.
    pub tenant_id: TenantId,
    /// Account debited.
    pub source_account: AccountName,
    /// Asset moved.
    pub asset: AssetCode,
    /// Network the transfer goes out on.
    pub network: NetworkId,
    /// On-chain recipient (sensitive).
    pub destination: Destination,
    /// Optional free text (sensitive).
    pub memo: Option<Memo>,
    /// Amount in minimal units; must be greater than zero.
    pub amount: Amount,
    /// Highest network fee the client accepts, in minimal units; may be zero.
    pub fee_cap: Amount,
    /// Version of the policy the request was made under.
    pub policy_version: u32,
}

impl WithdrawalPayload {
    /// Checks the rules that span the whole payload (the field types already
    /// guarantee their own syntax): the amount must be greater than zero.
    pub fn validate(&self) -> Result<(), PayloadError> {
        if self.amount.is_zero() {
            return Err(PayloadError::Invalid {
                field: PayloadField::Amount.as_str(),
                reason: "must be greater than zero",
            });
        }
        Ok(())
    }

    /// Text of a field as it enters the canonical encoding; `None` when absent.
    fn canonical_text(&self, field: PayloadField) -> Option<String> {
        Some(match field {
            PayloadField::TenantId => self.tenant_id.to_string(),
            PayloadField::SourceAccount => self.source_account.as_str().to_owned(),
            PayloadField::Asset => self.asset.as_str().to_owned(),
            PayloadField::Network => self.network.as_str().to_owned(),
            PayloadField::Destination => self.destination.as_str().to_owned(),
            PayloadField::Memo => self.memo.as_ref()?.as_str().to_owned(),
            PayloadField::Amount => self.amount.to_string(),
            PayloadField::FeeCap => self.fee_cap.to_string(),
            PayloadField::PolicyVersion => self.policy_version.to_string(),
        })
    }

    /// Canonical encoding version 1:
    /// `b"opledger/withdrawal-payload/v1"`, `0x00`, then for each field in tag
    /// order: tag byte, presence byte (`0x01` present, `0x00` absent and
    /// nothing more), length as u32 big-endian, UTF-8 bytes.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(CANONICAL_DOMAIN_V1);
        out.push(0x00);
        for field in PayloadField::ALL {
            out.push(field.tag());
            match self.canonical_text(field) {
                None => out.push(0x00),
                Some(text) => {
                    out.push(0x01);
                    // Every field is bounded far below u32::MAX (memo <= 128 bytes).
                    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
                    out.extend_from_slice(&len.to_be_bytes());
                    out.extend_from_slice(text.as_bytes());
                }
            }
        }
        out
    }

    /// SHA-256 of [`canonical_bytes`](Self::canonical_bytes).
    pub fn hash(&self) -> PayloadHash {
        PayloadHash::from_bytes(Sha256::digest(self.canonical_bytes()).into())
    }

    /// Fields whose values differ from `other`, in canonical order.
    /// Names only the fields, never their values.
    pub fn differing_fields(&self, other: &WithdrawalPayload) -> Vec<PayloadField> {
        PayloadField::ALL
            .into_iter()
            .filter(|&f| match f {
                PayloadField::TenantId => self.tenant_id != other.tenant_id,
                PayloadField::SourceAccount => self.source_account != other.source_account,
                PayloadField::Asset => self.asset != other.asset,
                PayloadField::Network => self.network != other.network,
                PayloadField::Destination => self.destination != other.destination,
                PayloadField::Memo => self.memo != other.memo,
                PayloadField::Amount => self.amount != other.amount,
                PayloadField::FeeCap => self.fee_cap != other.fee_cap,
                PayloadField::PolicyVersion => self.policy_version != other.policy_version,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
