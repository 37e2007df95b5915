//! What you see is what you sign, for credit statements (`SIGNED_STATEMENTS.md`, "What an
//! operator's tool checks before it signs a credit statement"). A credit statement moves money
//! into an account, so the operations service's answer to `GetCredit` is only a claim: before an
//! operator signs a second statement, opctl checks that the answer names the credit that was
//! asked for and that every field it shows parses under the statement's rules. The statement is
//! then built from exactly those shown fields, the asked id, the operator's own `--tenant` and the
//! id of the operator's own key, never from values the answer does not show; the text and JSON
//! shown before signing are rendered from that very statement. For a credit the operator
//! proposes, the credit id is computed here from the idempotency key that is sent.

use opledger_domain::amount::Amount;
use opledger_domain::approval::{CreditStatement, KeyId};
use opledger_domain::idempotency::IdempotencyKey;
use opledger_domain::ids::TenantId;
use opledger_domain::payload::{AccountName, AssetCode};
use opledger_proto::v1 as pb;
use serde_json::{Value, json};
use std::fmt;

/// A credit's id: the 32 bytes of its key digest, written as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CreditId([u8; 32]);

impl CreditId {
    /// Parses 64 hex digits (either case); `None` for anything else.
    pub fn parse(text: &str) -> Option<CreditId> {
        let mut bytes = [0_u8; 32];
        if text.len() != 64 {
            return None;
        }
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(CreditId(bytes))
    }

    /// The id of the operator credit proposed under `key`: `IdempotencyKey::digest`.
    pub fn of_key(key: &IdempotencyKey) -> CreditId {
        CreditId(key.digest())
    }

    /// The raw bytes (field 2 of the statement).
    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex digits.
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for CreditId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for CreditId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CreditId({})", self.to_hex())
    }
}

/// The credit fields a statement is built from, each parsed under its rule: the account, asset
/// and amount an operator checks against the request they were given outside the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// The credit asked for (and named by the answer), or computed from the idempotency key.
    pub id: CreditId,
    /// The account credited.
    pub account: AccountName,
    /// The asset.
    pub asset: AssetCode,
    /// The amount in minimal units, at least 1.
    pub amount: Amount,
}

impl Shown {
    /// The statement of exactly these fields for the operator of `tenant` signing with the key
    /// `operator_key_id` under trust statement `policy_version`.
    pub fn statement(
        &self,
        tenant: TenantId,
        operator_key_id: KeyId,
        policy_version: u64,
    ) -> CreditStatement {
        CreditStatement {
            tenant_id: tenant,
            credit_id: *self.id.bytes(),
            account: self.account.clone(),
            asset: self.asset.clone(),
            amount: self.amount,
            operator_key_id,
            policy_version,
        }
    }
}

/// The credit an operator proposes with `opctl credit create`: its id computed from the
/// idempotency key that is sent, the other fields as given on the command line.
pub fn proposed(
    key: &IdempotencyKey,
    account: AccountName,
    asset: AssetCode,
    amount: Amount,
) -> Shown {
    Shown {
        id: CreditId::of_key(key),
        account,
        asset,
        amount,
    }
}

/// Why an answer of the operations service is not signed. Never echoes an unparsed value: only
/// field names and ids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// The answer is about another credit than the one asked for.
    #[error(
        "the operations service answered credit {answered} when {asked} was asked for; nothing \
         was signed"
    )]
    OtherCredit {
        /// The id the operator typed.
        asked: CreditId,
        /// The id answered, or a note that it is not 64 hex digits.
        answered: String,
    },
    /// A shown field does not parse under the credit statement's rules.
    #[error(
        "the operations service answered a credit whose {0} does not parse as a credit \
         statement field; nothing was signed"
    )]
    Field(&'static str),
}

impl Unverified {
    /// The stable reason printed (`error: <REASON>: ...`) and in `--json`.
    pub fn reason(&self) -> &'static str {
        match self {
            Unverified::OtherCredit { .. } => "CREDIT_ID_MISMATCH",
            Unverified::Field(_) => "CREDIT_UNPARSEABLE",
        }
    }

    /// Metadata for `--json` (ids and field names only).
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            Unverified::OtherCredit { asked, answered } => {
                vec![("asked", asked.to_hex()), ("answered", answered.clone())]
            }
            Unverified::Field(field) => vec![("field", (*field).to_owned())],
        }
    }
}

/// Checks the answer `c` to `GetCredit(asked)`: it names the credit asked for, and its account,
/// asset and amount (from 1 to 2^128 - 1) parse under the statement's rules. Nothing else of the
/// answer enters what is signed.
pub fn review(asked: CreditId, c: &pb::Credit) -> Result<Shown, Unverified> {
    match CreditId::parse(&c.credit_id) {
        Some(answered) if answered == asked => {}
        Some(answered) => {
            return Err(Unverified::OtherCredit {
                asked,
                answered: answered.to_hex(),
            });
        }
        None => {
            return Err(Unverified::OtherCredit {
                asked,
                answered: "(an id that is not 64 hex digits)".to_owned(),
            });
        }
    }
    let account = AccountName::parse(&c.account).map_err(|_| Unverified::Field("account"))?;
    let asset = AssetCode::parse(&c.asset).map_err(|_| Unverified::Field("asset"))?;
    let amount = Amount::parse(&c.amount)
        .ok()
        .filter(|a| !a.is_zero())
        .ok_or(Unverified::Field("amount"))?;
    Ok(Shown {
        id: asked,
        account,
        asset,
        amount,
    })
}

/// Every field of the statement, in canonical order, for people: the values exactly as they are
/// encoded (the credit id in full, the amount in minimal units).
pub fn statement_rows(s: &CreditStatement) -> [(&'static str, String); 7] {
    [
        ("tenant", s.tenant_id.to_string()),
        ("credit id", hex::encode(s.credit_id)),
        ("account", s.account.as_str().to_owned()),
        ("asset", s.asset.as_str().to_owned()),
        ("amount", s.amount.to_string()),
        ("operator key", s.operator_key_id.to_hex()),
        ("policy version", s.policy_version.to_string()),
    ]
}

/// Every field of the statement for scripts, by the name of its field in the specification.
pub fn statement_json(s: &CreditStatement) -> Value {
    json!({
        "tenant_id": s.tenant_id.to_string(),
        "credit_id": hex::encode(s.credit_id),
        "account": s.account.as_str(),
        "asset": s.asset.as_str(),
        "amount": s.amount.to_string(),
        "operator_key_id": s.operator_key_id.to_hex(),
        "policy_version": s.policy_version,
    })
}

/// What an operator is about to sign, shown before anything is signed or sent: the statement's
/// fields and nothing else.
pub fn signing_text(s: &CreditStatement) -> String {
    let mut text =
        "signing CREDIT statement (compare with the request you were given)\n".to_owned();
    for (label, value) in statement_rows(s) {
        text.push_str(&format!("{label:<15}{value}\n"));
    }
    text
}

#[cfg(test)]
#[path = "credit_review_tests.rs"]
mod tests;
