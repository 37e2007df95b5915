//! Decoding of a trust statement's canonical bytes ([`TrustStatement::decode`]), one record
//! kind at a time; the encoding is `TrustStatement::canonical_bytes`.

use super::{
    AutomatedApprover, CreditRule, KeyKind, RegisteredKey, TRUST_DOMAIN_V1, TrustParts,
    TrustStatement,
};
use crate::amount::Amount;
use crate::approval::codec::{self, Reader};
use crate::approval::{KeyId, StatementError, verifying_key};
use crate::ids::TenantId;
use crate::payload::AssetCode;
use crate::policy::ApprovalRule;

impl TrustStatement {
    /// Decodes canonical bytes (anything else is refused, non-canonical order included).
    pub fn decode(bytes: &[u8]) -> Result<TrustStatement, StatementError> {
        let mut r = Reader::new(bytes, TRUST_DOMAIN_V1)?;
        let tenant_id = TenantId::from_uuid(codec::uuid(r.required(1, "tenant_id")?, "tenant_id")?);
        let version = codec::decimal_u64(r.required(2, "version")?, "version")?;
        let mut parts = TrustParts::default();
        for record in r.repeated(3)? {
            parts.keys.push(key_record(record)?);
        }
        for id in r.repeated(4)? {
            parts
                .revoked
                .push(KeyId::parse(codec::text(id, "revoked")?)?);
        }
        for record in r.repeated(5)? {
            parts.rules.push(rule_record(record)?);
        }
        for record in r.repeated(6)? {
            parts.automated.push(automated_record(record)?);
        }
        for value in r.repeated(7)? {
            parts.kyt_required.push(asset(value, "kyt_required")?);
        }
        for record in r.repeated(8)? {
            parts.credit_rules.push(credit_rule_record(record)?);
        }
        r.end()?;
        let statement = TrustStatement::new(tenant_id, version, parts)?;
        // Canonical means the bytes are exactly what the decoded statement encodes to: this
        // refuses repeated items out of order.
        if statement.canonical_bytes() != bytes {
            return Err(StatementError::Order("repeated fields"));
        }
        Ok(statement)
    }
}

/// Decodes one key record (field 3).
fn key_record(record: &[u8]) -> Result<RegisteredKey, StatementError> {
    let mut k = Reader::new(record, "")?;
    let key_id = KeyId::parse(codec::text(k.required(1, "key.key_id")?, "key.key_id")?)?;
    let public_key = verifying_key(k.required(2, "key.public_key")?)?;
    let kind = KeyKind::parse(codec::text(k.required(3, "key.kind")?, "key.kind")?)?;
    k.end()?;
    Ok(RegisteredKey {
        key_id,
        public_key,
        kind,
    })
}

/// Decodes one approval rule record (field 5).
fn rule_record(record: &[u8]) -> Result<(AssetCode, ApprovalRule), StatementError> {
    let mut k = Reader::new(record, "")?;
    let asset = asset(k.required(1, "rule.asset")?, "rule.asset")?;
    let min_amount = Amount::new(codec::decimal(
        k.required(2, "rule.min_amount")?,
        "rule.min_amount",
    )?);
    let required = codec::decimal(
        k.required(3, "rule.required_approvals")?,
        "rule.required_approvals",
    )?;
    k.end()?;
    let required_approvals =
        u32::try_from(required).map_err(|_| StatementError::Field("rule.required_approvals"))?;
    Ok((
        asset,
        ApprovalRule {
            min_amount,
            required_approvals,
        },
    ))
}

/// Decodes one automated approver record (field 6).
fn automated_record(record: &[u8]) -> Result<AutomatedApprover, StatementError> {
    let mut k = Reader::new(record, "")?;
    let asset = asset(k.required(1, "automated.asset")?, "automated.asset")?;
    let key_id = KeyId::parse(codec::text(
        k.required(2, "automated.key_id")?,
        "automated.key_id",
    )?)?;
    let below = Amount::new(codec::decimal(
        k.required(3, "automated.below")?,
        "automated.below",
    )?);
    k.end()?;
    Ok(AutomatedApprover {
        asset,
        key_id,
        below,
    })
}

/// Decodes one credit rule record (field 8).
fn credit_rule_record(record: &[u8]) -> Result<(AssetCode, CreditRule), StatementError> {
    let mut k = Reader::new(record, "")?;
    let asset = asset(k.required(1, "credit_rule.asset")?, "credit_rule.asset")?;
    let min_amount = Amount::new(codec::decimal(
        k.required(2, "credit_rule.min_amount")?,
        "credit_rule.min_amount",
    )?);
    let required = codec::decimal(
        k.required(3, "credit_rule.required_operators")?,
        "credit_rule.required_operators",
    )?;
    k.end()?;
    let required_operators = u32::try_from(required)
        .map_err(|_| StatementError::Field("credit_rule.required_operators"))?;
    Ok((
        asset,
        CreditRule {
            min_amount,
            required_operators,
        },
    ))
}

fn asset(value: &[u8], name: &'static str) -> Result<AssetCode, StatementError> {
    AssetCode::parse(codec::text(value, name)?).map_err(|_| StatementError::Field(name))
}
