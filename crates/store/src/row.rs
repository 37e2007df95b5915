//! Stored columns decoded into the domain's words, each in one place: a value no writer of this
//! schema produces is a corrupt row ([`StoreError::Corrupt`]), never a guess.

use crate::{Result, StoreError};
use opledger_domain::state::OperationState;

/// An operation's `state` column.
pub(crate) fn state(text: &str) -> Result<OperationState> {
    text.parse()
        .map_err(|_| StoreError::Corrupt { what: "state" })
}
