//! Failures and exit codes: a gRPC status (with its `google.rpc.ErrorInfo`) or a local problem,
//! classified as refused (1), usage (2) or transient (3).

use opledger_proto::code_name;
use std::collections::BTreeMap;
use std::process::ExitCode;
use tonic::{Code, Status};
use tonic_types::StatusExt;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: the service (or opctl on its rules) refused the request.
pub const EXIT_REFUSED: u8 = 1;
/// Exit code: usage error (clap uses the same).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: cannot connect, unavailable, or no answer in time.
pub const EXIT_UNAVAILABLE: u8 = 3;
/// Exit code: `watch` ended in an unwanted final state.
pub const EXIT_UNWANTED_FINAL: u8 = 4;
/// Exit code: `watch` timed out.
pub const EXIT_WATCH_TIMEOUT: u8 = 5;
/// Exit code: the operations service's answer did not verify (another withdrawal or credit than
/// the one asked for, a hash that is not the hash of the fields shown, a field that does not
/// parse); nothing was signed or sent.
pub const EXIT_UNTRUSTED: u8 = 6;

/// The `ErrorInfo` domain of opledger errors.
const DOMAIN: &str = opledger_proto::ERROR_DOMAIN;

/// What kind of failure, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A definite answer: retrying the same request gives the same refusal.
    Refused,
    /// The command line is wrong.
    Usage,
    /// Nothing definite happened (or nothing is known): retry is safe for idempotent calls.
    Transient,
    /// A service's answer contradicts itself or the request: it is not trusted, nothing was
    /// signed; retrying does not help, reporting it does.
    Untrusted,
}

/// One failure as printed: `error: <reason>: <message>`, or the JSON error object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Refused, usage or transient.
    pub kind: Kind,
    /// The gRPC code name (`FAILED_PRECONDITION`), or `UNAVAILABLE` / `INVALID_ARGUMENT` for
    /// local failures.
    pub code: &'static str,
    /// The `ErrorInfo` reason (`EVIDENCE_MISMATCH`), else the code name.
    pub reason: String,
    /// What happened.
    pub message: String,
    /// The `ErrorInfo` metadata (never keys, addresses or memos: the services keep them out).
    pub metadata: BTreeMap<String, String>,
    /// Field or precondition violations (`google.rpc.BadRequest`, `PreconditionFailure`):
    /// (field or subject, description).
    pub violations: Vec<(String, String)>,
}

impl Failure {
    /// A status answered by (or on the way to) `service`.
    pub fn from_status(service: &str, status: &Status) -> Failure {
        let details = status.get_error_details();
        let info = details.error_info().filter(|info| info.domain == DOMAIN);
        let code = code_name(status.code());
        let mut violations = Vec::new();
        if let Some(bad) = details.bad_request() {
            violations.extend(
                bad.field_violations
                    .iter()
                    .map(|v| (v.field.clone(), v.description.clone())),
            );
        }
        if let Some(failed) = details.precondition_failure() {
            violations.extend(
                failed
                    .violations
                    .iter()
                    .map(|v| (v.subject.clone(), v.description.clone())),
            );
        }
        let kind = kind_of(status.code());
        let mut message = status.message().to_owned();
        if message.is_empty() {
            message = format!("{service} service answered {code}");
        } else if kind == Kind::Transient && info.is_none() {
            // A transport-level status (no answer from the service): say which service.
            message = format!("{service} service: {message}");
        }
        Failure {
            kind,
            code,
            reason: info.map_or_else(|| code.to_owned(), |i| i.reason.clone()),
            message,
            metadata: info
                .map(|i| i.metadata.clone().into_iter().collect())
                .unwrap_or_default(),
            violations,
        }
    }

    /// The service at `url` could not be reached.
    pub fn unreachable(service: &str, url: &str, error: &dyn std::error::Error) -> Failure {
        Failure {
            kind: Kind::Transient,
            code: "UNAVAILABLE",
            reason: "UNAVAILABLE".to_owned(),
            message: format!(
                "cannot connect to the {service} service at {}: {}",
                redact_url(url),
                error_chain(error)
            ),
            metadata: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    /// A usage problem found after parsing (exit 2). `message` must not quote secrets.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure {
            kind: Kind::Usage,
            code: "INVALID_ARGUMENT",
            reason: "USAGE".to_owned(),
            message: message.into(),
            metadata: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    /// opctl refuses to send a request the service would refuse on its rules (exit 1).
    pub fn refused_locally(
        reason: &str,
        message: impl Into<String>,
        metadata: &[(&str, String)],
    ) -> Failure {
        Failure {
            kind: Kind::Refused,
            code: "FAILED_PRECONDITION",
            reason: reason.to_owned(),
            message: message.into(),
            metadata: metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            violations: Vec::new(),
        }
    }

    /// A usage problem with its own reason (exit 2). `message` must not quote secrets.
    pub fn usage_because(reason: &str, message: impl Into<String>) -> Failure {
        Failure {
            reason: reason.to_owned(),
            ..Failure::usage(message)
        }
    }

    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self.kind {
            Kind::Refused => EXIT_REFUSED,
            Kind::Usage => EXIT_USAGE,
            Kind::Transient => EXIT_UNAVAILABLE,
            Kind::Untrusted => EXIT_UNTRUSTED,
        }
    }
}

impl From<crate::review::Unverified> for Failure {
    fn from(e: crate::review::Unverified) -> Failure {
        Failure {
            kind: Kind::Untrusted,
            code: "FAILED_PRECONDITION",
            reason: e.reason().to_owned(),
            message: e.to_string(),
            metadata: e
                .metadata()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            violations: Vec::new(),
        }
    }
}

impl From<crate::credit_review::Unverified> for Failure {
    fn from(e: crate::credit_review::Unverified) -> Failure {
        Failure {
            kind: Kind::Untrusted,
            code: "FAILED_PRECONDITION",
            reason: e.reason().to_owned(),
            message: e.to_string(),
            metadata: e
                .metadata()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            violations: Vec::new(),
        }
    }
}

/// What to do about a refusal, for people (text output only).
pub fn hint(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "APPROVER_KEY_UNKNOWN" => {
            "the approver key is not in the tenant's trust statement: give its public key \
             (printed by `opctl approver keygen`) to the tenant administrator, who registers it \
             with `opledger-admin trust publish --approver`"
        }
        "APPROVER_KEY_REVOKED" => {
            "the approver key was revoked in the tenant's trust statement: generate a new one \
             (`opctl approver keygen`) and have it registered"
        }
        "APPROVAL_SIGNATURE_INVALID" => {
            "the signature does not verify: check --key-file / OPLEDGER_APPROVER_KEY holds your \
             registered approver key"
        }
        "APPROVAL_FOR_OTHER_OPERATION" => {
            "the statement names another tenant, withdrawal or decision: check --tenant / \
             OPCTL_TENANT_ID is the API key's tenant"
        }
        "POLICY_VERSION_UNKNOWN" => {
            "the tenant's trust statement changed or is unknown: run the command again to sign \
             under the current policy version (opctl policy --asset ...)"
        }
        "TRUST_STATEMENT_MISSING" => {
            "the tenant has no trust statement yet: its administrator publishes one with \
             `opledger-admin trust publish`"
        }
        "WITHDRAWAL_ID_MISMATCH" | "PAYLOAD_UNPARSEABLE" | "DISPLAYED_PAYLOAD_MISMATCH" => {
            "the operations service's answer does not verify: do not approve this withdrawal \
             from this connection; report it to security (the operations host or the path to it \
             may be compromised)"
        }
        "CREDIT_ID_MISMATCH" | "CREDIT_UNPARSEABLE" => {
            "the operations service's answer does not verify: do not sign this credit from this \
             connection; report it to security (the operations host or the path to it may be \
             compromised)"
        }
        "CREDIT_STATEMENT_INVALID" => {
            "the credit statement does not verify against the tenant's trust statement: check \
             --key-file / OPLEDGER_OPERATOR_KEY holds your OPERATOR key (an approver key never \
             signs credits; the administrator registers operators with `opledger-admin trust \
             publish --operator`), --tenant / OPCTL_TENANT_ID is the API key's tenant and \
             --policy-version the current one; if the fields opctl showed are not those of the \
             credit, the operations host showed you other fields: report it to security"
        }
        "CREDIT_NOT_PENDING" => {
            "the credit was already credited or refused by the witness: there is nothing to sign \
             (opctl credit get <credit-id>)"
        }
        "CLEAR_TEXT_NOT_ALLOWED" => {
            "use https:// with --ca-file (the CA that issued the service's certificate), or \
             --allow-clear-text on a private segment you trust"
        }
        "KYT_PASS_REQUIRED" => {
            "the tenant's policy needs a recorded KYT pass for this withdrawal before approvals \
             count: wait for the KYT result, then approve again"
        }
        "ROLE_NOT_ALLOWED" => {
            "the API key's role may not make this call: opctl --help says which role each command \
             needs (operator for unresolved, resolve, inbox, credit and custodian); the tenant \
             administrator issues a key of that role with opledger-admin key create --role <role>"
        }
        _ => return binding_hint(reason),
    })
}

/// What to do about a refusal of `opctl custodian bind` or `candidates`, for people.
fn binding_hint(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "NOT_BINDABLE" => {
            "nothing was recorded, and nothing is to be bound here: opctl get <withdrawal-id> shows \
             the withdrawal; only a BROADCAST or UNKNOWN withdrawal of a custodian without lookup \
             by our reference (no_lookup) takes a binding, the executor follows the others alone; \
             if this executor has no account for it, point --custodian at the executor that has"
        }
        "CANDIDATE_NOT_LISTED" => {
            "nothing was recorded; the provider lists this transaction no longer, or never did \
             with this withdrawal's destination and amount in its window, or the id is mistyped: \
             list again with opctl custodian candidates <withdrawal-id> and bind a PROVIDER ID it \
             shows"
        }
        "CANDIDATE_TAKEN" => {
            "nothing was recorded; either this withdrawal is bound already, which opctl custodian \
             candidates <withdrawal-id> shows, and a binding is never changed, or this \
             transaction is another withdrawal's, sent or bound for it: list again and bind the \
             one that is this withdrawal's; if a binding in place is wrong, escalate to payments \
             operations, as opctl cannot undo it"
        }
        "CANDIDATE_AMBIGUOUS" => {
            "nothing was recorded; this transaction cannot be shown to be this withdrawal's: it \
             says nothing was broadcast while another listed transaction with the same \
             destination and amount, bound to no withdrawal, could be the payment (bind that one \
             to the withdrawal it paid first), or the provider recreated it (bind the recreated \
             one), or its status is one opledger does not know"
        }
        "PROVIDER_UNAVAILABLE" => {
            "nothing was recorded; the custodian executor could not read the provider's list just \
             now: run the same command again in a minute, binding the same transaction again is \
             safe; if it persists, check the provider's status and the executor's logs"
        }
        _ => return None,
    })
}

/// What to do about an INVALID_FIELD refusal of `field`, for people (text output only), where the
/// service's message does not say it all.
pub fn field_hint(field: &str) -> Option<&'static str> {
    Some(match field {
        "reason" => {
            "give --reason with 1 to 200 characters on one line saying why; it is kept with the \
             record, so no personal data"
        }
        "provider_id" => {
            "give the PROVIDER ID exactly as opctl custodian candidates <withdrawal-id> lists it, \
             1 to 128 characters"
        }
        _ => return None,
    })
}

/// How a command ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// Success (exit 0).
    Ok,
    /// `watch` saw REJECTED, VERIFIED_NOT_SENT or FAILED_TERMINAL (exit 4).
    UnwantedFinalState,
    /// `watch` gave up at --until-timeout (exit 5).
    WatchTimedOut,
    /// `watch` reached --until-timeout while the service could not be reached (exit 3).
    WatchUnreachable,
}

impl Done {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            Done::Ok => EXIT_OK,
            Done::UnwantedFinalState => EXIT_UNWANTED_FINAL,
            Done::WatchTimedOut => EXIT_WATCH_TIMEOUT,
            Done::WatchUnreachable => EXIT_UNAVAILABLE,
        }
    }
}

/// The exit code of a command's result.
pub fn exit_code(result: &Result<Done, Failure>) -> ExitCode {
    ExitCode::from(match result {
        Ok(done) => done.exit_code(),
        Err(failure) => failure.exit_code(),
    })
}

/// Transient codes: nothing definite is known, retry is safe for idempotent calls. `CANCELLED`
/// is what tonic reports when the client-side --timeout expires.
pub fn kind_of(code: Code) -> Kind {
    match code {
        Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled => Kind::Transient,
        _ => Kind::Refused,
    }
}

/// An error and its sources, `a: b: c`.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let next = e.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = e.source();
    }
    text
}

/// A URL without any `user:password@` part.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::ErrorDetails;

    fn opledger_status(code: Code, reason: &str, metadata: &[(&str, &str)]) -> Status {
        let mut details = ErrorDetails::new();
        details.set_error_info(
            reason,
            DOMAIN,
            metadata
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<std::collections::HashMap<_, _>>(),
        );
        Status::with_error_details(code, "the chain evidence shows CONFIRMED", details)
    }

    #[test]
    fn a_status_with_error_info_is_a_refusal_with_its_reason() {
        let status = opledger_status(
            Code::FailedPrecondition,
            "EVIDENCE_MISMATCH",
            &[("evidence", "CONFIRMED")],
        );
        let f = Failure::from_status("reconciler", &status);
        assert_eq!(f.kind, Kind::Refused);
        assert_eq!(f.exit_code(), 1);
        assert_eq!(f.code, "FAILED_PRECONDITION");
        assert_eq!(f.reason, "EVIDENCE_MISMATCH");
        assert_eq!(f.message, "the chain evidence shows CONFIRMED");
        assert_eq!(
            f.metadata.get("evidence").map(String::as_str),
            Some("CONFIRMED")
        );
    }

    #[test]
    fn error_info_of_another_domain_is_ignored() {
        let mut details = ErrorDetails::new();
        details.set_error_info("SOMETHING", "example.com", std::collections::HashMap::new());
        let status = Status::with_error_details(Code::NotFound, "no", details);
        let f = Failure::from_status("operations", &status);
        assert_eq!((f.reason.as_str(), f.exit_code()), ("NOT_FOUND", 1));
    }

    #[test]
    fn violations_are_kept() {
        let mut details = ErrorDetails::new();
        details.set_error_info(
            "IDEMPOTENCY_KEY_REUSED",
            DOMAIN,
            std::collections::HashMap::new(),
        );
        details.add_precondition_failure_violation("PAYLOAD", "payload.amount", "differs");
        details.add_bad_request_violation("payload.memo", "must not be empty");
        let status = Status::with_error_details(Code::FailedPrecondition, "reused", details);
        let f = Failure::from_status("operations", &status);
        assert_eq!(
            f.violations,
            vec![
                ("payload.memo".to_owned(), "must not be empty".to_owned()),
                ("payload.amount".to_owned(), "differs".to_owned())
            ]
        );
    }

    #[test]
    fn transient_codes_exit_3_and_everything_else_1() {
        for code in [Code::Unavailable, Code::DeadlineExceeded, Code::Cancelled] {
            let f = Failure::from_status("operations", &Status::new(code, "tcp connect error"));
            assert_eq!(f.exit_code(), 3, "{code:?}");
            assert_eq!(f.message, "operations service: tcp connect error");
        }
        // The store being down is UNAVAILABLE with a reason: transient, reason kept.
        let f = Failure::from_status(
            "operations",
            &opledger_status(Code::Unavailable, "STORE_UNAVAILABLE", &[]),
        );
        assert_eq!((f.exit_code(), f.reason.as_str()), (3, "STORE_UNAVAILABLE"));
        for code in [
            Code::InvalidArgument,
            Code::NotFound,
            Code::PermissionDenied,
            Code::Unauthenticated,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::Internal,
            Code::Unimplemented,
            Code::Unknown,
        ] {
            let f = Failure::from_status("operations", &Status::new(code, "x"));
            assert_eq!(f.exit_code(), 1, "{code:?}");
            assert_eq!(f.reason, code_name(code));
        }
        let f = Failure::from_status("approvals", &Status::new(Code::Internal, ""));
        assert_eq!(f.message, "approvals service answered INTERNAL");
    }

    #[test]
    fn signed_approval_refusals_have_hints() {
        for reason in [
            "APPROVER_KEY_UNKNOWN",
            "APPROVER_KEY_REVOKED",
            "APPROVAL_SIGNATURE_INVALID",
            "APPROVAL_FOR_OTHER_OPERATION",
            "POLICY_VERSION_UNKNOWN",
            "TRUST_STATEMENT_MISSING",
            "KYT_PASS_REQUIRED",
            "CREDIT_STATEMENT_INVALID",
            "CREDIT_NOT_PENDING",
            "CREDIT_ID_MISMATCH",
            "CREDIT_UNPARSEABLE",
        ] {
            assert!(hint(reason).is_some(), "{reason}");
        }
        let untrusted = Failure::from(crate::credit_review::Unverified::Field("amount"));
        assert_eq!(
            (untrusted.exit_code(), untrusted.reason.as_str()),
            (6, "CREDIT_UNPARSEABLE")
        );
        assert_eq!(untrusted.metadata["field"], "amount");
        assert!(hint("EVIDENCE_MISMATCH").is_none());
    }

    #[test]
    fn exit_codes_of_outcomes() {
        assert_eq!(Done::Ok.exit_code(), 0);
        assert_eq!(Done::UnwantedFinalState.exit_code(), 4);
        assert_eq!(Done::WatchTimedOut.exit_code(), 5);
        assert_eq!(Failure::usage("bad").exit_code(), 2);
        assert_eq!(
            Failure::refused_locally("RISK_FLAGS_NOT_ACKNOWLEDGED", "ack", &[]).exit_code(),
            1
        );
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let f = Failure::unreachable("inbox", "http://u:p@127.0.0.1:1/x", &io);
        assert_eq!(f.exit_code(), 3);
        assert_eq!(
            f.message,
            "cannot connect to the inbox service at http://127.0.0.1:1/x: refused"
        );
    }

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            redact_url("http://127.0.0.1:15051"),
            "http://127.0.0.1:15051"
        );
        assert_eq!(redact_url("http://a:b@host:1/p@q"), "http://host:1/p@q");
        assert_eq!(redact_url("host:1"), "host:1");
    }

    #[test]
    fn error_chains_are_joined_once() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("transport error")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = Outer(std::io::Error::other("connection refused"));
        assert_eq!(error_chain(&e), "transport error: connection refused");
    }
}
