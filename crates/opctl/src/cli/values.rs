//! The values of the command line: outcomes, secrets that never show in `Debug`, and the parsers
//! clap runs on flag values (a refused value is a usage error, exit 2).

use crate::credit_review::CreditId;
use crate::states;
use clap::ValueEnum;
use opledger_proto::v1::WithdrawalState;
use std::fmt;

/// Outcomes an operator may resolve to.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A transfer attempt is included and final.
    #[value(name = "CONFIRMED")]
    Confirmed,
    /// A cancel is included and final, or the nonce was consumed by another transaction.
    #[value(name = "VERIFIED_NOT_SENT", alias = "verified-not-sent")]
    VerifiedNotSent,
    /// A transfer is included but not final yet.
    #[value(name = "BROADCAST")]
    Broadcast,
}

impl Outcome {
    /// The wire state.
    pub fn state(self) -> WithdrawalState {
        match self {
            Outcome::Confirmed => WithdrawalState::Confirmed,
            Outcome::VerifiedNotSent => WithdrawalState::VerifiedNotSent,
            Outcome::Broadcast => WithdrawalState::Broadcast,
        }
    }
}

/// An API key; its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key itself, only to build the authorization header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// A secret given as hex (an approver key seed); its `Debug` never shows it and it is zeroized
/// when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretHex(zeroize::Zeroizing<String>);

impl SecretHex {
    /// The hex text, only to decode the key.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHex(<redacted>)")
    }
}

#[cfg(test)]
impl SecretHex {
    /// A value as the parser would make it.
    pub fn from_test(text: &str) -> SecretHex {
        SecretHex(zeroize::Zeroizing::new(text.to_owned()))
    }
}

// Never fails: an error message would quote the key (it is checked when it is used).
pub(super) fn parse_secret_hex(text: &str) -> Result<SecretHex, std::convert::Infallible> {
    Ok(SecretHex(zeroize::Zeroizing::new(text.trim().to_owned())))
}

pub(super) fn parse_tenant_id(text: &str) -> Result<String, String> {
    uuid::Uuid::parse_str(text.trim())
        .map(|id| id.to_string())
        .map_err(|_| "not a tenant id (a UUID)".to_owned())
}

/// An idempotency key given on the command line; its `Debug` never shows it. Checked after
/// parsing (see `commands::create`) because clap would echo a value it refuses.
#[derive(Clone, PartialEq, Eq)]
pub struct IdempotencyKeyArg(pub String);

impl fmt::Debug for IdempotencyKeyArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdempotencyKeyArg(<redacted>)")
    }
}

impl From<String> for IdempotencyKeyArg {
    fn from(value: String) -> Self {
        IdempotencyKeyArg(value)
    }
}

// Never fails: an error message would quote the key.
pub(super) fn parse_api_key(text: &str) -> Result<ApiKey, std::convert::Infallible> {
    Ok(ApiKey(text.trim().to_owned()))
}

pub(super) fn parse_amount(text: &str) -> Result<String, String> {
    opledger_domain::Amount::parse(text)
        .map(|a| a.to_string())
        .map_err(|e| format!("{e} (minimal units as digits, e.g. 1000000000000000 wei)"))
}

pub(super) fn parse_credit_amount(text: &str) -> Result<String, String> {
    let amount = parse_amount(text)?;
    if amount == "0" {
        return Err("a credit is at least 1 minimal unit".to_owned());
    }
    Ok(amount)
}

pub(super) fn parse_credit_id(text: &str) -> Result<CreditId, String> {
    CreditId::parse(text.trim()).ok_or_else(|| "not a credit id (64 hex digits)".to_owned())
}

pub(super) fn parse_withdrawal_id(text: &str) -> Result<String, String> {
    uuid::Uuid::parse_str(text.trim())
        .map(|id| id.to_string())
        .map_err(|_| "not a withdrawal id (a UUID)".to_owned())
}

pub(super) fn parse_state(text: &str) -> Result<WithdrawalState, String> {
    states::parse_state(text)
}
