//! Names of wire enums as operators type and read them (`CONFIRMED`, not
//! `WITHDRAWAL_STATE_CONFIRMED`), and which states end a `watch`.

use opledger_proto::v1::{
    CreditKind, CreditState, Executor, InboxIssueKind, RiskFlag, WithdrawalState,
};

const STATE_PREFIX: &str = "WITHDRAWAL_STATE_";
const FLAG_PREFIX: &str = "RISK_FLAG_";
const KIND_PREFIX: &str = "INBOX_ISSUE_KIND_";
const CREDIT_STATE_PREFIX: &str = "CREDIT_STATE_";
const CREDIT_KIND_PREFIX: &str = "CREDIT_KIND_";
const EXECUTOR_PREFIX: &str = "EXECUTOR_";

/// The states a withdrawal can be in, in lifecycle order, as operators name them.
pub const STATE_NAMES: [&str; 10] = [
    "REQUESTED",
    "APPROVED",
    "SIGNING",
    "SIGNED",
    "BROADCAST",
    "UNKNOWN",
    "CONFIRMED",
    "VERIFIED_NOT_SENT",
    "FAILED_TERMINAL",
    "REJECTED",
];

/// The short name of a wire state, `STATE_<n>` for a number this build does not know.
pub fn state_name(state: i32) -> String {
    match WithdrawalState::try_from(state) {
        Ok(WithdrawalState::Unspecified) | Err(_) => format!("STATE_{state}"),
        Ok(known) => short(known.as_str_name(), STATE_PREFIX),
    }
}

/// Parses a state as an operator types it: any case, `-` or `_`, with or without the
/// `WITHDRAWAL_STATE_` prefix.
pub fn parse_state(text: &str) -> Result<WithdrawalState, String> {
    let normalized = text.trim().to_ascii_uppercase().replace(['-', ' '], "_");
    let name = normalized
        .strip_prefix(STATE_PREFIX)
        .unwrap_or(&normalized)
        .to_owned();
    match WithdrawalState::from_str_name(&format!("{STATE_PREFIX}{name}")) {
        Some(WithdrawalState::Unspecified) | None => {
            Err(format!("unknown state; one of {}", STATE_NAMES.join(", ")))
        }
        Some(state) => Ok(state),
    }
}

/// The short name of a risk flag.
pub fn risk_flag_name(flag: i32) -> String {
    match RiskFlag::try_from(flag) {
        Ok(known) => short(known.as_str_name(), FLAG_PREFIX),
        Err(_) => format!("FLAG_{flag}"),
    }
}

/// The short name of an executor (`LOCAL_SIGNER`, `CUSTODIAN`), `EXECUTOR_<n>` for a number this
/// build does not know.
pub fn executor_name(executor: i32) -> String {
    match Executor::try_from(executor) {
        Ok(Executor::Unspecified) | Err(_) => format!("EXECUTOR_{executor}"),
        Ok(known) => short(known.as_str_name(), EXECUTOR_PREFIX),
    }
}

/// The short name of an inbox issue kind.
pub fn inbox_kind_name(kind: i32) -> String {
    match InboxIssueKind::try_from(kind) {
        Ok(known) => short(known.as_str_name(), KIND_PREFIX),
        Err(_) => format!("KIND_{kind}"),
    }
}

/// The short name of a credit's state (`PENDING`, `CREDITED`, `REFUSED`), `STATE_<n>` for a
/// number this build does not know.
pub fn credit_state_name(state: i32) -> String {
    match CreditState::try_from(state) {
        Ok(CreditState::Unspecified) | Err(_) => format!("STATE_{state}"),
        Ok(known) => short(known.as_str_name(), CREDIT_STATE_PREFIX),
    }
}

/// The short name of a credit's kind (`DEPOSIT`, `OPERATOR`).
pub fn credit_kind_name(kind: i32) -> String {
    match CreditKind::try_from(kind) {
        Ok(CreditKind::Unspecified) | Err(_) => format!("KIND_{kind}"),
        Ok(known) => short(known.as_str_name(), CREDIT_KIND_PREFIX),
    }
}

/// How a state ends a `watch`, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Final {
    /// CONFIRMED: paid and settled.
    Wanted,
    /// REJECTED, VERIFIED_NOT_SENT or FAILED_TERMINAL.
    Unwanted,
}

/// Whether `state` is final or settled for `watch`. CONFIRMED counts although a reorg can still
/// reopen it within the reorg window.
pub fn final_kind(state: i32) -> Option<Final> {
    match WithdrawalState::try_from(state).ok()? {
        WithdrawalState::Confirmed => Some(Final::Wanted),
        WithdrawalState::Rejected
        | WithdrawalState::VerifiedNotSent
        | WithdrawalState::FailedTerminal => Some(Final::Unwanted),
        _ => None,
    }
}

fn short(name: &str, prefix: &str) -> String {
    name.strip_prefix(prefix).unwrap_or(name).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_name_round_trips() {
        for name in STATE_NAMES {
            let state = parse_state(name).expect(name);
            assert_eq!(state_name(state as i32), name);
        }
        assert_eq!(state_name(0), "STATE_0");
        assert_eq!(state_name(99), "STATE_99");
    }

    #[test]
    fn states_parse_in_any_spelling() {
        for text in [
            "verified_not_sent",
            "Verified-Not-Sent",
            " VERIFIED_NOT_SENT ",
            "withdrawal_state_verified_not_sent",
        ] {
            assert_eq!(
                parse_state(text),
                Ok(WithdrawalState::VerifiedNotSent),
                "{text}"
            );
        }
        for text in ["", "UNSPECIFIED", "PAID", "WITHDRAWAL_STATE_"] {
            let err = parse_state(text).expect_err(text);
            assert!(err.contains("REQUESTED") && err.contains("REJECTED"));
        }
    }

    #[test]
    fn only_final_or_settled_states_end_a_watch() {
        assert_eq!(
            final_kind(WithdrawalState::Confirmed as i32),
            Some(Final::Wanted)
        );
        for unwanted in [
            WithdrawalState::Rejected,
            WithdrawalState::VerifiedNotSent,
            WithdrawalState::FailedTerminal,
        ] {
            assert_eq!(final_kind(unwanted as i32), Some(Final::Unwanted));
        }
        for open in [
            WithdrawalState::Requested,
            WithdrawalState::Approved,
            WithdrawalState::Signing,
            WithdrawalState::Signed,
            WithdrawalState::Broadcast,
            WithdrawalState::Unknown,
            WithdrawalState::Unspecified,
        ] {
            assert_eq!(final_kind(open as i32), None, "{open:?}");
        }
        assert_eq!(final_kind(42), None);
    }

    #[test]
    fn flags_and_kinds_have_short_names() {
        assert_eq!(
            risk_flag_name(RiskFlag::SameDestinationAndAmount as i32),
            "SAME_DESTINATION_AND_AMOUNT"
        );
        assert_eq!(risk_flag_name(7), "FLAG_7");
        assert_eq!(
            inbox_kind_name(InboxIssueKind::DeadLetter as i32),
            "DEAD_LETTER"
        );
        assert_eq!(inbox_kind_name(9), "KIND_9");
        assert_eq!(credit_state_name(CreditState::Pending as i32), "PENDING");
        assert_eq!(credit_state_name(CreditState::Credited as i32), "CREDITED");
        assert_eq!(credit_state_name(0), "STATE_0");
        assert_eq!(credit_kind_name(CreditKind::Operator as i32), "OPERATOR");
        assert_eq!(credit_kind_name(CreditKind::Deposit as i32), "DEPOSIT");
        assert_eq!(credit_kind_name(7), "KIND_7");
    }
}
