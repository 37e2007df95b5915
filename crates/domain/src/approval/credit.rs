//! Operator credit statements, and the decision on a credit's operator evidence.
//!
//! An operator signs a [`CreditStatement`] with a key only they hold: "credit `amount` of `asset` to
//! `account` of `tenant_id`, as credit `credit_id`, under the tenant's trust statement
//! `policy_version`". [`evaluate_credit`] turns a trust statement, the credit's facts and the
//! stored signatures into a verdict; it rebuilds every statement from the facts, so a stored
//! statement's bytes are never trusted. The witness attests a credit only on
//! [`CreditVerdict::Met`].

use super::codec::{self, Reader, Writer};
use super::{
    KeyId, KeyKind, Signature, SigningKey, StatementError, TrustStatement, VerifyingKey, signature,
    verify,
};
use crate::amount::Amount;
use crate::ids::TenantId;
use crate::payload::{AccountName, AssetCode};
use ed25519_dalek::Signer as _;
use std::collections::BTreeSet;

/// Domain string of credit statements, version 1.
pub const CREDIT_DOMAIN_V1: &str = "opledger/credit-statement/v1";

/// "Key `operator_key_id` asks to credit `amount` of `asset` to `account` of `tenant_id`, as the
/// credit `credit_id`, under the tenant's trust statement `policy_version`."
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreditStatement {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The credit's key digest: `IdempotencyKey::digest` of an operator credit, the store's
    /// deposit digest of a deposit.
    pub credit_id: [u8; 32],
    /// The account credited.
    pub account: AccountName,
    /// The asset.
    pub asset: AssetCode,
    /// The amount in minimal units (at least 1).
    pub amount: Amount,
    /// The signing key's id.
    pub operator_key_id: KeyId,
    /// The trust statement version the operator signed under (at least 1).
    pub policy_version: u64,
}

impl CreditStatement {
    /// The canonical bytes that are signed.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        Writer::new(CREDIT_DOMAIN_V1)
            .field(1, self.tenant_id.to_string().as_bytes())
            .field(2, &self.credit_id)
            .field(3, self.account.as_str().as_bytes())
            .field(4, self.asset.as_str().as_bytes())
            .field(5, self.amount.to_string().as_bytes())
            .field(6, self.operator_key_id.to_hex().as_bytes())
            .field(7, self.policy_version.to_string().as_bytes())
            .finish()
    }

    /// The canonical bytes (the same as [`CreditStatement::canonical_bytes`]).
    pub fn encode(&self) -> Vec<u8> {
        self.canonical_bytes()
    }

    /// Decodes canonical bytes (anything else is refused).
    pub fn decode(bytes: &[u8]) -> Result<CreditStatement, StatementError> {
        let mut r = Reader::new(bytes, CREDIT_DOMAIN_V1)?;
        let tenant_id = TenantId::from_uuid(codec::uuid(r.required(1, "tenant_id")?, "tenant_id")?);
        let credit_id: [u8; 32] = r
            .required(2, "credit_id")?
            .try_into()
            .map_err(|_| StatementError::Field("credit_id"))?;
        let account = AccountName::parse(codec::text(r.required(3, "account")?, "account")?)
            .map_err(|_| StatementError::Field("account"))?;
        let asset = AssetCode::parse(codec::text(r.required(4, "asset")?, "asset")?)
            .map_err(|_| StatementError::Field("asset"))?;
        let amount = Amount::new(codec::decimal(r.required(5, "amount")?, "amount")?);
        let operator_key_id = KeyId::parse(codec::text(
            r.required(6, "operator_key_id")?,
            "operator_key_id",
        )?)?;
        let policy_version =
            codec::decimal_u64(r.required(7, "policy_version")?, "policy_version")?;
        r.end()?;
        let statement = CreditStatement {
            tenant_id,
            credit_id,
            account,
            asset,
            amount,
            operator_key_id,
            policy_version,
        };
        statement.check()?;
        Ok(statement)
    }

    /// Refuses a statement no operator may sign (amount 0, policy version 0).
    pub fn check(&self) -> Result<(), StatementError> {
        if self.amount.is_zero() {
            return Err(StatementError::Field("amount"));
        }
        if self.policy_version == 0 {
            return Err(StatementError::Field("policy_version"));
        }
        Ok(())
    }

    /// Signs the canonical bytes with `key`, which must be the key the statement names.
    pub fn sign(&self, key: &SigningKey) -> Result<Signature, StatementError> {
        self.check()?;
        if KeyId::of(&key.verifying_key()) != self.operator_key_id {
            return Err(StatementError::Inconsistent(
                "operator_key_id is not the signing key's id",
            ));
        }
        Ok(key.sign(&self.canonical_bytes()))
    }

    /// Verifies a 64-byte `signature` over the canonical bytes with `key`, which must be the key
    /// the statement names.
    pub fn verify(&self, key: &VerifyingKey, signature_bytes: &[u8]) -> Result<(), StatementError> {
        self.check()?;
        if KeyId::of(key) != self.operator_key_id {
            return Err(StatementError::Inconsistent(
                "operator_key_id is not the verifying key's id",
            ));
        }
        verify(key, &self.canonical_bytes(), &signature(signature_bytes)?)
    }
}

/// What the verdict is about: the credit as stored (or as requested), field by field.
#[derive(Debug, Clone, Copy)]
pub struct CreditFacts<'a> {
    /// The tenant.
    pub tenant_id: TenantId,
    /// The credit's key digest.
    pub credit_id: &'a [u8; 32],
    /// The account credited.
    pub account: &'a AccountName,
    /// The asset.
    pub asset: &'a AssetCode,
    /// The amount.
    pub amount: Amount,
}

impl CreditFacts<'_> {
    /// The statement an operator with key `operator_key_id` signs for this credit.
    pub fn statement(&self, operator_key_id: KeyId, policy_version: u64) -> CreditStatement {
        CreditStatement {
            tenant_id: self.tenant_id,
            credit_id: *self.credit_id,
            account: self.account.clone(),
            asset: self.asset.clone(),
            amount: self.amount,
            operator_key_id,
            policy_version,
        }
    }
}

/// One stored operator signature: the fields that are not the credit's own, and the signature.
#[derive(Debug, Clone, Copy)]
pub struct CreditSignatureFacts<'a> {
    /// The key id the operator named (32 lowercase hex characters when well formed).
    pub operator_key_id: &'a str,
    /// The trust statement version the operator named.
    pub policy_version: u64,
    /// The signature bytes (64 when well formed).
    pub signature: &'a [u8],
}

/// The verdict on a credit's operator signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreditVerdict {
    /// Enough distinct operators signed: the credit may be attested.
    Met {
        /// The distinct operators whose signatures verified, by key id.
        operators: Vec<KeyId>,
    },
    /// Every signature verified, but more operators must sign.
    Pending {
        /// Distinct operators whose signatures verified.
        have: u32,
        /// Required by the trust statement's credit rules.
        need: u32,
    },
}

/// Why a credit's operator evidence cannot count: each is evidence of tampering, of a misdirected
/// signature or of a stale client, never a reason to credit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CreditRefusal {
    /// The trust statement is not the credit's tenant's.
    #[error("trust statement is for another tenant than the credit")]
    OtherTenant,
    /// The credit's amount is zero: no statement may name it.
    #[error("credit amount is zero")]
    ZeroAmount,
    /// The named key id is not 32 lowercase hex characters.
    #[error("operator key id is malformed")]
    MalformedKeyId,
    /// The key is not in the registry.
    #[error("operator key is not registered for the tenant")]
    UnknownKey {
        /// The key.
        key_id: KeyId,
    },
    /// The key was revoked.
    #[error("operator key was revoked")]
    RevokedKey {
        /// The key.
        key_id: KeyId,
    },
    /// The key is registered, but not as an `OPERATOR`.
    #[error("key is registered as {}, not as an operator", .kind.as_str())]
    NotAnOperator {
        /// The key.
        key_id: KeyId,
        /// What it is registered as.
        kind: KeyKind,
    },
    /// The statement names policy version 0 or one newer than the trust statement held.
    #[error("credit statement names policy version {named}; the newest held is {held}")]
    UnknownPolicyVersion {
        /// The version named.
        named: u64,
        /// The newest version held.
        held: u64,
    },
    /// The signature does not verify over the statement of exactly the credit's fields.
    #[error("credit statement signature does not verify")]
    BadSignature {
        /// The key.
        key_id: KeyId,
    },
    /// The same key signed twice: one operator counts once.
    #[error("an operator key signed the credit more than once")]
    DuplicateOperator {
        /// The key.
        key_id: KeyId,
    },
}

impl CreditRefusal {
    /// The stable reason code (for error details and stored refusals).
    pub fn reason_code(&self) -> &'static str {
        match self {
            CreditRefusal::OtherTenant => "CREDIT_TRUST_OTHER_TENANT",
            CreditRefusal::ZeroAmount => "CREDIT_AMOUNT_ZERO",
            CreditRefusal::MalformedKeyId => "CREDIT_KEY_ID_MALFORMED",
            CreditRefusal::UnknownKey { .. } => "CREDIT_KEY_UNKNOWN",
            CreditRefusal::RevokedKey { .. } => "CREDIT_KEY_REVOKED",
            CreditRefusal::NotAnOperator { .. } => "CREDIT_KEY_NOT_OPERATOR",
            CreditRefusal::UnknownPolicyVersion { .. } => "CREDIT_POLICY_VERSION_UNKNOWN",
            CreditRefusal::BadSignature { .. } => "CREDIT_SIGNATURE_INVALID",
            CreditRefusal::DuplicateOperator { .. } => "CREDIT_DUPLICATE_OPERATOR",
        }
    }
}

/// Verifies one operator signature for `credit`: a well-formed key id of an active `OPERATOR` key
/// of `trust`, a policy version from 1 to `trust.version()`, and a signature that verifies over
/// the statement rebuilt from `credit`. Returns the operator's key id.
pub fn check_credit_signature(
    trust: &TrustStatement,
    credit: &CreditFacts<'_>,
    signed: &CreditSignatureFacts<'_>,
) -> Result<KeyId, CreditRefusal> {
    let key_id = KeyId::parse(signed.operator_key_id).map_err(|_| CreditRefusal::MalformedKeyId)?;
    if signed.policy_version == 0 || signed.policy_version > trust.version() {
        return Err(CreditRefusal::UnknownPolicyVersion {
            named: signed.policy_version,
            held: trust.version(),
        });
    }
    if trust.is_revoked(&key_id) {
        return Err(CreditRefusal::RevokedKey { key_id });
    }
    let key = trust
        .key(&key_id)
        .ok_or(CreditRefusal::UnknownKey { key_id })?;
    if key.kind != KeyKind::Operator {
        return Err(CreditRefusal::NotAnOperator {
            key_id,
            kind: key.kind,
        });
    }
    credit
        .statement(key_id, signed.policy_version)
        .verify(&key.public_key, signed.signature)
        .map_err(|_| CreditRefusal::BadSignature { key_id })?;
    Ok(key_id)
}

/// The verdict on every stored operator signature of a credit. Any signature that does not count
/// refuses the whole credit: a forged or copied row is never ignored silently. The credit needs
/// the operators of the credit rule of its asset with the highest min_amount not above its amount
/// (one when the asset has no credit rules).
pub fn evaluate_credit(
    trust: &TrustStatement,
    credit: &CreditFacts<'_>,
    signed: &[CreditSignatureFacts<'_>],
) -> Result<CreditVerdict, CreditRefusal> {
    if trust.tenant_id() != credit.tenant_id {
        return Err(CreditRefusal::OtherTenant);
    }
    if credit.amount.is_zero() {
        return Err(CreditRefusal::ZeroAmount);
    }
    let mut operators = BTreeSet::new();
    for s in signed {
        let key_id = check_credit_signature(trust, credit, s)?;
        if !operators.insert(key_id) {
            return Err(CreditRefusal::DuplicateOperator { key_id });
        }
    }
    let need = trust.required_operators(credit.asset, credit.amount);
    let have = u32::try_from(operators.len()).unwrap_or(u32::MAX);
    if have >= need {
        Ok(CreditVerdict::Met {
            operators: operators.into_iter().collect(),
        })
    } else {
        Ok(CreditVerdict::Pending { have, need })
    }
}
