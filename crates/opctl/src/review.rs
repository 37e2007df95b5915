//! What you see is what you sign. The operations service's answer to `GetWithdrawal` is only a
//! claim: before an approver signs, opctl checks that it names the withdrawal that was asked for,
//! rebuilds the domain payload from exactly the fields it shows (for the approver's own tenant)
//! and hashes it with the domain's canonical encoding (`WithdrawalPayload::hash`,
//! `crates/domain/testdata/README.md`). The service's hash must be that hash; the statement
//! carries the hash computed here, never the service's.

use opledger_domain::AmountError;
use opledger_domain::amount::Amount;
use opledger_domain::ids::{OperationId, TenantId};
use opledger_domain::payload::{
    AccountName, AssetCode, Destination, Memo, NetworkId, PayloadError, PayloadHash,
    WithdrawalPayload,
};
use opledger_proto::v1 as pb;

/// A withdrawal whose answer verified: the payload opctl shows and signs for, and opctl's own
/// hash of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewed {
    /// The withdrawal the approver asked for (and the answer named).
    pub id: OperationId,
    /// The payload rebuilt from the shown fields, for the approver's tenant.
    pub payload: WithdrawalPayload,
    /// SHA-256 of the payload's canonical encoding, computed by opctl.
    pub hash: PayloadHash,
}

/// Why an answer of the operations service is not signed. Never carries a field's value (the
/// destination and memo are sensitive): only field names, ids and hashes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// The answer is about another withdrawal than the one asked for.
    #[error(
        "the operations service answered withdrawal {answered} when {asked} was asked for; \
         nothing was signed"
    )]
    OtherWithdrawal {
        /// The id the approver typed.
        asked: OperationId,
        /// The id answered, or a note that it is not a UUID.
        answered: String,
    },
    /// The answer holds no payload.
    #[error("the operations service answered no payload; nothing was signed")]
    NoPayload,
    /// A shown field does not parse into the domain payload.
    #[error(
        "the operations service answered a payload opctl cannot rebuild ({0}); nothing was signed"
    )]
    Field(#[from] PayloadError),
    /// An amount field is not a canonical decimal.
    #[error(
        "the operations service answered a payload opctl cannot rebuild (invalid {field}: \
         {source}); nothing was signed"
    )]
    Amount {
        /// Wire name of the field.
        field: &'static str,
        /// Why.
        source: AmountError,
    },
    /// The answered hash is not 64 hex digits.
    #[error(
        "the operations service answered a payload hash that is not 64 hex digits; nothing was \
         signed"
    )]
    MalformedHash,
    /// The service's hash is not the hash of the fields it showed, for this tenant.
    #[error(
        "the payload hash the operations service answered ({answered}) is not the hash of the \
         fields it showed ({computed}, recomputed by opctl for tenant {tenant}): the fields or \
         the hash were changed on the operations host or on the way, or the withdrawal is not \
         this tenant's; nothing was signed"
    )]
    HashMismatch {
        /// The approver's tenant (`--tenant`), part of the hashed payload.
        tenant: TenantId,
        /// What the service answered.
        answered: PayloadHash,
        /// What the shown fields hash to.
        computed: PayloadHash,
    },
}

impl Unverified {
    /// The stable reason printed (`error: <REASON>: ...`) and in `--json`.
    pub fn reason(&self) -> &'static str {
        match self {
            Unverified::OtherWithdrawal { .. } => "WITHDRAWAL_ID_MISMATCH",
            Unverified::NoPayload
            | Unverified::Field(_)
            | Unverified::Amount { .. }
            | Unverified::MalformedHash => "PAYLOAD_UNPARSEABLE",
            Unverified::HashMismatch { .. } => "DISPLAYED_PAYLOAD_MISMATCH",
        }
    }

    /// Metadata for `--json` (ids, hashes and field names only).
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        match self {
            Unverified::OtherWithdrawal { asked, answered } => {
                vec![("asked", asked.to_string()), ("answered", answered.clone())]
            }
            Unverified::NoPayload => vec![("field", "payload".to_owned())],
            Unverified::Field(e) => vec![("field", e.field().to_owned())],
            Unverified::Amount { field, .. } => vec![("field", (*field).to_owned())],
            Unverified::MalformedHash => vec![("field", "payload_hash".to_owned())],
            Unverified::HashMismatch {
                answered, computed, ..
            } => vec![
                ("answered_hash", answered.to_hex()),
                ("computed_hash", computed.to_hex()),
            ],
        }
    }
}

/// Checks the answer `w` to `GetWithdrawal(asked)` for an approver of `tenant`: same withdrawal,
/// every shown field parses into the domain payload, and the answered hash is the hash opctl
/// computes from those fields.
pub fn review(
    asked: OperationId,
    tenant: TenantId,
    w: &pb::Withdrawal,
) -> Result<Reviewed, Unverified> {
    match w.withdrawal_id.parse::<OperationId>() {
        Ok(answered) if answered == asked => {}
        Ok(answered) => {
            return Err(Unverified::OtherWithdrawal {
                asked,
                answered: answered.to_string(),
            });
        }
        Err(_) => {
            return Err(Unverified::OtherWithdrawal {
                asked,
                answered: "(an id that is not a UUID)".to_owned(),
            });
        }
    }
    let wire = w.payload.as_ref().ok_or(Unverified::NoPayload)?;
    let payload = payload(tenant, wire)?;
    let answered = PayloadHash::from_hex(&w.payload_hash).map_err(|_| Unverified::MalformedHash)?;
    let computed = payload.hash();
    if computed != answered {
        return Err(Unverified::HashMismatch {
            tenant,
            answered,
            computed,
        });
    }
    Ok(Reviewed {
        id: asked,
        payload,
        hash: computed,
    })
}

/// The domain payload of `tenant` the wire fields describe, with the domain's own parsers (as
/// the operations service builds it when the withdrawal is created).
fn payload(
    tenant: TenantId,
    wire: &pb::WithdrawalPayload,
) -> Result<WithdrawalPayload, Unverified> {
    let amount = |field: &'static str, text: &str| {
        Amount::parse(text).map_err(|source| Unverified::Amount { field, source })
    };
    let payload = WithdrawalPayload {
        tenant_id: tenant,
        source_account: AccountName::parse(&wire.source_account)?,
        asset: AssetCode::parse(&wire.asset)?,
        network: NetworkId::parse(&wire.network)?,
        destination: Destination::parse(&wire.destination)?,
        memo: wire.memo.as_deref().map(Memo::parse).transpose()?,
        amount: amount("amount", &wire.amount)?,
        fee_cap: amount("fee_cap", &wire.fee_cap)?,
        policy_version: wire.policy_version,
    };
    payload.validate()?;
    Ok(payload)
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
