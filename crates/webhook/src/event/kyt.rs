//! `kyt.result`: a screening vendor's verdict on a withdrawal, and its schema.

use opledger_domain::OperationId;
use serde_json::Value;

use super::fields::{
    ExternalRef, Members, check_members, external_ref, operation_id, rule, string_field,
};

/// Verdict of a KYT screening.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KytVerdict {
    /// The withdrawal may proceed.
    Pass,
    /// The withdrawal must not proceed.
    Fail,
}

impl KytVerdict {
    /// Wire form: `"pass"` or `"fail"`.
    pub fn as_str(self) -> &'static str {
        match self {
            KytVerdict::Pass => "pass",
            KytVerdict::Fail => "fail",
        }
    }
}

/// `kyt.result`: a screening vendor's verdict on one of our withdrawals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KytResult {
    operation_id: OperationId,
    result: KytVerdict,
    provider_ref: ExternalRef,
}

impl KytResult {
    /// The screened withdrawal.
    pub fn operation_id(&self) -> OperationId {
        self.operation_id
    }

    /// The verdict.
    pub fn result(&self) -> KytVerdict {
        self.result
    }

    /// The vendor's reference of the screening.
    pub fn provider_ref(&self) -> &ExternalRef {
        &self.provider_ref
    }
}

/// Reads a `kyt.result` event's `data`.
pub(super) fn kyt_result(data: &Members<Value>) -> Result<KytResult, String> {
    check_members(data, &["operation_id", "result", "provider_ref"])?;
    let operation_id = operation_id(data)?;
    let result = match string_field(data, "result")? {
        "pass" => KytVerdict::Pass,
        "fail" => KytVerdict::Fail,
        _ => return Err(rule("result", "must be \"pass\" or \"fail\"")),
    };
    let provider_ref = external_ref(data, "provider_ref")?;
    Ok(KytResult {
        operation_id,
        result,
        provider_ref,
    })
}
