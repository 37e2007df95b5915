//! Signed approvals and operator credit statements, and the tenant trust statement they are
//! checked against.
//!
//! An approver signs an [`ApprovalStatement`] with a key only they hold; a tenant administrator
//! signs a [`TrustStatement`] (the key registry, the approval policy and the credit policy) with a
//! key whose public half is pinned in the signer's and the witness's own configuration.
//! [`quorum::evaluate`] turns a trust statement, a withdrawal's facts and its stored approvals
//! into a verdict: the signer signs only on [`quorum::Verdict::Met`]. An operator signs a
//! [`CreditStatement`]; [`evaluate_credit`] turns a trust statement, a credit's facts and its
//! stored operator signatures into a verdict: the witness attests a credit only on
//! [`CreditVerdict::Met`]. Everything here is pure: bytes and keys in, verdicts out. The
//! encodings are specified in `testdata/SIGNED_STATEMENTS.md`, with golden vectors written by an
//! independent implementation.

mod codec;
pub mod credit;
pub mod quorum;
pub mod statement;
pub mod trust;

#[cfg(test)]
mod credit_tests;
#[cfg(test)]
mod tests;

pub use credit::{
    CREDIT_DOMAIN_V1, CreditFacts, CreditRefusal, CreditSignatureFacts, CreditStatement,
    CreditVerdict, check_credit_signature, evaluate_credit,
};
pub use ed25519_dalek::{Signature, SigningKey, VerifyingKey};
pub use quorum::{ApprovalFacts, OperationFacts, Refusal, Verdict, evaluate};
pub use statement::{ApprovalStatement, Decision};
pub use trust::{
    AutomatedApprover, CreditRule, KeyKind, RegisteredKey, TrustParts, TrustStatement,
};

use sha2::{Digest, Sha256};
use std::fmt;

/// Domain string of key ids.
pub const KEY_ID_DOMAIN_V1: &str = "opledger/approver-key/v1";

/// Why statement bytes, a key or a signature were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StatementError {
    /// The bytes do not start with the statement's domain string and a zero byte.
    #[error("statement has another domain")]
    Domain,
    /// The bytes end early, hold an impossible length, or carry bytes after the last field.
    #[error("statement is malformed")]
    Malformed,
    /// A field is missing, out of order, or not canonical.
    #[error("statement field {0} is missing or not canonical")]
    Field(&'static str),
    /// A repeated field's items are not in canonical order or repeat.
    #[error("statement field {0} is not sorted or has duplicates")]
    Order(&'static str),
    /// The content breaks a rule of the statement (see the variant's field name).
    #[error("statement is inconsistent: {0}")]
    Inconsistent(&'static str),
    /// A public key is not a valid Ed25519 point.
    #[error("public key is invalid")]
    PublicKey,
    /// The signature does not verify over the statement with the key.
    #[error("signature does not verify")]
    Signature,
}

/// The id of an Ed25519 public key: 16 bytes of a domain-separated SHA-256 of the key, written
/// as 32 lowercase hex characters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId([u8; 16]);

impl KeyId {
    /// The id of `key`.
    pub fn of(key: &VerifyingKey) -> KeyId {
        let mut digest = Sha256::new();
        digest.update(KEY_ID_DOMAIN_V1.as_bytes());
        digest.update([0]);
        digest.update(key.as_bytes());
        let full: [u8; 32] = digest.finalize().into();
        let mut id = [0; 16];
        id.copy_from_slice(&full[..16]);
        KeyId(id)
    }

    /// Parses 32 lowercase hex characters.
    pub fn parse(text: &str) -> Result<KeyId, StatementError> {
        let mut id = [0; 16];
        if text.len() != 32 || text.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(StatementError::Field("key id"));
        }
        hex::decode_to_slice(text, &mut id).map_err(|_| StatementError::Field("key id"))?;
        Ok(KeyId(id))
    }

    /// The 32 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({})", self.to_hex())
    }
}

/// Parses a 32-byte Ed25519 public key (rejecting invalid points).
pub fn verifying_key(bytes: &[u8]) -> Result<VerifyingKey, StatementError> {
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| StatementError::PublicKey)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| StatementError::PublicKey)
}

/// Parses a 64-byte Ed25519 signature.
pub fn signature(bytes: &[u8]) -> Result<Signature, StatementError> {
    Signature::from_slice(bytes).map_err(|_| StatementError::Signature)
}

/// Verifies `signature` over `message` with `key` (strict: no malleable signatures, no weak keys).
pub fn verify(
    key: &VerifyingKey,
    message: &[u8],
    signature: &Signature,
) -> Result<(), StatementError> {
    key.verify_strict(message, signature)
        .map_err(|_| StatementError::Signature)
}
