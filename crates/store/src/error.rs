//! The store's error type.

use opledger_domain::payload::PayloadField;
use opledger_domain::state::{OperationState, TransitionError};

/// Everything a store call can refuse or fail with. Messages never carry keys, addresses or memos.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The idempotency key was used before by this tenant with a different payload.
    #[error("idempotency key reused with a different payload")]
    KeyReused {
        /// The payload fields that differ from the stored operation, in field order.
        fields: Vec<PayloadField>,
    },
    /// The source account's available balance does not cover the amount.
    #[error("insufficient funds in the source account")]
    InsufficientFunds,
    /// No such operation, account or key for this tenant.
    #[error("{what} not found")]
    NotFound {
        /// What was looked up.
        what: &'static str,
    },
    /// The domain transition table refuses the move or the actor.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The conditional update matched no row: the operation is not in the expected state (or the
    /// hash or lease predicate failed). Nothing changed.
    #[error("operation is in state {current:?}, not the expected one")]
    Conflict {
        /// The state found after the refused update, if the operation exists.
        current: Option<OperationState>,
    },
    /// The payload hash named by the caller is not the operation's stored hash. Nothing changed
    /// (a security event was recorded).
    #[error("payload hash does not match the stored operation")]
    HashMismatch,
    /// The operation carries risk flags the approver did not acknowledge.
    #[error("risk flags not acknowledged")]
    RiskFlagsNotAcknowledged {
        /// The flags still to acknowledge.
        flags: Vec<crate::operations::RiskFlag>,
    },
    /// The tenant has no published trust statement.
    #[error("the tenant has no trust statement")]
    TrustMissing,
    /// A signed decision does not verify or cannot count (see the refusal). Nothing changed
    /// (a forged signature was recorded as a security event).
    #[error(transparent)]
    ApprovalRefused(#[from] opledger_domain::approval::Refusal),
    /// The tenant's policy needs a recorded KYT pass before approvals count.
    #[error("a KYT pass must be recorded before approvals count")]
    KytPassRequired,
    /// The operation is no longer awaiting approval.
    #[error("operation is not awaiting approval (state {state:?})")]
    NotPending {
        /// Its current state.
        state: OperationState,
    },
    /// A hold was not in the state the transition needed: a ledger invariant would break.
    #[error("hold of the operation is not {expected}")]
    HoldMismatch {
        /// The hold status the transition required.
        expected: &'static str,
    },
    /// The change would take an account's balance (available + held) or an amount beyond the
    /// amount type's range (unsigned 128 bits). Nothing changed.
    #[error("{what} would exceed the amount range")]
    OutOfRange {
        /// What would have left the range.
        what: &'static str,
    },
    /// A stored value no longer parses as its domain type (corruption or a bypassed constraint).
    #[error("stored {what} is invalid")]
    Corrupt {
        /// What failed to parse.
        what: &'static str,
    },
    /// An original attempt's sender is not its tenant's ACTIVE wallet on its network in the
    /// wallet registry (another signer rotated it out): nothing stored. The signer's
    /// configuration is out of date.
    #[error("the sender's wallet is not the tenant's active wallet on this network")]
    WalletNotActive,
    /// A signer's configuration lists as its active wallet one that the wallet registry holds as
    /// RETIRING or RETIRED: the configuration predates a rotation. Nothing registered.
    #[error(
        "a wallet this configuration lists as active was rotated out (RETIRING or RETIRED in \
         signer_wallets): the configuration predates the rotation"
    )]
    WalletRotatedOut,
    /// The database refused or failed the statement.
    #[error("database error")]
    Database(#[from] sqlx::Error),
}

/// The database's range constraints on ledger amounts (migration 16), and what each bounds.
const RANGE_CONSTRAINTS: [(&str, &str); 6] = [
    ("ledger_accounts_amount_range", "account balance"),
    ("ledger_holds_amount_range", "hold amount"),
    ("ledger_credits_amount_range", "credit amount"),
    ("ledger_postings_amount_range", "posting amount"),
    ("withdrawal_payloads_amount_range", "withdrawal amount"),
    ("credit_proposals_amount_range", "credit amount"),
];

impl StoreError {
    /// [`StoreError::OutOfRange`] when the database refused the statement on one of the ledger's
    /// amount-range constraints, the error unchanged otherwise.
    pub(crate) fn range(error: sqlx::Error) -> StoreError {
        if let sqlx::Error::Database(db) = &error
            && db.code().as_deref() == Some("23514")
            && let Some(what) = db.constraint().and_then(|name| {
                RANGE_CONSTRAINTS
                    .iter()
                    .find(|(constraint, _)| *constraint == name)
                    .map(|(_, what)| *what)
            })
        {
            return StoreError::OutOfRange { what };
        }
        StoreError::Database(error)
    }

    /// [`StoreError::WalletNotActive`] when the database refused an original attempt whose
    /// sender is not an ACTIVE wallet (migration 24), the error unchanged otherwise.
    pub(crate) fn wallet(error: sqlx::Error) -> StoreError {
        if let sqlx::Error::Database(db) = &error
            && db.code().as_deref() == Some("23514")
            && db.constraint() == Some("signer_wallets_active_original")
        {
            return StoreError::WalletNotActive;
        }
        StoreError::Database(error)
    }

    /// True when the database could not be reached, timed out, or lost its primary under the
    /// statement (a failover: the server shut down or crashed, the connection was cut, or the
    /// node it reached is a standby now): the caller may retry, with the same idempotency key.
    /// Whether a commit in flight happened is then unknown; every write path resolves it by its
    /// own idempotency.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Database(
                sqlx::Error::Io(_)
                | sqlx::Error::PoolTimedOut
                | sqlx::Error::PoolClosed
                | sqlx::Error::Tls(_),
            ) => true,
            StoreError::Database(sqlx::Error::Database(db)) => {
                db.code().as_deref().is_some_and(primary_lost)
            }
            _ => false,
        }
    }
}

/// SQLSTATEs of a primary lost under a session: connection exceptions (class 08),
/// `admin_shutdown` (57P01: a switchover or a fast shutdown), `crash_shutdown` (57P02: another
/// backend crashed), `cannot_connect_now` (57P03: starting or promoting), and
/// `read_only_sql_transaction` (25006: the node was demoted to a standby).
fn primary_lost(code: &str) -> bool {
    code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03" | "25006")
}

impl StoreError {
    /// Whether a failed first connection may succeed if tried again: the database unreachable,
    /// the connection reset or cut mid-handshake, or the server not accepting connections yet
    /// (SQLSTATE classes 08 and 57). A refused login, a missing database or a bad URL is not.
    pub fn may_connect_later(&self) -> bool {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => db
                .code()
                .is_some_and(|code| code.starts_with("08") || code.starts_with("57")),
            StoreError::Database(sqlx::Error::Protocol(_)) => true,
            other => other.is_unavailable(),
        }
    }

    /// A description that is safe to log: for database errors the SQLSTATE, constraint and kind
    /// only, never the server's detail text (which can quote row values such as destinations).
    pub fn log_safe(&self) -> String {
        match self {
            StoreError::Database(sqlx::Error::Database(db)) => format!(
                "database error sqlstate={} constraint={}",
                db.code().as_deref().unwrap_or("-"),
                db.constraint().unwrap_or("-")
            ),
            StoreError::Database(sqlx::Error::Io(e)) => {
                format!("database io error kind={:?}", e.kind())
            }
            StoreError::Database(other) => format!("database error: {}", variant_name(other)),
            other => other.to_string(),
        }
    }
}

fn variant_name(error: &sqlx::Error) -> &'static str {
    match error {
        sqlx::Error::PoolTimedOut => "pool timed out",
        sqlx::Error::PoolClosed => "pool closed",
        sqlx::Error::RowNotFound => "row not found",
        sqlx::Error::Tls(_) => "tls",
        sqlx::Error::Protocol(_) => "protocol",
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => "decode",
        sqlx::Error::Configuration(_) => "configuration",
        _ => "other",
    }
}

/// Result of a store call.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::primary_lost;

    #[test]
    fn a_lost_primary_is_retryable_and_a_refusal_is_not() {
        for code in [
            "08006", "08003", "08001", "57P01", "57P02", "57P03", "25006",
        ] {
            assert!(primary_lost(code), "{code}");
        }
        // unique_violation, serialization_failure, query_canceled, insufficient_privilege.
        for code in ["23505", "40001", "57014", "42501", "28P01"] {
            assert!(!primary_lost(code), "{code}");
        }
    }
}
