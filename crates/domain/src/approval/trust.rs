//! The tenant trust statement: key registry (approvers, automated approvers, operators, KYT
//! providers), approval policy and credit policy, signed by a tenant administrator key that the
//! signer and the witness pin in their own configuration.

use super::codec::Writer;
use super::{KeyId, Signature, SigningKey, StatementError, VerifyingKey, verify};
use crate::amount::Amount;
use crate::ids::TenantId;
use crate::payload::AssetCode;
use crate::policy::{ApprovalPolicy, ApprovalRule, MAX_REQUIRED_APPROVALS};
use ed25519_dalek::Signer as _;
use std::collections::BTreeMap;

mod decode;

/// Domain string of trust statements, version 1.
pub const TRUST_DOMAIN_V1: &str = "opledger/trust-statement/v1";

/// What a registered key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// A person: each key counts as one approver.
    Approver,
    /// An automated approver (a risk engine): counts only below its automated-approver limit.
    Service,
    /// A person who may sign credit statements; never a withdrawal approver.
    Operator,
    /// A KYT screening provider's key: it signs screening results (Standard Webhooks `v1a`), never
    /// a decision or a credit.
    Kyt,
}

impl KeyKind {
    /// The encoded name.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Approver => "APPROVER",
            KeyKind::Service => "SERVICE",
            KeyKind::Operator => "OPERATOR",
            KeyKind::Kyt => "KYT",
        }
    }

    /// Parses an encoded name.
    pub fn parse(text: &str) -> Result<KeyKind, StatementError> {
        match text {
            "APPROVER" => Ok(KeyKind::Approver),
            "SERVICE" => Ok(KeyKind::Service),
            "OPERATOR" => Ok(KeyKind::Operator),
            "KYT" => Ok(KeyKind::Kyt),
            _ => Err(StatementError::Field("key kind")),
        }
    }
}

/// An active key of the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegisteredKey {
    /// `KeyId::of(public_key)`.
    pub key_id: KeyId,
    /// The Ed25519 public key.
    pub public_key: VerifyingKey,
    /// Person or service.
    pub kind: KeyKind,
}

impl RegisteredKey {
    /// A registry entry for `public_key`.
    pub fn new(public_key: VerifyingKey, kind: KeyKind) -> RegisteredKey {
        RegisteredKey {
            key_id: KeyId::of(&public_key),
            public_key,
            kind,
        }
    }
}

/// A service key that counts as one approver for amounts of `asset` strictly below `below`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutomatedApprover {
    /// The asset.
    pub asset: AssetCode,
    /// A `SERVICE` key of the registry.
    pub key_id: KeyId,
    /// Exclusive upper bound of the amounts it may approve (at least 1).
    pub below: Amount,
}

/// Credits of an asset from `min_amount` on need `required_operators` distinct operators' signed
/// credit statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreditRule {
    /// Lower bound (inclusive) of the amounts this rule covers.
    pub min_amount: Amount,
    /// Distinct operators needed, 1 to [`MAX_REQUIRED_APPROVALS`].
    pub required_operators: u32,
}

/// One version of a tenant's key registry, approval policy and credit policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustStatement {
    tenant_id: TenantId,
    version: u64,
    keys: BTreeMap<KeyId, RegisteredKey>,
    revoked: Vec<KeyId>,
    policies: BTreeMap<String, ApprovalPolicy>,
    automated: Vec<AutomatedApprover>,
    kyt_required: Vec<AssetCode>,
    /// Credit rules per asset, kept as the same threshold rules as approvals (counting operators).
    credit_policies: BTreeMap<String, ApprovalPolicy>,
}

/// The parts of a trust statement, in any order (see [`TrustStatement::new`]).
#[derive(Debug, Clone, Default)]
pub struct TrustParts {
    /// Active keys.
    pub keys: Vec<RegisteredKey>,
    /// Revoked key ids (never active again).
    pub revoked: Vec<KeyId>,
    /// Rules per asset.
    pub rules: Vec<(AssetCode, ApprovalRule)>,
    /// Automated approvers.
    pub automated: Vec<AutomatedApprover>,
    /// Assets whose withdrawals need a signed KYT pass before approvals count.
    pub kyt_required: Vec<AssetCode>,
    /// Operators needed per asset and amount for operator credits (one when an asset has none).
    pub credit_rules: Vec<(AssetCode, CreditRule)>,
}

impl TrustStatement {
    /// Validates `parts` and puts them in canonical order.
    pub fn new(
        tenant_id: TenantId,
        version: u64,
        parts: TrustParts,
    ) -> Result<TrustStatement, StatementError> {
        if version == 0 {
            return Err(StatementError::Field("version"));
        }
        let keys = registry(parts.keys)?;
        let revoked = revoked_ids(parts.revoked, &keys)?;
        let policies = approval_policies(parts.rules)?;
        let automated = automated_approvers(parts.automated, &keys)?;
        let mut kyt_required = parts.kyt_required;
        kyt_required.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        if kyt_required.windows(2).any(|w| w[0] == w[1]) {
            return Err(StatementError::Order("kyt_required"));
        }
        let credit_policies = credit_policies(parts.credit_rules)?;
        Ok(TrustStatement {
            tenant_id,
            version,
            keys,
            revoked,
            policies,
            automated,
            kyt_required,
            credit_policies,
        })
    }

    /// The tenant.
    pub fn tenant_id(&self) -> TenantId {
        self.tenant_id
    }

    /// The version (every change is a higher one).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The active key `id`, if registered and not revoked.
    pub fn key(&self, id: &KeyId) -> Option<&RegisteredKey> {
        self.keys.get(id)
    }

    /// Active keys, by key id.
    pub fn keys(&self) -> impl Iterator<Item = &RegisteredKey> {
        self.keys.values()
    }

    /// True when `id` was revoked.
    pub fn is_revoked(&self, id: &KeyId) -> bool {
        self.revoked.binary_search(id).is_ok()
    }

    /// Revoked key ids, ascending.
    pub fn revoked(&self) -> &[KeyId] {
        &self.revoked
    }

    /// The approval policy of `asset` (one approver for every amount when it has no rules).
    pub fn policy(&self, asset: &AssetCode) -> ApprovalPolicy {
        self.policies
            .get(asset.as_str())
            .cloned()
            .unwrap_or_default()
    }

    /// Assets with rules, and their policies.
    pub fn policies(&self) -> impl Iterator<Item = (&str, &ApprovalPolicy)> {
        self.policies.iter().map(|(a, p)| (a.as_str(), p))
    }

    /// Automated approvers, by asset then key id.
    pub fn automated(&self) -> &[AutomatedApprover] {
        &self.automated
    }

    /// True when a service key `id` may approve `amount` of `asset`.
    pub fn automated_allows(&self, id: &KeyId, asset: &AssetCode, amount: Amount) -> bool {
        self.automated
            .iter()
            .any(|a| a.key_id == *id && a.asset == *asset && amount < a.below)
    }

    /// True when withdrawals of `asset` need a screening result that passes, signed by a `KYT`
    /// key of the registry, before approvals count and before the signer signs.
    pub fn kyt_required(&self, asset: &AssetCode) -> bool {
        self.kyt_required.iter().any(|a| a == asset)
    }

    /// Assets needing a KYT pass, ascending.
    pub fn kyt_required_assets(&self) -> &[AssetCode] {
        &self.kyt_required
    }

    /// Credit rules, by asset then min_amount.
    pub fn credit_rules(&self) -> impl Iterator<Item = (&str, CreditRule)> {
        self.credit_policies.iter().flat_map(|(asset, policy)| {
            policy.rules().iter().map(move |r| {
                (
                    asset.as_str(),
                    CreditRule {
                        min_amount: r.min_amount,
                        required_operators: r.required_approvals,
                    },
                )
            })
        })
    }

    /// Distinct operators a credit of `amount` of `asset` needs: the credit rule of the asset with
    /// the highest min_amount not above the amount; one when the asset has no credit rules.
    pub fn required_operators(&self, asset: &AssetCode, amount: Amount) -> u32 {
        self.credit_policies
            .get(asset.as_str())
            .map_or(1, |policy| policy.required_for(amount))
    }

    /// The canonical bytes that are signed.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new(TRUST_DOMAIN_V1);
        w.field(1, self.tenant_id.to_string().as_bytes());
        w.field(2, self.version.to_string().as_bytes());
        for key in self.keys.values() {
            let record = Writer::new("")
                .field(1, key.key_id.to_hex().as_bytes())
                .field(2, key.public_key.as_bytes())
                .field(3, key.kind.as_str().as_bytes())
                .finish();
            w.field(3, &record);
        }
        for id in &self.revoked {
            w.field(4, id.to_hex().as_bytes());
        }
        for (asset, policy) in &self.policies {
            for rule in policy.rules() {
                let record = Writer::new("")
                    .field(1, asset.as_bytes())
                    .field(2, rule.min_amount.to_string().as_bytes())
                    .field(3, rule.required_approvals.to_string().as_bytes())
                    .finish();
                w.field(5, &record);
            }
        }
        for a in &self.automated {
            let record = Writer::new("")
                .field(1, a.asset.as_str().as_bytes())
                .field(2, a.key_id.to_hex().as_bytes())
                .field(3, a.below.to_string().as_bytes())
                .finish();
            w.field(6, &record);
        }
        for asset in &self.kyt_required {
            w.field(7, asset.as_str().as_bytes());
        }
        for (asset, rule) in self.credit_rules() {
            let record = Writer::new("")
                .field(1, asset.as_bytes())
                .field(2, rule.min_amount.to_string().as_bytes())
                .field(3, rule.required_operators.to_string().as_bytes())
                .finish();
            w.field(8, &record);
        }
        w.finish()
    }

    /// Signs the canonical bytes with an administrator key.
    pub fn sign(&self, admin: &SigningKey) -> Signature {
        admin.sign(&self.canonical_bytes())
    }

    /// Decodes `bytes` and accepts them only for `tenant` and only when `signature` verifies with
    /// one of the `pinned` administrator keys.
    pub fn verify_signed(
        bytes: &[u8],
        signature: &Signature,
        tenant: TenantId,
        pinned: &[VerifyingKey],
    ) -> Result<TrustStatement, StatementError> {
        if !pinned
            .iter()
            .any(|key| verify(key, bytes, signature).is_ok())
        {
            return Err(StatementError::Signature);
        }
        let statement = TrustStatement::decode(bytes)?;
        if statement.tenant_id != tenant {
            return Err(StatementError::Inconsistent(
                "statement is for another tenant",
            ));
        }
        Ok(statement)
    }
}

/// Indexes the active keys by id; each id must be its key's id and appear once.
fn registry(keys: Vec<RegisteredKey>) -> Result<BTreeMap<KeyId, RegisteredKey>, StatementError> {
    let mut registry = BTreeMap::new();
    for key in keys {
        if key.key_id != KeyId::of(&key.public_key) {
            return Err(StatementError::Inconsistent("key id is not its key's id"));
        }
        if registry.insert(key.key_id, key).is_some() {
            return Err(StatementError::Order("keys"));
        }
    }
    Ok(registry)
}

/// Sorts the revoked ids; none may repeat or be an active key.
fn revoked_ids(
    mut revoked: Vec<KeyId>,
    keys: &BTreeMap<KeyId, RegisteredKey>,
) -> Result<Vec<KeyId>, StatementError> {
    revoked.sort();
    if revoked.windows(2).any(|w| w[0] == w[1]) {
        return Err(StatementError::Order("revoked"));
    }
    if revoked.iter().any(|id| keys.contains_key(id)) {
        return Err(StatementError::Inconsistent(
            "a revoked key is listed as active",
        ));
    }
    Ok(revoked)
}

/// Validates approval rules (1 to 10 approvers) and groups them into a policy per asset.
fn approval_policies(
    rules: Vec<(AssetCode, ApprovalRule)>,
) -> Result<BTreeMap<String, ApprovalPolicy>, StatementError> {
    let mut by_asset: BTreeMap<String, Vec<ApprovalRule>> = BTreeMap::new();
    for (asset, rule) in rules {
        if rule.required_approvals == 0 || rule.required_approvals > MAX_REQUIRED_APPROVALS {
            return Err(StatementError::Inconsistent(
                "required_approvals must be 1 to 10",
            ));
        }
        by_asset
            .entry(asset.as_str().to_owned())
            .or_default()
            .push(rule);
    }
    let mut policies = BTreeMap::new();
    for (asset, rules) in by_asset {
        let policy = ApprovalPolicy::new(rules).map_err(|e| match e {
            crate::policy::PolicyError::NoBaseRule => {
                StatementError::Inconsistent("an asset with rules has no rule at min_amount 0")
            }
            crate::policy::PolicyError::DuplicateMinAmount => StatementError::Order("rules"),
            crate::policy::PolicyError::RequiredOutOfRange => {
                StatementError::Inconsistent("required_approvals must be 1 to 10")
            }
        })?;
        policies.insert(asset, policy);
    }
    Ok(policies)
}

/// Sorts automated approvers by asset then key id; each must be distinct, have a limit above 0
/// and be a `SERVICE` key of the registry.
fn automated_approvers(
    mut automated: Vec<AutomatedApprover>,
    keys: &BTreeMap<KeyId, RegisteredKey>,
) -> Result<Vec<AutomatedApprover>, StatementError> {
    automated.sort_by(|a, b| (a.asset.as_str(), a.key_id).cmp(&(b.asset.as_str(), b.key_id)));
    if automated
        .windows(2)
        .any(|w| (w[0].asset.as_str(), w[0].key_id) == (w[1].asset.as_str(), w[1].key_id))
    {
        return Err(StatementError::Order("automated"));
    }
    for a in &automated {
        if a.below.is_zero() {
            return Err(StatementError::Inconsistent(
                "an automated approver's limit is 0",
            ));
        }
        if keys.get(&a.key_id).map(|k| k.kind) != Some(KeyKind::Service) {
            return Err(StatementError::Inconsistent(
                "an automated approver is not a SERVICE key of the registry",
            ));
        }
    }
    Ok(automated)
}

/// Validates credit rules per asset with the approval policy's rules (a base rule at 0, distinct
/// min amounts, 1 to 10 operators).
fn credit_policies(
    rules: Vec<(AssetCode, CreditRule)>,
) -> Result<BTreeMap<String, ApprovalPolicy>, StatementError> {
    let out_of_range = StatementError::Inconsistent("required_operators must be 1 to 10");
    let mut by_asset: BTreeMap<String, Vec<ApprovalRule>> = BTreeMap::new();
    for (asset, rule) in rules {
        if rule.required_operators == 0 || rule.required_operators > MAX_REQUIRED_APPROVALS {
            return Err(out_of_range);
        }
        by_asset
            .entry(asset.as_str().to_owned())
            .or_default()
            .push(ApprovalRule {
                min_amount: rule.min_amount,
                required_approvals: rule.required_operators,
            });
    }
    by_asset
        .into_iter()
        .map(|(asset, rules)| {
            let policy = ApprovalPolicy::new(rules).map_err(|e| match e {
                crate::policy::PolicyError::NoBaseRule => StatementError::Inconsistent(
                    "an asset with credit rules has no credit rule at min_amount 0",
                ),
                crate::policy::PolicyError::DuplicateMinAmount => {
                    StatementError::Order("credit_rules")
                }
                crate::policy::PolicyError::RequiredOutOfRange => out_of_range,
            })?;
            Ok((asset, policy))
        })
        .collect()
}
